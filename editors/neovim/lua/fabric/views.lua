-- Text of the scratch buffers: expanded entries and compaction previews.
local references = require('fabric.references')
local ui = require('fabric.ui')

local M = {}

---Lines for a fabric/expand result. A team result (`member`: pushed by a member of the
---team, docs/team.md) starts with who pushed it from which machine and the server's note
---that the full source lives there, and names its session file as that machine's.
---@param result table
---@return string[]
function M.expanded(result)
  local lines = {}
  local team = ui.present(result.member)
  local machine = team and ui.present(result.machine) and result.machine or nil
  if team then
    lines[#lines + 1] = ('Team member: %s · machine: %s'):format(result.member, machine or '?')
    local note = ui.present(result.note) and result.note
      or "stored normalized entries from the team database; the full source lives on the member's machine"
    lines[#lines + 1] = ('%s (%s)'):format(note, machine or 'the member\'s machine')
  end
  for i, e in ipairs(result.expanded or {}) do
    if i > 1 then
      vim.list_extend(lines, { '', '---', '' })
    end
    lines[#lines + 1] = '# ' .. references.format(result.sessionId, e.entryId)
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
    -- one meaning per number: "line N" is the JSONL line everywhere (`#N` types it back);
    -- the protocol's entry index (`indices`) is labelled as such
    meta[#meta + 1] = ('line %d (entry index %s)'):format((e.line or 0) + 1, tostring(e.index))
    lines[#lines + 1] = table.concat(meta, ' · ')
    if team then
      -- not a path of this machine: no `file:line` to jump to
      lines[#lines + 1] = ('source: line %d of %s on %s'):format(
        (e.line or 0) + 1, result.sessionFile or result.sessionId or '?', machine or "the member's machine")
    else
      lines[#lines + 1] = ('%s:%d'):format(result.sessionFile or '?', (e.line or 0) + 1)
    end
    if ui.present(e.operationAddress) then
      lines[#lines + 1] = 'operation: ' .. e.operationAddress
    end
    lines[#lines + 1] = ''
    vim.list_extend(lines, ui.lines(e.text))
  end
  return lines
end

local function fmt(n)
  n = tonumber(n)
  if not n then
    return '?'
  end
  local s = tostring(math.floor(n + 0.5))
  return (s:reverse():gsub('(%d%d%d)', '%1,'):reverse():gsub('^,', ''))
end

---The branch of `leaf` in a session file: {id, line (1-based), type, firstKept?}, root first.
---@param file string
---@param leaf string?
---@return table[]
function M.branch(file, leaf)
  local ok, lines = pcall(vim.fn.readfile, file)
  if not ok then
    return {}
  end
  local by_id, last = {}, nil
  for lnum, raw in ipairs(lines) do
    local okj, obj = pcall(vim.json.decode, raw)
    if okj and type(obj) == 'table' and type(obj.id) == 'string' and obj.type ~= 'session' then
      local e = { id = obj.id, parent = type(obj.parentId) == 'string' and obj.parentId or nil, type = obj.type, line = lnum }
      if obj.type == 'compaction' and type(obj.firstKeptEntryId) == 'string' then
        e.firstKept = obj.firstKeptEntryId
      end
      by_id[obj.id] = e
      last = e
    end
  end
  local cur = (leaf and by_id[leaf]) or last
  local path, seen = {}, {}
  while cur and not seen[cur.id] do
    seen[cur.id] = true
    table.insert(path, 1, cur)
    cur = cur.parent and by_id[cur.parent] or nil
  end
  return path
end

---Cut-map rows of a preview: {kind, title, first, last, count} with entries of M.branch.
function M.cut_map(result)
  local branch = M.branch(result.sessionFile, ui.present(result.leafId) and result.leafId or nil)
  local pos = {}
  for i, e in ipairs(branch) do
    pos[e.id] = i
  end
  local live, after_compaction = 1, false
  for i = #branch, 1, -1 do
    if branch[i].type == 'compaction' then
      after_compaction = true
      live = (branch[i].firstKept and pos[branch[i].firstKept]) or i + 1
      break
    end
  end
  local rows = {}
  local function add(kind, title, a, b)
    if a and b and a >= 1 and b >= a and b <= #branch then
      rows[#rows + 1] = { kind = kind, title = title, first = branch[a], last = branch[b], count = b - a + 1 }
    end
  end
  add('earlier', 'compacted earlier (the model sees its summary)', 1, live - 1)
  local details = type(result.details) == 'table' and result.details or {}
  local cut = type(details.coverage) == 'table' and details.coverage.liveCutRange or nil
  local kept = ui.present(result.firstKeptEntryId) and pos[result.firstKeptEntryId] or nil
  if result.outcome == 'compacted' then
    local a = type(cut) == 'table' and pos[cut.first] or live
    local b = type(cut) == 'table' and pos[cut.last] or (kept and kept - 1 or #branch)
    -- Entries between the live start and the cut (model_change, thinking_level_change, …
    -- before the first message) carry no conversation: the summary does not cover them.
    if a and a > live then
      local types, seen_type = {}, {}
      for i = live, a - 1 do
        local t = tostring(branch[i].type)
        if not seen_type[t] then
          seen_type[t] = true
          types[#types + 1] = t
        end
      end
      add('settings', 'settings before the conversation (not summarized): ' .. table.concat(types, ', '), live, a - 1)
    end
    add('summarized', 'summarized by this compaction', a, b)
    if kept then
      add('kept', 'kept verbatim (the recent tail)', kept, #branch)
    end
  else
    add('kept', 'in the live window (nothing is summarized)', live, #branch)
  end
  return rows, branch, branch[live], after_compaction
end

local cut_ns = vim.api.nvim_create_namespace('fabric_cut')

---Mark the cut of a compaction preview in its session file's buffer (when loaded): a
---virtual line above the first entry kept verbatim. Cleared when the preview compacts nothing.
---@param result table fabric/compactionPreview result
function M.mark_cut(result)
  local file = type(result.sessionFile) == 'string' and vim.fs.normalize(result.sessionFile) or nil
  if not file then
    return
  end
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.fs.normalize(vim.api.nvim_buf_get_name(buf)) == file then
      vim.api.nvim_buf_clear_namespace(buf, cut_ns, 0, -1)
      if result.outcome == 'compacted' then
        local rows = M.cut_map(result)
        local summarized, kept
        for _, r in ipairs(rows) do
          if r.kind == 'summarized' then
            summarized = r
          elseif r.kind == 'kept' then
            kept = r
          end
        end
        if kept and kept.first.line <= vim.api.nvim_buf_line_count(buf) then
          local what = summarized
              and ('%d entries (lines %d–%d) above are summarized'):format(summarized.count, summarized.first.line, summarized.last.line)
            or 'the entries above are summarized'
          vim.api.nvim_buf_set_extmark(buf, cut_ns, kept.first.line - 1, 0, {
            virt_lines = { { { ('── compaction preview: %s; from here on %d are kept verbatim ──'):format(what, kept.count), 'Comment' } } },
            virt_lines_above = true,
          })
        end
      end
    end
  end
end

---The budget in plain words: one line per fact.
function M.budget_lines(result)
  local details = type(result.details) == 'table' and result.details or {}
  local b = type(details.budget) == 'table' and details.budget or nil
  local out = { ('In context now (Pi\'s estimate): %s tokens'):format(fmt(result.tokensBefore)) }
  if not b then
    out[#out + 1] = 'No model window known (a cut without model metadata).'
    return out
  end
  local window = tonumber(b.contextWindow)
  if window and window > 0 then
    out[#out + 1] = ('Model context window: %s tokens (%d%% in use now)'):format(fmt(window), math.floor(100 * result.tokensBefore / window + 0.5))
  end
  if ui.present(b.targetContextTokens) then
    out[#out + 1] = ('Target after compaction: %s tokens (the recent tail plus room for the summary)'):format(fmt(b.targetContextTokens))
  end
  if result.outcome == 'compacted' and ui.present(b.projectedTokensAfter) then
    out[#out + 1] = ('Projected after compaction: %s tokens'):format(fmt(b.projectedTokensAfter))
  end
  if ui.present(b.retainedRawTokens) then
    out[#out + 1] = ('Recent tail kept verbatim: %s tokens (up to keepRecentTokens = %s)'):format(fmt(b.retainedRawTokens), fmt(b.keepRecentTokens))
  end
  if ui.present(b.reserveTokens) then
    out[#out + 1] = ('Reserved for the model\'s reply: %s tokens'):format(fmt(b.reserveTokens))
  end
  local limits = {}
  if ui.present(b.occupancyCeilingTokens) then
    limits[#limits + 1] = ('%s (%d%% of the window)'):format(fmt(b.occupancyCeilingTokens), math.floor(100 * (tonumber(b.targetContextRatio) or 0) + 0.5))
  end
  if ui.present(b.safeCeilingTokens) then
    limits[#limits + 1] = fmt(b.safeCeilingTokens) .. ' (90% of the window minus the reply reserve)'
  end
  if ui.present(b.reductionCeilingTokens) then
    limits[#limits + 1] = fmt(b.reductionCeilingTokens) .. ' (95% of the tokens now)'
  end
  if #limits > 0 then
    out[#out + 1] = 'Never more than: ' .. table.concat(limits, '; ')
  end
  local why = { continuity = 'the target (recent tail plus summary room)', occupancy = 'the share of the window',
    safe = 'the safe limit', reduction = 'the reduction limit' }
  if ui.present(b.bindingConstraint) then
    out[#out + 1] = 'What decided the cut: ' .. (why[b.bindingConstraint] or tostring(b.bindingConstraint))
  end
  return out
end

---Lines for a fabric/compactionPreview result: sections (`## …`) that fold one by one.
---@param result table
---@return string[]
function M.preview(result)
  local rows, branch, live, after_compaction = M.cut_map(result)
  local sentence
  if result.outcome == 'compacted' then
    local s, k
    for _, r in ipairs(rows) do
      if r.kind == 'summarized' then
        s = r
      elseif r.kind == 'kept' then
        k = r
      end
    end
    local details = type(result.details) == 'table' and result.details or {}
    local after = type(details.budget) == 'table' and details.budget.projectedTokensAfter or nil
    sentence = ('Compacting now would replace %s with a %s-character summary and keep %s: about %s → %s tokens.'):format(
      s and ('%s entries (lines %d–%d)'):format(fmt(s.count), s.first.line, s.last.line) or 'the older entries',
      fmt(vim.fn.strchars(result.summary or '')),
      k and ('the last %s as they are'):format(fmt(k.count)) or 'nothing verbatim',
      fmt(result.tokensBefore), ui.present(after) and fmt(after) or '?')
  elseif result.outcome == 'skipped' then
    sentence = 'Nothing would be compacted: ' .. tostring(ui.present(result.reason) and result.reason or 'Pi would skip it') .. '.'
  else
    sentence = 'Fabric would cancel this compaction: ' .. tostring(ui.present(result.reason) and result.reason or '?') .. '.'
  end
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
    lines[#lines + 1] = '- leaf: ' .. references.format(result.sessionId, result.leafId)
  end
  lines[#lines + 1] = '- tokens before: ' .. tostring(result.tokensBefore)
  if ui.present(result.firstKeptEntryId) then
    lines[#lines + 1] = '- first kept entry: ' .. references.format(result.sessionId, result.firstKeptEntryId)
  end
  vim.list_extend(lines, { '', sentence, '', '## Cut map', '', ('%d entries on the branch.'):format(#branch) })
  for _, r in ipairs(rows) do
    lines[#lines + 1] = ('- %s: %s entries, %s (line %d) → %s (line %d)'):format(
      r.title, fmt(r.count), r.first.id, r.first.line, r.last.id, r.last.line)
  end
  if live then
    lines[#lines + 1] = ('- the live window starts %s: %s (line %d)'):format(
      after_compaction and 'after the last compaction' or 'at the start of the branch', live.id, live.line)
  end
  vim.list_extend(lines, { '', '## Budget', '' })
  vim.list_extend(lines, M.budget_lines(result))
  local details = type(result.details) == 'table' and result.details or {}
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

---'foldexpr' of the preview buffer: one fold per `## ` section.
---@param lnum integer
---@return string
function M.foldexpr(lnum)
  local line = vim.fn.getline(lnum)
  if line:match('^## ') then
    return '>1'
  elseif line:match('^# ') then
    return '0'
  end
  return '='
end

return M
