-- The :Fabric command: one entry point, subcommands, completion.
local lsp = require('fabric.lsp')
local references = require('fabric.references')
local refs = require('fabric.refs')
local sessions = require('fabric.sessions')
local ui = require('fabric.ui')
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
  desc = 'search past sessions: a picker (! = quickfix list)',
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
      if not session then
        local here = refs.session_at_hand(0)
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
    local ref = refs.under_cursor()
    if ref then
      return M.expand_entries(ref.session_id, { entryIds = { ref.entry_id } }, done)
    end
    local here = refs.session_of_buffer(0)
    if not here then
      return done(false, 'no entry reference under the cursor and this is not a session JSONL buffer')
    end
    local first, last = vim.fn.line('.'), vim.fn.line('.')
    if cmd.range > 0 then
      first, last = cmd.line1, cmd.line2
    end
    local ids = {}
    for lnum = first, last do
      local id = refs.entry_id_at(0, lnum)
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
        local buf = ui.scratch('fabric://preview/' .. tostring(result.sessionId), views.preview(result), {
          filetype = 'markdown',
          vars = { fabric_session = result.sessionFile or session, fabric_kind = 'preview' },
        })
        -- One fold per section (cut map, budget, summary), all open.
        local win = vim.fn.bufwinid(buf)
        if win ~= -1 then
          vim.wo[win].foldmethod = 'expr'
          vim.wo[win].foldexpr = "v:lua.require'fabric.views'.foldexpr(v:lnum)"
          vim.wo[win].foldlevel = 99
        end
        M.attach_scratch(buf)
        ui.done('preview', true)
      end)
    end)
  end,
}

subcommands.compact = {
  desc = 'request a compaction, committed when the session is settled',
  run = function(args)
    sessions.resolve(nil, 'Compact session:', function(err, session)
      if err or not session then
        return ui.done('compact', err == nil, err or 'dismissed')
      end
      local params = { session = session, requestedBy = 'user' }
      if args ~= '' then
        params.instructions = args
      end
      lsp.request('fabric/compact/request', params, function(rerr, result)
        if rerr then
          return ui.done('compact', false, rerr)
        end
        if type(result) == 'table' and type(result.error) == 'table' then
          return ui.done('compact', false, M.domain_error(result.error))
        end
        ui.notify(('Fabric: compaction requested for %s; it commits when the session is settled'):format(session))
        ui.done('compact', true)
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
      vim.ui.select(list, {
        prompt = ('Fabric sessions (%s): %d'):format(scope, tonumber(result.totalItems) or #list),
        format_item = sessions.format_item,
        kind = 'fabric.session',
      }, function(choice)
        if choice then
          refs.open_jsonl(choice.sessionFile, 0)
        end
        ui.done('sessions', true, choice and nil or 'dismissed')
      end)
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
function M.history(path, bang)
  lsp.request('fabric/fileHistory', { path = path, pageSize = 200 }, function(err, result)
    if err then
      return ui.done('history', false, err)
    end
    local items = result.items or {}
    if #items == 0 then
      ui.notify('Fabric: no Pi session read, edited or wrote ' .. path, vim.log.levels.WARN)
      return ui.done('history', true)
    end
    local title = ('Fabric history of %s: %d operations in %d sessions'):format(
      vim.fn.fnamemodify(path, ':~:.'), tonumber(result.totalItems) or #items, tonumber(result.totalSessions) or 0)
    if bang then
      local qf = {}
      for _, op in ipairs(items) do
        qf[#qf + 1] = { filename = op.sessionFile, lnum = 1, col = 1, text = M.format_operation(op), user_data = op }
      end
      vim.fn.setqflist({}, ' ', { title = title, items = qf })
      vim.cmd('botright copen')
      return ui.done('history', true)
    end
    vim.ui.select(items, { prompt = title, format_item = M.format_operation, kind = 'fabric.file_operation' },
      function(choice)
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
