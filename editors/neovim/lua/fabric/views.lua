-- Text of the scratch buffers: expanded entries and compaction previews.
local refs = require('fabric.refs')
local ui = require('fabric.ui')

local M = {}

---Lines for a fabric/expand result.
---@param result table
---@return string[]
function M.expanded(result)
  local lines = {}
  for i, e in ipairs(result.expanded or {}) do
    if i > 1 then
      vim.list_extend(lines, { '', '---', '' })
    end
    lines[#lines + 1] = '# ' .. refs.format(result.sessionId, e.entryId)
    local meta = { ('role: %s'):format(ui.present(e.role) and e.role or e.type or '?') }
    if ui.present(e.toolName) then
      meta[#meta + 1] = 'tool: ' .. e.toolName
    end
    if ui.present(e.timestamp) then
      meta[#meta + 1] = ui.time(e.timestamp)
    end
    if e.isError then
      meta[#meta + 1] = 'error'
    end
    meta[#meta + 1] = ('index %s'):format(tostring(e.index))
    lines[#lines + 1] = table.concat(meta, ' · ')
    lines[#lines + 1] = ('%s:%d'):format(result.sessionFile or '?', (e.line or 0) + 1)
    if ui.present(e.operationAddress) then
      lines[#lines + 1] = 'operation: ' .. e.operationAddress
    end
    lines[#lines + 1] = ''
    vim.list_extend(lines, ui.lines(e.text))
  end
  return lines
end

-- details.budget fields, in the order of the compaction engine's details v2.
local BUDGET_KEYS = {
  'strategy',
  'contextWindow',
  'targetContextRatio',
  'targetContextTokens',
  'reserveTokens',
  'keepRecentTokens',
  'rawTokensBefore',
  'tokenScale',
  'fixedOverheadTokens',
  'retainedRawTokens',
  'continuityTargetTokens',
  'occupancyCeilingTokens',
  'safeCeilingTokens',
  'reductionCeilingTokens',
  'rawTailTokenBudget',
  'bindingConstraint',
  'projectedTokensAfter',
}

---Lines for a fabric/compactionPreview result.
---@param result table
---@return string[]
function M.preview(result)
  local lines = {
    '# Compaction preview: ' .. tostring(result.sessionId),
    '',
    '- outcome: ' .. tostring(result.outcome),
  }
  if ui.present(result.reason) then
    lines[#lines + 1] = '- reason: ' .. tostring(result.reason)
  end
  lines[#lines + 1] = '- session file: ' .. tostring(result.sessionFile)
  if ui.present(result.leafId) then
    lines[#lines + 1] = '- leaf: ' .. refs.format(result.sessionId, result.leafId)
  end
  lines[#lines + 1] = '- tokens before: ' .. tostring(result.tokensBefore)
  if ui.present(result.firstKeptEntryId) then
    lines[#lines + 1] = '- first kept entry: ' .. refs.format(result.sessionId, result.firstKeptEntryId)
  end
  if ui.present(result.summary) then
    lines[#lines + 1] = ('- summary: %d characters'):format(vim.fn.strchars(result.summary))
  end
  lines[#lines + 1] = ''
  lines[#lines + 1] = '## Budget'
  lines[#lines + 1] = ''
  local details = type(result.details) == 'table' and result.details or {}
  local budget = details.budget
  if type(budget) == 'table' then
    lines[#lines + 1] = '| field | value |'
    lines[#lines + 1] = '| --- | --- |'
    local seen = {}
    for _, key in ipairs(BUDGET_KEYS) do
      if ui.present(budget[key]) then
        lines[#lines + 1] = ('| %s | %s |'):format(key, tostring(budget[key]))
        seen[key] = true
      end
    end
    local rest = {}
    for key in pairs(budget) do
      if not seen[key] then
        rest[#rest + 1] = key
      end
    end
    table.sort(rest)
    for _, key in ipairs(rest) do
      lines[#lines + 1] = ('| %s | %s |'):format(key, (vim.inspect(budget[key]):gsub('\n', ' ')))
    end
  else
    lines[#lines + 1] = ('No model budget (tokens before: %s; legacy cut without model metadata).'):format(
      tostring(result.tokensBefore)
    )
  end
  if type(details.counts) == 'table' then
    local counts = {}
    for key, value in pairs(details.counts) do
      counts[#counts + 1] = ('%s %s'):format(key, tostring(value))
    end
    table.sort(counts)
    lines[#lines + 1] = ''
    lines[#lines + 1] = 'Counts: ' .. table.concat(counts, ', ')
  end
  lines[#lines + 1] = ''
  lines[#lines + 1] = '## Summary'
  lines[#lines + 1] = ''
  if ui.present(result.summary) then
    vim.list_extend(lines, ui.lines(result.summary))
  else
    lines[#lines + 1] = '(no summary: ' .. tostring(result.outcome) .. ')'
  end
  return lines
end

return M
