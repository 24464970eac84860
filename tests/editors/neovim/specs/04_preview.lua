-- :Fabric preview [session]: a scratch markdown buffer with the summary and the budget.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

local s01 = H.session_file('01-')
local h01 = H.read_jsonl(s01)[1]
local s05 = H.session_file('05-')
local h05 = H.read_jsonl(s05)[1]

local progress = {}
vim.api.nvim_create_autocmd('LspProgress', {
  callback = function(ev)
    local c = vim.lsp.get_client_by_id(ev.data.client_id)
    if c and c.name == 'fabric' then
      progress[#progress + 1] = ev.data.params
    end
  end,
})

H.open_attached(s01)
-- An example session big enough to compact with a small keepRecentTokens.
local big = H.compactable_example({ keepRecentTokens = 200 })
local hbig = H.read_jsonl(big)[1]
progress = {}

H.check(':Fabric preview in a small session buffer says Pi would skip it', function()
  local done = H.fabric('Fabric preview')
  H.eq(true, done.ok, 'preview ok: ' .. tostring(done.message))
  H.eq('fabric://preview/' .. h01.id, vim.api.nvim_buf_get_name(0), 'buffer name')
  H.eq('markdown', vim.bo.filetype, 'filetype')
  H.eq(s01, vim.b.fabric_session, 'b:fabric_session')
  local lines = H.lines(0)
  H.eq('# Compaction preview: ' .. h01.id, lines[1], 'heading')
  H.contains(lines, '- outcome: skipped')
  H.contains(lines, '- reason: ')
  H.contains(lines, '- session file: ' .. s01)
  H.contains(lines, '- tokens before: ')
  H.contains(lines, 'Nothing would be compacted: ')
  H.contains(lines, '## Cut map')
  H.contains(lines, '## Budget')
  H.contains(lines, '## Summary')
  H.contains(lines, '(no summary: skipped)')
end)

H.check(':Fabric preview reports progress with one end per begin', function()
  local function count(kind)
    return #vim.tbl_filter(function(p)
      return p.value.kind == kind
    end, progress)
  end
  H.truthy(count('begin') >= 1, 'a begin')
  -- An end may arrive just after the response.
  vim.wait(10000, function()
    return count('end') >= count('begin')
  end, 20)
  H.eq(count('begin'), count('end'), 'ends')
end)

H.check(':Fabric preview <session id> with preview options shows the summary and the budget', function()
  vim.g.fabric = { preview = { keepRecentTokens = 200 } }
  vim.cmd.enew()
  local done = H.fabric('Fabric preview ' .. hbig.id)
  H.eq(true, done.ok, 'preview ok: ' .. tostring(done.message))
  H.eq('fabric://preview/' .. hbig.id, vim.api.nvim_buf_get_name(0), 'buffer name')
  local lines = H.lines(0)
  H.contains(lines, '- outcome: compacted')
  H.contains(lines, '- session file: ' .. big)
  H.contains(lines, '- first kept entry: pi-entry:' .. hbig.id .. '/')
  -- One sentence, the cut map with JSONL lines, the budget in plain words.
  H.contains(lines, 'Compacting now would replace ')
  H.contains(lines, '- summarized by this compaction: ')
  H.contains(lines, '- kept verbatim (the recent tail): ')
  H.contains(lines, '- the live window starts ')
  -- The default contextWindow (200000) and the keepRecentTokens given.
  H.contains(lines, 'Model context window: 200,000 tokens')
  H.contains(lines, '(up to keepRecentTokens = 200)')
  H.contains(lines, 'Projected after compaction: ')
  H.contains(lines, 'What decided the cut: ')
  -- The cut map's lines are the entries' JSONL lines.
  local jsonl = H.read_jsonl(big)
  for _, l in ipairs(lines) do
    local id, lnum = l:match('^%- kept verbatim %(the recent tail%): [%d,]+ entries, (%x+) %(line (%d+)%)')
    if id then
      local at
      for _, obj in ipairs(jsonl) do
        if obj._lnum == tonumber(lnum) then
          at = obj
        end
      end
      H.eq(id, at and at.id, 'entry at the cut map line')
    end
  end
  -- One fold per section: Cut map, Budget, Summary.
  vim.cmd('normal! zM')
  local closed = {}
  for lnum = 1, vim.fn.line('$') do
    if vim.fn.foldclosed(lnum) == lnum then
      closed[#closed + 1] = vim.fn.getline(lnum)
    end
  end
  H.eq({ '## Cut map', '## Budget', '## Summary' }, closed, 'folds')
  vim.cmd('normal! zR')
  local summary_at
  for i, l in ipairs(lines) do
    if l == '## Summary' then
      summary_at = i
    end
  end
  H.truthy(summary_at and #lines > summary_at + 2, 'summary text after the heading')
  -- Same session by path: the same bytes (deterministic preview).
  vim.cmd.enew()
  H.eq(true, H.fabric('Fabric preview ' .. big).ok, 'preview by path')
  H.eq(lines, H.lines(0), 'same preview for the same session')
  vim.g.fabric = nil
end)

H.check(':Fabric preview with no session in context asks with a picker of project sessions', function()
  vim.cmd.enew()
  local rec = H.pick_with(function(items)
    for i, item in ipairs(items) do
      if item.sessionFile == s05 then
        return i
      end
    end
  end)
  local done = H.fabric('Fabric preview')
  H.eq(true, done.ok, 'ok: ' .. tostring(done.message))
  H.eq('fabric.session', rec.kind, 'picker kind')
  H.truthy(rec.chosen, 'session 05 offered')
  H.eq(3, #rec.items, 'the three project sessions')
  for _, item in ipairs(rec.items) do
    H.eq(H.project, item.cwd, 'project sessions only')
  end
  H.eq('fabric://preview/' .. h05.id, vim.api.nvim_buf_get_name(0), 'buffer name')
end)

H.check(':Fabric preview of an unknown session reports session_not_found', function()
  H.messages = {}
  local done = H.fabric('Fabric preview no-such-session')
  H.eq(false, done.ok, 'ok')
  H.contains(done.message, 'session_not_found')
  H.truthy(H.notified('Fabric preview: session_not_found'), 'notified')
end)

H.finish()
