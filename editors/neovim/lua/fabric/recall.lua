-- :Fabric recall [query] (picker) and :Fabric recall! [query] (quickfix list).
local config = require('fabric.config')
local lsp = require('fabric.lsp')
local match = require('fabric.match')
local buffers = require('fabric.buffers')
local references = require('fabric.references')
local team = require('fabric.team')
local ui = require('fabric.ui')
local stale = require('fabric.stale')

local M = {}

---The scope for a recall from the current buffer.
---@return string
function M.scope()
  local scope = config.get().recall.scope
  if scope ~= 'auto' then
    return scope
  end
  local here = buffers.session_of_buffer(0)
  if here then
    return 'session:' .. here.path
  end
  return 'project'
end

---Picker items of a fabric/recall result: one per matched entry of each segment (the first
---entry when none is marked), one per cold pointer, and "next page" when there is one. An
---item of a team answer carries the `member` and `machine` that pushed its session.
---@param result table
---@param query? string the query as typed (`/pattern/` for a regex); default result.query
---@return table[]
function M.items(result, query)
  query = query or result.query
  local items = {}
  for _, item in ipairs(result.items or {}) do
    if item.kind == 'segment' and type(item.segment) == 'table' then
      local seg = item.segment
      local entries = {}
      for _, e in ipairs(seg.entries or {}) do
        if e.matched then
          entries[#entries + 1] = e
        end
      end
      if #entries == 0 and seg.entries and seg.entries[1] then
        entries[1] = seg.entries[1]
      end
      for _, e in ipairs(entries) do
        items[#items + 1] = {
          kind = 'entry',
          sessionId = seg.sessionId,
          sessionFile = seg.sessionFile,
          sourceHash = seg.sourceHash,
          entryId = e.entryId,
          index = e.index,
          line = e.line,
          role = ui.present(e.role) and e.role or e.type,
          toolName = ui.present(e.toolName) and e.toolName or nil,
          timestamp = ui.present(e.timestamp) and e.timestamp or nil,
          text = e.text,
          query = query,
          member = ui.present(seg.member) and seg.member or nil,
          machine = ui.present(seg.machine) and seg.machine or nil,
        }
      end
    elseif item.kind == 'pointer' and type(item.pointer) == 'table' then
      local p = item.pointer
      items[#items + 1] = {
        kind = 'pointer',
        sessionId = p.sessionId,
        sessionFile = p.sessionFile,
        matchedTerms = p.matchedTerms or {},
        lastTs = ui.present(p.lastTs) and p.lastTs or nil,
      }
    end
  end
  return items
end

---The picker line of an item and the byte spans {start, end} (0-based, end exclusive) of
---its matched terms: in an entry's snippet (centred on the first match), in a pointer's
---list of matched terms. `width`: the line's room in display cells (the snippet is cut to
---fit, at least 24 characters), default 100 characters of snippet.
---@param item table
---@param width? integer
---@return string line, integer[][] spans
function M.display(item, width)
  if item.kind == 'next' then
    return ('… next page (%d)'):format(item.page), {}
  elseif item.kind == 'pointer' then
    local head = ('%s  [older session] matches: '):format(item.sessionId)
    local spans, at = {}, #head
    for i, term in ipairs(item.matchedTerms) do
      if i > 1 then
        at = at + 2
      end
      spans[#spans + 1] = { at, at + #term }
      at = at + #term
    end
    return head .. table.concat(item.matchedTerms, ', '), spans
  end
  local who = item.role or '?'
  if item.toolName then
    who = who .. ':' .. item.toolName
  end
  local head = ('%s/%s  [%s]  '):format(item.sessionId:sub(1, 8), item.entryId, who)
  if item.member then
    -- a team item: who pushed it, from which machine
    head = team.label(item) .. '  ' .. head
  end
  local room = width and math.max(24, width - vim.fn.strdisplaywidth(head)) or 100
  local snippet = match.snippet(item.text, item.query, room, 'center')
  local spans = {}
  for _, s in ipairs(match.spans(snippet, item.query)) do
    spans[#spans + 1] = { #head + s[1], #head + s[2] }
  end
  return head .. snippet, spans
end

---The picker line of an item (vim.ui.select's format_item).
---@param item table
---@return string
function M.format_item(item)
  return (M.display(item))
end

---A preview function for the pickers with a preview window (fabric.picker spec.preview):
---the expanded entry exactly as choosing it shows it (fabric/expand, views.expanded), with
---the matches of its text; a short description for pointers and "next page". Answers are
---kept for the life of the returned function (one picker).
---@return fun(item: table, cb: fun(lines: string[], spans: integer[][], title: string))
function M.previewer()
  local cache = {}
  return function(item, cb)
    if item.kind == 'next' then
      return cb({ ('Page %d of the results: choose it to show it.'):format(item.page) }, {}, 'next page')
    elseif item.kind == 'pointer' then
      local lines = {
        '# Older session ' .. tostring(item.sessionId),
        '',
        'file: ' .. tostring(item.sessionFile),
      }
      if item.lastTs then
        lines[#lines + 1] = 'last entry: ' .. ui.time(item.lastTs)
      end
      local terms = 'matches: ' .. table.concat(item.matchedTerms, ', ')
      vim.list_extend(lines, { '', terms, '', 'Its entries are not in the index yet: choose it to search inside this session.' })
      local spans = {}
      for _, s in ipairs(match.spans(terms, table.concat(item.matchedTerms, ' '))) do
        spans[#spans + 1] = { #lines - 3, s[1], s[2] }
      end
      return cb(lines, spans, 'older session')
    end
    local key = table.concat({ item.member or '', item.sessionFile, item.entryId, tostring(item.sourceHash) }, '\0')
    if cache[key] then
      return cb(cache[key].lines, cache[key].spans, cache[key].title)
    end
    if item.member then
      -- a team item: the stored entry, from the team database
      return team.fetch(item, function(err, lines)
        local title = item.member .. ': ' .. references.format(item.sessionId, item.entryId)
        if err then
          return cb({ 'Fabric expand: ' .. err }, {}, title)
        end
        cache[key] = { lines = lines, spans = match.body_spans(lines, item.query), title = title }
        cb(cache[key].lines, cache[key].spans, title)
      end)
    end
    local params = { session = item.sessionFile, entryIds = { item.entryId }, expectedSourceHash = item.sourceHash }
    lsp.request('fabric/expand', params, function(err, result)
      local title = references.format(item.sessionId, item.entryId)
      if not err and type(result) == 'table' and type(result.error) == 'table' then
        err = require('fabric.commands').domain_error(result.error)
      end
      if err then
        return cb({ 'Fabric expand: ' .. tostring(err) }, {}, title)
      end
      local lines = require('fabric.views').expanded(result)
      cache[key] = { lines = lines, spans = match.body_spans(lines, item.query), title = title }
      cb(cache[key].lines, cache[key].spans, title)
    end)
  end
end

---Open a chosen entry: the expanded entry in a scratch buffer, or its JSONL line. A team
---item has no file here: always its stored entry (fabric.team).
---@param item table
---@param done fun(ok: boolean, msg: string?)
function M.open(item, done)
  if item.member then
    return team.open(item, done, { query = item.query })
  end
  if config.get().recall.open_as == 'jsonl' then
    buffers.open_jsonl(item.sessionFile, item.line)
    return done(true)
  end
  require('fabric.commands').expand_entries(
    item.sessionFile,
    { entryIds = { item.entryId }, expectedSourceHash = item.sourceHash },
    done,
    { query = item.query }
  )
end

---How a message names a scope.
local function scope_words(scope, cwd)
  if scope == 'project' then
    return ('project (%s)'):format(vim.fn.fnamemodify(cwd or vim.fn.getcwd(), ':~'))
  elseif scope == 'session' then
    return 'session (the current one)'
  elseif type(scope) == 'string' and vim.startswith(scope, 'session:') then
    return 'session ' .. vim.fn.fnamemodify(scope:sub(#'session:' + 1), ':t')
  elseif type(scope) == 'string' and vim.startswith(scope, 'team:') then
    return ('team member %s'):format(scope:sub(#'team:' + 1))
  end
  return tostring(scope)
end

local function no_match_message(result)
  local query = type(result.query) == 'string' and result.query or ''
  local msg = ('no matches for %q in scope %s'):format(query, scope_words(result.scope))
  local cov = type(result.coverage) == 'table' and result.coverage or {}
  if type(cov.error) == 'table' then
    return ('%s: %s'):format(tostring(cov.error.code), tostring(cov.error.message))
  end
  if result.authoritative == false then
    local reasons = cov.reasons or {}
    msg = msg
      .. ' (not authoritative'
      .. (#reasons > 0 and (': ' .. table.concat(reasons, ', ')) or '')
      .. ')'
  end
  return msg
end

---The picker title: the number of rows it shows (one per matched entry and per older
---session; "next page" is not counted), and how many results (segments and pointers) the
---page and the whole answer hold.
---@param query string
---@param scope string
---@param result table fabric/recall result
---@param items table[] M.items(result) (plus a "next" item)
---@return string
function M.title(query, scope, result, items)
  local rows = 0
  for _, item in ipairs(items) do
    if item.kind ~= 'next' then
      rows = rows + 1
    end
  end
  local on_page = #(result.items or {})
  local total = tonumber(result.totalItems) or on_page
  local title = ('Fabric recall "%s": %d row%s'):format(query, rows, rows == 1 and '' or 's')
  if result.hasNext or (tonumber(result.page) or 1) > 1 then
    title = title .. (' from %d of %d results, page %d'):format(on_page, total, tonumber(result.page) or 1)
  else
    title = title .. (' from %d result%s'):format(total, total == 1 and '' or 's')
  end
  return title .. ' · ' .. scope_words(scope)
end

---The live source of a recall picker (fabric.picker spec.live): the query it opened with,
---and a search that runs the same recall (scope, page size) for another query and answers
---its picker items (none for an empty query; the first page).
---@param query string
---@param params table the fabric/recall params of the first answer
---@return table
function M.live_source(query, params)
  return {
    query = query,
    search = function(text, cb)
      if vim.trim(text) == '' then
        return cb({})
      end
      local p = vim.deepcopy(params)
      p.page, p.query, p.queryMode = 1, text, nil
      local pattern = text:match('^/(.+)/$')
      if pattern then
        p.query, p.queryMode = pattern, 'regex'
      end
      lsp.request('fabric/recall', p, function(err, result)
        if err or type(result) ~= 'table' then
          return cb({})
        end
        if team.is_scope(p.scope) then
          team.remember(result)
        end
        local items = M.items(result, text)
        -- (the float shows the title; the other pickers take the items only)
        cb(items, M.title(text, p.scope, result, items) .. stale.note(result))
      end)
    end,
  }
end

---Quickfix items of recall picker items (M.items).
---@param items table[]
---@param query string
---@return table[]
local function qf_items(items, query)
  local qf = {}
  for _, item in ipairs(items) do
    if item.kind == 'entry' and item.member then
      -- A team item has no file here: its entry opens in a fabric://team/… buffer
      -- (filled by the BufReadCmd of plugin/fabric.lua) with the stored text.
      qf[#qf + 1] = {
        filename = team.register(item),
        lnum = 1,
        col = 1,
        text = ('[%s] %s %s %s'):format(
          item.role or '?',
          team.label(item),
          references.format(item.sessionId, item.entryId),
          match.snippet(item.text, query, 200)
        ),
      }
    elseif item.kind == 'entry' then
      qf[#qf + 1] = {
        filename = item.sessionFile,
        lnum = (item.line or 0) + 1,
        col = 1,
        text = ('[%s] %s %s'):format(
          item.role or '?',
          references.format(item.sessionId, item.entryId),
          match.snippet(item.text, query, 200)
        ),
      }
    else
      qf[#qf + 1] = {
        filename = item.sessionFile,
        lnum = 1,
        col = 1,
        text = '[older session] matches: ' .. table.concat(item.matchedTerms, ', '),
      }
    end
  end
  return qf
end

---`items` with a "next page" item when `result` has one more page.
local function with_next(items, result, params)
  if result.hasNext then
    items[#items + 1] = { kind = 'next', page = (result.page or params.page) + 1 }
  end
  return items
end

---Run a recall and show it.
---@param query string
---@param opts {bang?: boolean, scope?: string, page?: integer}
function M.run(query, opts)
  opts = opts or {}
  local params = {
    scope = opts.scope or M.scope(),
    page = opts.page or 1,
    pageSize = config.get().recall.page_size,
    cwd = vim.fn.getcwd(),
  }
  -- /pattern/ is a regular expression (the server's bounded regex mode).
  local pattern = query:match('^/(.+)/$')
  if pattern then
    params.query, params.queryMode = pattern, 'regex'
  elseif query ~= '' then
    params.query = query
  end
  lsp.request('fabric/recall', params, function(err, result)
    if err then
      return ui.done('recall', false, err)
    end
    local cov = type(result.coverage) == 'table' and result.coverage or {}
    if team.is_scope(params.scope) then
      team.remember(result)
    end
    if type(cov.error) == 'table' and #(result.items or {}) == 0 then
      -- The server says why it could not answer (an invalid or timed-out regex; for a team
      -- scope the database down, team.url unset, …): one error naming what to do; the
      -- quickfix list is left as it was.
      return ui.done('recall', false, no_match_message(result))
    end
    if cov.eligibleSessions == 0 and team.is_scope(params.scope) then
      local member = params.scope:match('^team:(.+)$')
      local msg
      if member then
        team.fetch_members()
        local known = vim.tbl_keys(team.members)
        table.sort(known)
        msg = ('Fabric recall: member %s has pushed no sessions to the team database'):format(member)
          .. (#known > 0 and (' (members: ' .. table.concat(known, ', ') .. ')') or '')
      else
        msg = 'Fabric recall: the team database has no sessions yet; `fabric-lsp team push` sends '
          .. 'the sessions of the projects in team.projects (:help fabric-team)'
      end
      ui.notify(msg, vim.log.levels.WARN)
      return ui.done('recall', true, 'no sessions in scope')
    end
    if cov.eligibleSessions == 0 and params.scope ~= 'global' and type(cov.error) ~= 'table' then
      -- Nothing to search here: say where that was and what the global scope holds.
      return require('fabric.sessions').list('global', function(gerr, global)
        local n = (not gerr and type(global) == 'table') and tonumber(global.totalItems) or nil
        local msg = ('Fabric recall: no sessions in scope %s'):format(scope_words(params.scope, params.cwd))
        if n and n > 0 then
          msg = msg .. ('; the global scope has %d session%s: :Fabric recall scope=global %s'):format(
            n, n == 1 and '' or 's', query)
        elseif n == 0 then
          msg = msg .. '; the agent dir has no Pi sessions at all (:checkhealth fabric shows where it looks)'
        end
        ui.notify(msg, vim.log.levels.WARN)
        ui.done('recall', true, 'no sessions in scope')
      end)
    end
    local items = M.items(result, query)
    -- An answer that waits on the background indexer says so, and is searched again (or
    -- said to be stale) once the index is complete (fabric.stale).
    local partial = stale.partial(result)
    local label = ('recall %q'):format(query)
    if opts.bang then
      local qf = qf_items(items, query)
      vim.fn.setqflist({}, ' ', {
        title = 'Fabric recall: ' .. query .. stale.note(result),
        items = qf,
        context = { fabric_query = query },
      })
      local qid = vim.fn.getqflist({ id = 0 }).id
      stale.track_quickfix(result, label, qid, function()
        M.requery_quickfix(qid, query, params)
      end)
      if #qf == 0 then
        ui.notify('Fabric recall: ' .. no_match_message(result), vim.log.levels.WARN)
      else
        vim.cmd('botright copen')
        match.highlight_quickfix(query)
      end
      return ui.done('recall', true)
    end
    if #items == 0 then
      ui.notify('Fabric recall: ' .. no_match_message(result), vim.log.levels.WARN)
      stale.track_message(result, label)
      return ui.done('recall', true)
    end
    with_next(items, result, params)
    local title = M.title(query, params.scope, result, items) .. stale.note(result)
    local open = true
    local live = M.live_source(query, params)
    local _, shown = require('fabric.picker').pick({
      items = items,
      prompt = title,
      kind = 'fabric.recall',
      -- snacks, telescope and fzf-lua search again as you type, the float after `/`
      -- (vim.ui.select shows this answer)
      live = live,
      display = M.display,
      preview = M.previewer(),
      on_choice = function(choice)
        open = false
        if not choice then
          return ui.done('recall', true, 'dismissed')
        end
        if choice.kind == 'next' then
          return M.run(query, { scope = params.scope, page = choice.page })
        elseif choice.kind == 'pointer' then
          -- A cold pointer names a whole session: search inside it.
          return M.run(query, { scope = 'session:' .. choice.sessionFile })
        end
        M.open(choice, function(ok, msg)
          ui.done('recall', ok, msg)
        end)
      end,
    })
    if partial then
      -- The float can be redrawn with the complete answer; the other pickers cannot.
      local update = shown and shown.update
      stale.track({
        label = label,
        still_shown = function()
          return open
        end,
        rerun = update and function()
          local typed = shown.current_query and shown.current_query() or query
          if typed ~= query then
            -- the float searched something else since: refresh what it shows now
            return live.search(typed, function(fresh, title)
              if open then
                update(fresh, title)
                ui.notify(('Fabric recall: indexing is complete; the list for %q now searches every session'):format(typed))
              end
            end)
          end
          lsp.request('fabric/recall', params, function(rerr, again)
            if rerr or type(again) ~= 'table' or not open then
              return
            end
            local fresh = with_next(M.items(again, query), again, params)
            update(fresh, M.title(query, params.scope, again, fresh) .. stale.note(again))
            ui.notify(('Fabric recall: indexing is complete; the list for %q now searches every session'):format(query))
          end)
        end or nil,
      })
    end
  end)
end

---Search a partial answer's quickfix list `qid` again (the index is complete) and replace
---its items in place; the list keeps its place in the quickfix stack.
---@param qid integer
---@param query string
---@param params table the fabric/recall params of the partial answer
function M.requery_quickfix(qid, query, params)
  lsp.request('fabric/recall', params, function(err, result)
    if err or type(result) ~= 'table' or not stale.qf_alive(qid) then
      return
    end
    local qf = qf_items(M.items(result, query), query)
    vim.fn.setqflist({}, 'r', {
      id = qid,
      title = 'Fabric recall: ' .. query .. stale.note(result),
      items = qf,
      context = { fabric_query = query },
    })
    stale.track_quickfix(result, ('recall %q'):format(query), qid, function()
      M.requery_quickfix(qid, query, params)
    end)
    if vim.fn.getqflist({ id = 0 }).id == qid then
      match.highlight_quickfix(query)
    end
    ui.notify(('Fabric recall: indexing is complete; the quickfix list for %q now searches every session (%d item%s)')
      :format(query, #qf, #qf == 1 and '' or 's'))
  end)
end

M.SCOPES = { 'session', 'project', 'global', 'team' }

---Whether `scope` is a recall scope the server takes: session, project, global,
---session:<id-or-path>, team (the team database, docs/team.md) or team:<member>.
---@param scope string
---@return boolean
function M.valid_scope(scope)
  return vim.tbl_contains(M.SCOPES, scope) or scope:match('^session:.+') ~= nil or scope:match('^team:.+') ~= nil
end

---Split `scope=<scope>` (anywhere among the words) off a :Fabric recall argument.
---@param args string
---@return string query, string? scope, string? err
function M.parse_args(args)
  local scope
  -- the first `scope=…` word, wherever it is; the rest of the query is kept as typed
  local rest = (' ' .. args):gsub('(%s)scope=(%S*)', function(space, value)
    if scope == nil then
      scope = value
      return space
    end
  end)
  rest = vim.trim(rest)
  if scope and not M.valid_scope(scope) then
    return '', nil, ('unknown scope %q: scope=session, scope=project, scope=global, scope=session:<id-or-path>, '
      .. 'scope=team or scope=team:<member>'):format(scope)
  end
  if scope and vim.startswith(scope, 'session:') then
    local target = scope:sub(#'session:' + 1)
    if target:find('/', 1, true) and not target:match('^file://') then
      scope = 'session:' .. vim.fn.fnamemodify(vim.fn.expand(target), ':p')
    end
  end
  return rest, scope, nil
end

---Completion of :Fabric recall's arguments: `scope=…`; `scope=team:<member>` for the
---members the team database knows (fabric/teamMembers) and those team answers named.
---@param arglead string
---@return string[]
function M.complete(arglead)
  local out = {}
  for _, s in ipairs(M.SCOPES) do
    local c = 'scope=' .. s
    if vim.startswith(c, arglead) then
      out[#out + 1] = c
    end
  end
  if vim.startswith(arglead, 'scope=session:') or arglead == 'scope=session' then
    for _, id in ipairs(vim.tbl_keys(require('fabric.sessions').known_ids)) do
      local c = 'scope=session:' .. id
      if vim.startswith(c, arglead) then
        out[#out + 1] = c
      end
    end
  end
  if vim.startswith(arglead, 'scope=team:') or arglead == 'scope=team' then
    team.fetch_members()
    for member in pairs(team.members) do
      local c = 'scope=team:' .. member
      if vim.startswith(c, arglead) then
        out[#out + 1] = c
      end
    end
  end
  table.sort(out)
  return out
end

---:Fabric recall [scope=…] [query]; asks for the query when none is given.
function M.command(args, bang)
  local query, scope, err = M.parse_args(args)
  if err then
    return ui.done('recall', false, err)
  end
  if query ~= '' then
    return M.run(query, { bang = bang, scope = scope })
  end
  vim.ui.input({ prompt = 'Fabric recall' .. (scope and (' (' .. scope .. ')') or '') .. ': ' }, function(input)
    if input == nil then
      return ui.done('recall', true, 'dismissed')
    end
    M.run(input, { bang = bang, scope = scope })
  end)
end

return M
