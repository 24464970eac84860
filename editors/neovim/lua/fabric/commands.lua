-- The :Fabric command: one entry point, subcommands, completion.
local lsp = require('fabric.lsp')
local references = require('fabric.references')
local buffers = require('fabric.buffers')
local sessions = require('fabric.sessions')
local ui = require('fabric.ui')
local stale = require('fabric.stale')
local views = require('fabric.views')

local M = {}

---A domain error result ({code, message, candidates?}) as one message.
---@param e table
---@return string
function M.domain_error(e)
  local msg = ('%s: %s'):format(tostring(e.code), tostring(e.message))
  if type(e.candidates) == 'table' and #e.candidates > 0 then
    msg = msg .. ' (candidates: ' .. table.concat(e.candidates, ', ') .. ')'
  end
  return msg
end

---Expand entries of `session` and show them in a scratch markdown buffer.
---@param session string id or path
---@param selector table exactly one of indices / entryIds / operationAddresses / entryRange
---  (plus expectedSourceHash / expectedLineageFingerprint)
---@param done fun(ok: boolean, msg: string?)
---@param opts? {query?: string} a recall query: its matches are highlighted and the first shown
function M.expand_entries(session, selector, done, opts)
  local params = vim.tbl_extend('force', { session = session }, selector)
  lsp.request('fabric/expand', params, function(err, result)
    if err then
      return done(false, err)
    end
    if type(result.error) == 'table' then
      return done(false, M.domain_error(result.error))
    end
    local first = result.expanded and result.expanded[1]
    local name = ('fabric://expand/%s/%s'):format(result.sessionId, first and first.entryId or 'none')
    if result.expanded and #result.expanded > 1 then
      name = name .. ('+%d'):format(#result.expanded - 1)
    end
    local buf = ui.scratch(name, views.expanded(result), {
      filetype = 'markdown',
      vars = { fabric_session = result.sessionFile, fabric_kind = 'expand' },
    })
    M.attach_scratch(buf)
    local match = require('fabric.match')
    vim.api.nvim_buf_clear_namespace(buf, match.ns, 0, -1)
    if opts and opts.query and opts.query ~= '' then
      -- Only the entry text, after the blank line that ends its header.
      match.apply(buf, match.body_spans(vim.api.nvim_buf_get_lines(buf, 0, -1, false), opts.query))
      local marks = vim.api.nvim_buf_get_extmarks(buf, match.ns, 0, -1, {})
      if marks[1] and vim.api.nvim_get_current_buf() == buf then
        vim.api.nvim_win_set_cursor(0, { marks[1][2] + 1, marks[1][3] })
        vim.cmd('normal! zz')
      end
    end
    done(true)
  end)
end

---Attach the fabric client to a scratch buffer so hover and gd work on its references.
---@param buf integer
function M.attach_scratch(buf)
  local client = lsp.get_client(buf)
  if client and not vim.lsp.buf_is_attached(buf, client.id) then
    pcall(vim.lsp.buf_attach_client, buf, client.id)
  end
end

local subcommands = {}

subcommands.recall = {
  desc = 'search past sessions (scope=session|project|global|session:<id>|team|team:<member>): a picker (! = quickfix list)',
  complete_arg = function(arglead)
    return require('fabric.recall').complete(arglead)
  end,
  run = function(args, cmd)
    require('fabric.recall').command(args, cmd.bang)
  end,
}

subcommands.expand = {
  desc = 'show the full entry under the cursor (a reference or a session JSONL line; a range expands several)',
  run = function(args, cmd)
    local function done(ok, msg)
      ui.done('expand', ok, msg)
    end
    -- An explicit reference argument (docs/protocol.md's grammar: a bare entry id or
    -- operation address means the session at hand), else the reference under the cursor.
    if args ~= '' then
      local parsed, perr = references.parse(args)
      if not parsed then
        return done(false, perr)
      end
      local session = parsed.session
      local short = session and sessions.too_short(session)
      if short then
        return done(false, short)
      end
      if not session then
        local here = buffers.session_at_hand(0)
        if not here then
          return done(
            false,
            ('%q names no session: use it in a session JSONL buffer, or write <session>/%s'):format(args, parsed.entry)
          )
        end
        session = here.path
      elseif references.is_path(session) and not vim.startswith(session, 'file://') then
        session = vim.fn.fnamemodify(vim.fn.expand(session), ':p')
      end
      local selector = parsed.operation
          and { operationAddresses = { ('%s/%d'):format(parsed.entry, parsed.operation) } }
        or { entryIds = { parsed.entry } }
      return M.expand_entries(session, selector, done)
    end
    local ref = buffers.under_cursor()
    if ref then
      return M.expand_entries(ref.session_id, { entryIds = { ref.entry_id } }, done)
    end
    local here = buffers.session_of_buffer(0)
    if not here then
      return done(false, 'no entry reference under the cursor and this is not a session JSONL buffer')
    end
    local first, last = vim.fn.line('.'), vim.fn.line('.')
    if cmd.range > 0 then
      first, last = cmd.line1, cmd.line2
    end
    local ids = {}
    for lnum = first, last do
      local id = buffers.entry_id_at(0, lnum)
      if id then
        ids[#ids + 1] = id
      end
    end
    if #ids == 0 then
      return done(false, ('no session entry on line %d'):format(first))
    end
    M.expand_entries(here.path, { entryIds = ids }, done)
  end,
}

---Show (or, with `show` false, only refresh) the preview buffer of a compaction preview.
---@param result table fabric/compactionPreview result
---@param params table the request's params (kept to refresh the buffer later)
---@param show boolean
---@return integer? bufnr
function M.render_preview(result, params, show)
  local name = 'fabric://preview/' .. tostring(result.sessionId)
  local lines = views.preview(result)
  local buf
  if show then
    buf = ui.scratch(name, lines, {
      filetype = 'markdown',
      vars = { fabric_session = result.sessionFile or params.session, fabric_kind = 'preview' },
    })
    -- One fold per section (cut map, budget, summary), all open.
    local win = vim.fn.bufwinid(buf)
    if win ~= -1 then
      vim.wo[win].foldmethod = 'expr'
      vim.wo[win].foldexpr = "v:lua.require'fabric.views'.foldexpr(v:lnum)"
      vim.wo[win].foldlevel = 99
    end
    M.attach_scratch(buf)
  else
    buf = vim.fn.bufnr('^' .. vim.fn.escape(name, '\\/.*$^~[]') .. '$')
    if buf == -1 then
      return nil
    end
    ui.replace(buf, lines)
  end
  vim.b[buf].fabric_preview_params = params
  views.mark_cut(result)
  if show and require('fabric.config').get().keymaps then
    -- K on a bare entry id (cut map, summary) shows the entry; gd (LspAttach) jumps to it.
    vim.keymap.set('n', 'K', function()
      require('fabric.buffers').hover()
    end, { buffer = buf, desc = 'Fabric: the entry under the cursor' })
  end
  return buf
end

---The path a session string names, for comparing (an id stays as it is).
local function same_session(a, b)
  if type(a) ~= 'string' or type(b) ~= 'string' then
    return false
  end
  local function norm(x)
    return x:find('/', 1, true) and vim.fs.normalize(vim.fn.fnamemodify(x, ':p')) or x
  end
  return norm(a) == norm(b)
end

---Re-request every loaded preview buffer of `session` (a path or id; nil: every one) and
---replace its text in place, without moving the cursor to it. Fires `User
---FabricViewRefreshed` ({buf, kind, session}) for each. Called when a compaction of that
---session is committed (fabric/compactionCommitted).
---@param session string?
function M.refresh_previews(session)
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    local params = vim.api.nvim_buf_is_loaded(buf) and vim.b[buf].fabric_kind == 'preview'
      and vim.b[buf].fabric_preview_params or nil
    if type(params) == 'table' and (session == nil or same_session(vim.b[buf].fabric_session, session)
        or same_session(params.session, session)) then
      lsp.request('fabric/compactionPreview', params, function(err, result)
        if err or type(result) ~= 'table' or type(result.error) == 'table' or not vim.api.nvim_buf_is_valid(buf) then
          if vim.api.nvim_buf_is_valid(buf) then
            -- A view that cannot be fresh says so.
            local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
            table.insert(lines, 1, '> **Out of date**: the session changed and the preview could not be refreshed: '
              .. tostring(err or (type(result) == 'table' and type(result.error) == 'table' and M.domain_error(result.error)) or '?'))
            ui.replace(buf, lines)
          end
        else
          M.render_preview(result, params, false)
        end
        vim.api.nvim_exec_autocmds('User', {
          pattern = 'FabricViewRefreshed',
          modeline = false,
          data = { buf = buf, kind = 'preview', session = vim.b[buf].fabric_session, ok = err == nil },
        })
      end)
    end
  end
end

subcommands.preview = {
  desc = 'preview the compaction summary and budget of a session',
  complete = 'session',
  run = function(args)
    sessions.resolve(args, 'Preview compaction of:', function(err, session)
      if err or not session then
        return ui.done('preview', err == nil, err or 'dismissed')
      end
      local params = vim.tbl_extend('force', require('fabric.config').preview_params(), { session = session })
      lsp.request('fabric/compactionPreview', params, function(rerr, result)
        if rerr then
          return ui.done('preview', false, rerr)
        end
        if type(result.error) == 'table' then
          return ui.done('preview', false, M.domain_error(result.error))
        end
        M.render_preview(result, params, true)
        ui.done('preview', true)
      end)
    end)
  end,
}

-- What this editor last asked of each session's compaction (`:Fabric status` shows it):
-- session (as the command named it) -> {at, state, message?}.
M.last_request = {}

local function note_request(session, state, message)
  M.last_request[session] = { at = os.time(), state = state, message = message }
end

---An error of lsp.request without its trailing JSON-RPC code ("… (-32602)").
local function plain(err)
  return (tostring(err):gsub('%s*%(%-?%d+%)$', ''))
end

local function fmt_int(n)
  local s = tostring(math.floor((tonumber(n) or 0) + 0.5))
  return (s:reverse():gsub('(%d%d%d)', '%1,'):reverse():gsub('^,', ''))
end

---The confirmation question for a compaction preview that compacts.
---@param preview table fabric/compactionPreview result (outcome "compacted")
---@param label string the session as messages name it
---@return string
function M.confirm_prompt(preview, label)
  local rows = views.cut_map(preview)
  local summarized
  for _, r in ipairs(rows) do
    if r.kind == 'summarized' then
      summarized = r
    end
  end
  local details = type(preview.details) == 'table' and preview.details or {}
  local after = type(details.budget) == 'table' and tonumber(details.budget.projectedTokensAfter) or nil
  local before = tonumber(preview.tokensBefore)
  local what = summarized
      and ('replaces %s entries (lines %d–%d) with a summary'):format(
        fmt_int(summarized.count), summarized.first.line, summarized.last.line)
    or 'replaces the older entries with a summary'
  local saved = (before and after) and ('saves about %s tokens (%s → %s)'):format(
    fmt_int(before - after), fmt_int(before), fmt_int(after)) or 'tokens saved unknown'
  return ('Compact %s? It %s and %s; this cannot be undone.'):format(label, what, saved)
end

M.CONFIRM, M.CANCEL = 'Compact now', 'Cancel'

---Send fabric/compact/request for `session` and report the answer once.
local function request_compaction(session, instructions, label)
  local params = { session = session, requestedBy = 'user' }
  if instructions ~= '' then
    params.instructions = instructions
  end
  lsp.request('fabric/compact/request', params, function(rerr, result)
    if not rerr and type(result) == 'table' and type(result.error) == 'table' then
      rerr = M.domain_error(result.error)
    end
    if rerr then
      local msg = plain(rerr)
      if msg:find('Nothing to compact', 1, true) then
        -- The server's refusal: nothing was recorded, and it says why.
        note_request(session, 'refused', msg)
        ui.notify(('Fabric: %s was not compacted: %s'):format(label, msg), vim.log.levels.WARN)
        return ui.done('compact', true, msg)
      end
      note_request(session, 'failed', msg)
      return ui.done('compact', false, msg)
    end
    note_request(session, 'requested')
    ui.notify(('Fabric: compaction requested for %s; it commits when the session is settled'):format(label))
    ui.done('compact', true)
  end)
end

subcommands.compact = {
  desc = 'request a compaction (asks first), committed when the session is settled',
  run = function(args)
    sessions.resolve(nil, 'Compact session:', function(err, session)
      if err or not session then
        return ui.done('compact', err == nil, err or 'dismissed')
      end
      local label = sessions.label(session)
      if not require('fabric.config').get().compact.confirm then
        return request_compaction(session, args, label)
      end
      -- Ask first, with what the commit would do: a preview at the server's settings (the
      -- request carries no budget) and the request's instructions.
      local pparams = { session = session }
      if args ~= '' then
        pparams.instructions = args
      end
      lsp.request('fabric/compactionPreview', pparams, function(perr, preview)
        if not perr and type(preview) == 'table' and type(preview.error) == 'table' then
          perr = M.domain_error(preview.error)
        end
        if perr then
          note_request(session, 'failed', plain(perr))
          return ui.done('compact', false, plain(perr))
        end
        label = sessions.label(preview.sessionFile or session, preview.sessionId)
        if preview.outcome ~= 'compacted' then
          local why = ui.present(preview.reason) and tostring(preview.reason) or tostring(preview.outcome)
          note_request(session, 'not requested', why)
          ui.notify(('Fabric: %s has nothing to compact: %s; nothing was requested'):format(label, why),
            vim.log.levels.WARN)
          return ui.done('compact', true, why)
        end
        vim.ui.select({ M.CONFIRM, M.CANCEL }, {
          prompt = M.confirm_prompt(preview, label),
          kind = 'fabric.confirm',
        }, function(choice)
          if choice ~= M.CONFIRM then
            note_request(session, 'cancelled', 'cancelled at the confirmation')
            return ui.done('compact', true, 'dismissed')
          end
          request_compaction(session, args, label)
        end)
      end)
    end)
  end,
}

---Lines describing a fabric/compact/status result.
local function status_lines(session, result)
  local lines = { 'Fabric: ' .. session }
  if type(result.pending) == 'table' then
    local p = result.pending
    local line = ('  pending compaction requested by %s at %s'):format(tostring(p.requestedBy), ui.time(p.requestedAt))
    if ui.present(p.instructions) then
      line = line .. ': ' .. ui.excerpt(p.instructions, 80)
    end
    lines[#lines + 1] = line
  else
    lines[#lines + 1] = '  no pending compaction'
  end
  if type(result.last) == 'table' then
    local l = result.last
    local line = ('  last: %s at %s by %s'):format(tostring(l.status), ui.time(l.at), tostring(l.requestedBy))
    if ui.present(l.tokensBefore) then
      line = line .. (', %s tokens before'):format(l.tokensBefore)
    end
    if ui.present(l.error) then
      line = line .. ': ' .. tostring(l.error)
    end
    lines[#lines + 1] = line
  end
  local mine = M.last_request[session]
  if mine then
    local line = ('  last request from this editor: %s at %s'):format(mine.state, os.date('!%Y-%m-%dT%H:%M:%SZ', mine.at))
    if mine.message then
      line = line .. ': ' .. ui.excerpt(mine.message, 160)
    end
    lines[#lines + 1] = line
  end
  lines[#lines + 1] = '  session ' .. (result.settled and 'settled' or 'not settled (a turn is running or the file changed recently)')
  if type(result.heldBy) == 'table' then
    lines[#lines + 1] = ('  held by a live Pi (pid %s): Pi commits the pending compaction'):format(tostring(result.heldBy.pid))
  end
  return lines
end

subcommands.status = {
  desc = 'server state and the compaction status of a session',
  complete = 'session',
  run = function(args)
    local client = lsp.get_client(0)
    local head
    if client then
      local info = client.server_info or {}
      head = ('Fabric: %s %s (client %d, %s)'):format(
        info.name or 'fabric-lsp',
        info.version or '?',
        client.id,
        client.initialized and 'running' or 'starting'
      )
    else
      head = 'Fabric: server not running yet'
    end
    sessions.resolve(args, 'Compaction status of:', function(err, session)
      if err or not session then
        ui.notify(head)
        return ui.done('status', err == nil, err or 'dismissed')
      end
      lsp.request('fabric/compact/status', { session = session }, function(rerr, result)
        if not rerr and type(result.error) == 'table' then
          rerr = M.domain_error(result.error)
        end
        if rerr then
          ui.notify(head)
          return ui.done('status', false, rerr)
        end
        require('fabric.statusline').set(session, result)
        ui.notify(head .. '\n' .. table.concat(status_lines(session, result), '\n'))
        ui.done('status', true)
      end)
    end)
  end,
}

subcommands.cancel = {
  desc = 'cancel the pending compaction request of a session',
  complete = 'session',
  run = function(args)
    sessions.resolve(args, 'Cancel pending compaction of:', function(err, session)
      if err or not session then
        return ui.done('cancel', err == nil, err or 'dismissed')
      end
      lsp.request('fabric/compact/cancel', { session = session }, function(rerr, result)
        if rerr then
          return ui.done('cancel', false, rerr)
        end
        if type(result.error) == 'table' then
          return ui.done('cancel', false, M.domain_error(result.error))
        end
        if result.cancelled then
          ui.notify('Fabric: cancelled the pending compaction of ' .. session)
        else
          ui.notify('Fabric: no pending compaction for ' .. session)
        end
        ui.done('cancel', true)
      end)
    end)
  end,
}

subcommands.sessions = {
  desc = 'list sessions (project or global) and open one (! = quickfix list)',
  complete = function()
    return { 'project', 'global' }
  end,
  run = function(args, cmd)
    local scope = args ~= '' and args or 'project'
    if scope ~= 'project' and scope ~= 'global' then
      return ui.done('sessions', false, ('unknown scope %q (project or global)'):format(scope))
    end
    sessions.list(scope, function(err, result)
      if err then
        return ui.done('sessions', false, err)
      end
      local list = result.sessions or {}
      if #list == 0 then
        ui.notify(('Fabric: no sessions (%s scope)'):format(scope), vim.log.levels.WARN)
        return ui.done('sessions', true)
      end
      if cmd.bang then
        local qf = {}
        for _, info in ipairs(list) do
          qf[#qf + 1] = { filename = info.sessionFile, lnum = 1, col = 1, text = sessions.format_item(info) }
        end
        vim.fn.setqflist({}, ' ', { title = 'Fabric sessions (' .. scope .. ')', items = qf })
        vim.cmd('botright copen')
        return ui.done('sessions', true)
      end
      -- The configured picker (option `picker`), as :Fabric recall uses it.
      require('fabric.picker').pick({
        items = list,
        prompt = ('Fabric sessions (%s): %d'):format(scope, tonumber(result.totalItems) or #list),
        kind = 'fabric.session',
        display = function(info)
          return sessions.format_item(info), {}
        end,
        on_choice = function(choice)
          if choice then
            buffers.open_jsonl(choice.sessionFile, 0)
          end
          ui.done('sessions', true, choice and nil or 'dismissed')
        end,
      })
    end)
  end,
}

---One line of a file-history operation (`fabric/fileHistory` item).
---@param op table
---@return string
function M.format_operation(op)
  local when = type(op.timestamp) == 'number' and os.date('!%Y-%m-%dT%H:%M:%SZ', math.floor(op.timestamp / 1000))
    or tostring(op.timestamp or 'unknown time')
  local via = op.operationRef and (' via ' .. op.operationRef) or ''
  return ('%s %s  %s  %s%s  %s'):format(
    op.action, op.outcome, tostring(op.sessionId):sub(1, 8), when, via, op.ref or ('#' .. tostring(op.index)))
end

---What past Pi sessions did to `path` (absolute): a picker that expands the chosen entry,
---or (bang) the quickfix list.
---@param path string
---@param bang boolean
---Quickfix list title and items of a fabric/fileHistory result.
local function history_list(path, result)
  local items = result.items or {}
  local title = ('Fabric history of %s: %d operations in %d sessions'):format(
    vim.fn.fnamemodify(path, ':~:.'), tonumber(result.totalItems) or #items, tonumber(result.totalSessions) or 0)
    .. stale.note(result)
  local qf = {}
  for _, op in ipairs(items) do
    -- `line` is the 0-based line of the operation's entry in its session file.
    local lnum = type(op.line) == 'number' and op.line + 1 or 1
    qf[#qf + 1] = { filename = op.sessionFile, lnum = lnum, col = 1, text = M.format_operation(op), user_data = op }
  end
  return title, qf
end

---Search a partial history's quickfix list `qid` again (the index is complete), in place.
local function requery_history(qid, path)
  lsp.request('fabric/fileHistory', { path = path, pageSize = 200 }, function(err, result)
    if err or type(result) ~= 'table' or not stale.qf_alive(qid) then
      return
    end
    local title, qf = history_list(path, result)
    vim.fn.setqflist({}, 'r', { id = qid, title = title, items = qf })
    stale.track_quickfix(result, 'the history of ' .. vim.fn.fnamemodify(path, ':~:.'), qid, function()
      requery_history(qid, path)
    end)
    ui.notify(('Fabric history: indexing is complete; the quickfix list of %s now covers every session (%d operation%s)')
      :format(vim.fn.fnamemodify(path, ':~:.'), #qf, #qf == 1 and '' or 's'))
  end)
end

function M.history(path, bang)
  lsp.request('fabric/fileHistory', { path = path, pageSize = 200 }, function(err, result)
    if err then
      return ui.done('history', false, err)
    end
    local items = result.items or {}
    local label = 'the history of ' .. vim.fn.fnamemodify(path, ':~:.')
    local partial = stale.partial(result)
    if #items == 0 and not (bang and partial) then
      ui.notify('Fabric: no Pi session read, edited or wrote ' .. path .. stale.note(result), vim.log.levels.WARN)
      stale.track_message(result, label)
      return ui.done('history', true)
    end
    local title, qf = history_list(path, result)
    if bang then
      vim.fn.setqflist({}, ' ', { title = title, items = qf })
      local qid = vim.fn.getqflist({ id = 0 }).id
      stale.track_quickfix(result, label, qid, function()
        requery_history(qid, path)
      end)
      vim.cmd('botright copen')
      return ui.done('history', true)
    end
    local open = true
    if partial then
      stale.track({
        label = label,
        still_shown = function()
          return open
        end,
      })
    end
    vim.ui.select(items, { prompt = title, format_item = M.format_operation, kind = 'fabric.file_operation' },
      function(choice)
        open = false
        if not choice then
          return ui.done('history', true, 'dismissed')
        end
        M.expand_entries(choice.sessionFile, { indices = { choice.index }, branches = result.branches },
          function(ok, msg)
            ui.done('history', ok, msg)
          end)
      end)
  end)
end

subcommands.history = {
  desc = 'what past Pi sessions did to a file (default: this buffer); ! = quickfix list',
  complete = function()
    return vim.fn.getcompletion('', 'file')
  end,
  run = function(args, cmd)
    local path = args ~= '' and args or vim.api.nvim_buf_get_name(0)
    if path == '' or vim.startswith(path, 'fabric://') then
      return ui.done('history', false, 'no file: give a path or open a file')
    end
    M.history(vim.fs.normalize(vim.fn.fnamemodify(path, ':p')), cmd.bang)
  end,
}

subcommands.branchsummary = {
  desc = 'preview the branch summary Pi would write when moving to an entry (default: the entry on the cursor line)',
  run = function(args)
    local here = buffers.session_at_hand(0)
    local target, from = args:match('^(%S+)%s*(%S*)$')
    if not target then
      target = buffers.session_of_buffer(0) and buffers.entry_id_at(0, vim.fn.line('.')) or nil
    end
    if not here then
      return ui.done('branchsummary', false, 'not a session: run it in a session JSONL buffer (or a Fabric scratch buffer of one)')
    end
    if not target then
      return ui.done('branchsummary', false,
        'no target entry: put the cursor on an entry line or give its id (:Fabric branchsummary <entry> [from-entry])')
    end
    local params = { session = here.path, targetId = target }
    if from and from ~= '' then
      params.fromId = from
    end
    lsp.request('fabric/branchSummaryPreview', params, function(err, result)
      if not err and type(result) == 'table' and type(result.error) == 'table' then
        err = M.domain_error(result.error)
      end
      if err then
        return ui.done('branchsummary', false, err)
      end
      local lines = {
        '# Branch summary preview: ' .. references.format(here.id, target),
        '',
        '- outcome: ' .. tostring(result.outcome),
        '- entries summarized: ' .. tostring(result.entriesSummarized),
      }
      if ui.present(result.commonAncestorId) then
        lines[#lines + 1] = '- common ancestor: ' .. references.format(here.id, result.commonAncestorId)
      end
      if ui.present(result.reason) then
        lines[#lines + 1] = '- reason: ' .. tostring(result.reason)
      end
      vim.list_extend(lines, { '', '## Summary', '' })
      if ui.present(result.summary) then
        vim.list_extend(lines, ui.lines(result.summary))
      else
        lines[#lines + 1] = '(no summary: ' .. tostring(result.outcome) .. ')'
      end
      local buf = ui.scratch('fabric://branch-summary/' .. here.id .. '/' .. target, lines, {
        filetype = 'markdown',
        vars = { fabric_session = here.path, fabric_kind = 'branch-summary' },
      })
      M.attach_scratch(buf)
      ui.done('branchsummary', true)
    end)
  end,
}

---`value` as indented JSON, keys sorted (for reading, not parsing back).
---@param value any
---@param indent? string
---@return string
function M.pretty_json(value, indent)
  indent = indent or ''
  if type(value) ~= 'table' or vim.tbl_isempty(value) then
    return vim.json.encode(value == nil and vim.NIL or value)
  end
  local inner, parts = indent .. '  ', {}
  if vim.islist(value) then
    for _, v in ipairs(value) do
      parts[#parts + 1] = inner .. M.pretty_json(v, inner)
    end
    return '[\n' .. table.concat(parts, ',\n') .. '\n' .. indent .. ']'
  end
  local keys = vim.tbl_keys(value)
  table.sort(keys, function(a, b)
    return tostring(a) < tostring(b)
  end)
  for _, k in ipairs(keys) do
    parts[#parts + 1] = ('%s%s: %s'):format(inner, vim.json.encode(tostring(k)), M.pretty_json(value[k], inner))
  end
  return '{\n' .. table.concat(parts, ',\n') .. '\n' .. indent .. '}'
end

subcommands.reload = {
  desc = "re-read the server's configuration and drop its caches; shows the effective settings",
  run = function()
    lsp.request('workspace/executeCommand', { command = 'fabric.reload', arguments = { vim.empty_dict() } },
      function(err, result)
        if err then
          return ui.done('reload', false, err)
        end
        ui.scratch('fabric://settings', ui.lines(M.pretty_json(result)), { filetype = 'json' })
        ui.notify('Fabric: configuration re-read and caches dropped; the effective settings are in fabric://settings')
        ui.done('reload', true)
      end)
  end,
}

subcommands.log = {
  desc = "show the server's log messages",
  run = function()
    local lines = { '# fabric-lsp log', '', 'Neovim LSP log: ' .. vim.lsp.get_log_path(), '' }
    vim.list_extend(lines, lsp.log_lines)
    if #lsp.log_lines == 0 then
      lines[#lines + 1] = '(no messages from the server yet)'
    end
    ui.scratch('fabric://log', lines, { filetype = 'log' })
    ui.done('log', true)
  end,
}

M.subcommands = subcommands

---Names of the subcommands, sorted.
function M.names()
  local names = vim.tbl_keys(subcommands)
  table.sort(names)
  return names
end

---:Fabric handler.
---@param cmd table nvim_create_user_command callback argument
function M.run(cmd)
  local name, rest = cmd.args:match('^%s*(%S+)%s*(.-)%s*$')
  if not name then
    ui.notify('Fabric: subcommands: ' .. table.concat(M.names(), ', '))
    return ui.done('', false, nil)
  end
  -- `:Fabric recall! q` (bang on the subcommand) and `:Fabric! recall q` mean the same.
  local bang = cmd.bang
  if name:sub(-1) == '!' then
    name, bang = name:sub(1, -2), true
  end
  cmd = vim.tbl_extend('force', cmd, { bang = bang })
  local sub = subcommands[name]
  if not sub then
    return ui.done(name, false, ('unknown subcommand %q (one of: %s)'):format(name, table.concat(M.names(), ', ')))
  end
  local ok, err = xpcall(sub.run, debug.traceback, rest, cmd)
  if not ok then
    ui.done(name, false, err)
  end
end

---:Fabric completion.
function M.complete(arglead, cmdline, _)
  local before = cmdline:gsub('^%s*%S*Fabric!?%s*', '', 1)
  local words = vim.split(before, '%s+', { trimempty = false })
  if #words <= 1 then
    return vim.tbl_filter(function(n)
      return vim.startswith(n, arglead)
    end, M.names())
  end
  local sub = subcommands[(words[1]:gsub('!$', ''))]
  if sub and sub.complete_arg then
    return sub.complete_arg(arglead, words)
  end
  if not sub or not sub.complete or #words > 2 then
    return {}
  end
  local candidates
  if sub.complete == 'session' then
    candidates = vim.tbl_keys(sessions.known_ids)
    table.sort(candidates)
  else
    candidates = sub.complete()
  end
  return vim.tbl_filter(function(c)
    return vim.startswith(c, arglead)
  end, candidates)
end

return M
