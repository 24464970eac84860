-- :Fabric recall [query] (picker) and :Fabric recall! [query] (quickfix list).
local config = require('fabric.config')
local lsp = require('fabric.lsp')
local match = require('fabric.match')
local refs = require('fabric.refs')
local ui = require('fabric.ui')

local M = {}

---The scope for a recall from the current buffer.
---@return string
function M.scope()
  local scope = config.get().recall.scope
  if scope ~= 'auto' then
    return scope
  end
  local here = refs.session_of_buffer(0)
  if here then
    return 'session:' .. here.path
  end
  return 'project'
end

---Picker items of a fabric/recall result: one per matched entry of each segment (the first
---entry when none is marked), one per cold pointer, and "next page" when there is one.
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
    local key = table.concat({ item.sessionFile, item.entryId, tostring(item.sourceHash) }, '\0')
    if cache[key] then
      return cb(cache[key].lines, cache[key].spans, cache[key].title)
    end
    local params = { session = item.sessionFile, entryIds = { item.entryId }, expectedSourceHash = item.sourceHash }
    lsp.request('fabric/expand', params, function(err, result)
      local title = refs.format(item.sessionId, item.entryId)
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

---Open a chosen entry: the expanded entry in a scratch buffer, or its JSONL line.
---@param item table
---@param done fun(ok: boolean, msg: string?)
function M.open(item, done)
  if config.get().recall.open == 'jsonl' then
    refs.open_jsonl(item.sessionFile, item.line)
    return done(true)
  end
  require('fabric.commands').expand_entries(
    item.sessionFile,
    { entryIds = { item.entryId }, expectedSourceHash = item.sourceHash },
    done,
    { query = item.query }
  )
end

local function no_match_message(result)
  local query = type(result.query) == 'string' and result.query or ''
  local msg = ('no matches for %q'):format(query)
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
    local items = M.items(result, query)
    if opts.bang then
      local qf = {}
      for _, item in ipairs(items) do
        if item.kind == 'entry' then
          qf[#qf + 1] = {
            filename = item.sessionFile,
            lnum = (item.line or 0) + 1,
            col = 1,
            text = ('[%s] %s %s'):format(
              item.role or '?',
              refs.format(item.sessionId, item.entryId),
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
      vim.fn.setqflist({}, ' ', { title = 'Fabric recall: ' .. query, items = qf, context = { fabric_query = query } })
      if #qf == 0 then
        ui.notify('Fabric recall: ' .. no_match_message(result), vim.log.levels.WARN)
        if type(result.coverage) == 'table' and type(result.coverage.error) == 'table' then
          return ui.done('recall', false, no_match_message(result))
        end
      else
        vim.cmd('botright copen')
        match.highlight_quickfix(query)
      end
      return ui.done('recall', true)
    end
    if #items == 0 then
      if type(result.coverage) == 'table' and type(result.coverage.error) == 'table' then
        -- e.g. an invalid or timed-out regex: a failure, not "no matches".
        return ui.done('recall', false, no_match_message(result))
      end
      ui.notify('Fabric recall: ' .. no_match_message(result), vim.log.levels.WARN)
      return ui.done('recall', true)
    end
    if result.hasNext then
      items[#items + 1] = { kind = 'next', page = (result.page or params.page) + 1 }
    end
    local total = tonumber(result.totalItems) or #items
    local title = ('Fabric recall "%s": page %d, %d result%s in all'):format(
      query,
      tonumber(result.page) or params.page,
      total,
      total == 1 and '' or 's'
    )
    require('fabric.picker').pick({
      items = items,
      prompt = title,
      kind = 'fabric.recall',
      display = M.display,
      preview = M.previewer(),
      on_choice = function(choice)
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
  end)
end

---:Fabric recall [query]; asks for the query when none is given.
function M.command(query, bang)
  if query ~= '' then
    return M.run(query, { bang = bang })
  end
  vim.ui.input({ prompt = 'Fabric recall: ' }, function(input)
    if input == nil then
      return ui.done('recall', true, 'dismissed')
    end
    M.run(input, { bang = bang })
  end)
end

return M
