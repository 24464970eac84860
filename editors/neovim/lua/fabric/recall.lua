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
---@return table[]
function M.items(result)
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
          query = result.query,
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

---@param item table
function M.format_item(item)
  if item.kind == 'next' then
    return ('… next page (%d)'):format(item.page)
  elseif item.kind == 'pointer' then
    return ('%s  [older session] matches: %s'):format(item.sessionId, table.concat(item.matchedTerms, ', '))
  end
  local who = item.role or '?'
  if item.toolName then
    who = who .. ':' .. item.toolName
  end
  return ('%s/%s  [%s]  %s'):format(
    item.sessionId:sub(1, 8),
    item.entryId,
    who,
    match.snippet(item.text, item.query, 100)
  )
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
    local items = M.items(result)
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
    local title = ('Fabric recall %q: page %d, %d results in all'):format(
      query,
      tonumber(result.page) or params.page,
      tonumber(result.totalItems) or #items
    )
    vim.ui.select(items, { prompt = title, format_item = M.format_item, kind = 'fabric.recall' }, function(choice)
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
    end)
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
