-- env: FABRIC_LSP_BACKGROUND_INDEX=1
-- Issue 36, "editors refresh when the index completes": beyond the per-call budgets
-- (`maxSyncSessions = 1` here) the first answers say `indexing_in_progress`; the quickfix
-- lists and the float list showing them say "partial", and once the background indexer
-- reports the whole history indexed they are searched again in place (the same quickfix
-- list, the same float window), never left as if complete.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

vim.g.fabric = {
  settings = { memory = { hotSessions = 1, maxSyncSessions = 1 } },
  recall = { scope = 'global', page_size = 100 },
  picker = 'float',
}

-- 300 more sessions of the project (copies of the real-Pi session 05 under other ids),
-- written before the server starts: enough that the indexer is still at work when the
-- first requests arrive.
local src = H.session_file('05-')
local dir = vim.fs.dirname(src)
local lines = vim.fn.readfile(src, 'b')
local head = vim.json.decode(lines[1])
for i = 1, 300 do
  head.id = ('0c0b1e55-0000-4000-8000-%012d'):format(i)
  lines[1] = vim.json.encode(head)
  vim.fn.writefile(lines, ('%s/2026-01-01T00-00-00-000Z_copy%03d.jsonl'):format(dir, i), 'b')
end

local complete = false
local lsp = require('fabric.lsp')
local original = lsp.handlers['fabric/activity']
lsp.handlers['fabric/activity'] = function(err, params, ctx)
  local out = original(err, params, ctx)
  if type(params) == 'table' and params.complete == true and params.request == 'fabric/backgroundIndex' then
    complete = true
  end
  return out
end

local ops = H.project .. '/calc/ops.py'
H.open_attached(ops)

local recall_qf, history_qf, float_win
local first = {}

H.check('the first answers are partial and say so', function()
  local done = H.fabric('Fabric recall! rounding')
  H.eq(true, done.ok, 'recall! ok: ' .. tostring(done.message))
  local info = vim.fn.getqflist({ id = 0, title = 0, size = 0 })
  recall_qf, first.recall = info.id, info.size
  H.contains(info.title, 'partial: ', 'the recall list title')
  H.truthy(not complete, 'the index was not complete yet')

  done = H.fabric('Fabric history! ' .. ops)
  H.eq(true, done.ok, 'history! ok: ' .. tostring(done.message))
  info = vim.fn.getqflist({ id = 0, title = 0, size = 0 })
  history_qf, first.history = info.id, info.size
  H.truthy(history_qf ~= recall_qf, 'a second quickfix list')
  H.contains(info.title, 'partial: ', 'the history list title')

  vim.cmd('Fabric recall rounding')
  H.wait_for('the float list', function()
    return #H.floats() > 0
  end)
  float_win = H.floats()[1]
  local title = vim.api.nvim_win_get_config(float_win).title
  H.contains(vim.inspect(title), 'partial: ', 'the float title')
  first.float = #H.lines(vim.api.nvim_win_get_buf(float_win))
  H.eq(3, require('fabric.stale').count(), 'three partial answers remembered')
end)

H.check('when the index is complete, each is searched again in place', function()
  H.wait_for('fabric/activity complete: true', function()
    return complete
  end, 120000)
  H.wait_for('the recall list searched again', function()
    return not vim.fn.getqflist({ id = recall_qf, title = 0 }).title:find('partial', 1, true)
  end)
  H.wait_for('the history list searched again', function()
    return not vim.fn.getqflist({ id = history_qf, title = 0 }).title:find('partial', 1, true)
  end)
  H.wait_for('the float redrawn', function()
    return vim.api.nvim_win_is_valid(float_win)
      and not vim.inspect(vim.api.nvim_win_get_config(float_win).title):find('partial', 1, true)
  end)
  local recall_now = vim.fn.getqflist({ id = recall_qf, size = 0, title = 0 })
  H.truthy(recall_now.size > first.recall, ('more results: %d > %d'):format(recall_now.size, first.recall))
  local history_now = vim.fn.getqflist({ id = history_qf, size = 0 })
  H.truthy(history_now.size > first.history, ('more operations: %d > %d'):format(history_now.size, first.history))
  local float_lines = #H.lines(vim.api.nvim_win_get_buf(float_win))
  H.truthy(float_lines > first.float, ('more rows in the float: %d > %d'):format(float_lines, first.float))
  H.truthy(H.notified('now searches every session'), 'the recall refresh is announced')
  H.truthy(H.notified('now covers every session'), 'the history refresh is announced')
  H.eq(0, require('fabric.stale').count(), 'nothing partial is left')
  -- the refreshed float still opens what is under the cursor
  H.feed('<CR>')
  H.wait_for('the chosen result opened', function()
    return #H.floats() == 0
  end)
end)

H.check('with no end of indexing in sight, only the newest 50 partial answers are remembered', function()
  local stale = require('fabric.stale')
  local reran = {}
  for i = 1, 60 do
    stale.track({
      label = 'answer ' .. i,
      still_shown = function()
        return true
      end,
      rerun = function()
        reran[#reran + 1] = i
      end,
    })
  end
  H.eq(50, stale.count(), 'remembered')
  stale.index_complete()
  H.eq(50, #reran, 'searched again')
  H.eq(11, reran[1], 'the oldest ten were forgotten')
end)

H.finish()
