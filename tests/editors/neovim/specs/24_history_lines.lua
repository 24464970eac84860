-- Issue 34, finding 9: `:Fabric! history` puts each quickfix item on the JSONL line of its
-- operation's entry (it put every item on line 1).
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

local target = H.project .. '/calc/ops.py'

H.check(':Fabric! history items sit on their entry lines', function()
  local done = H.fabric('Fabric! history ' .. target)
  H.eq(true, done.ok, 'ok: ' .. tostring(done.message))
  local qf = vim.fn.getqflist({ items = 1 })
  H.truthy(#qf.items >= 2, 'items: ' .. #qf.items)
  local lines = {}
  for _, item in ipairs(qf.items) do
    local op = item.user_data
    local file = vim.api.nvim_buf_get_name(item.bufnr)
    H.eq(op.sessionFile, file, 'file')
    -- the line the item points at is the entry that made the call
    local by_line = {}
    for _, obj in ipairs(H.read_jsonl(file)) do
      by_line[obj._lnum] = obj
    end
    local entry = H.truthy(by_line[item.lnum], 'a JSON line at ' .. item.lnum)
    H.eq(op.entryId, entry.id, 'entry at ' .. file .. ':' .. item.lnum)
    if op.toolCallId then
      local found = false
      for _, part in ipairs(entry.message.content) do
        if part.type == 'toolCall' and part.id == op.toolCallId then
          found = true
        end
      end
      H.truthy(found, 'the call ' .. op.toolCallId .. ' on line ' .. item.lnum)
    end
    lines[item.lnum] = true
  end
  H.truthy(vim.tbl_count(lines) > 1, 'distinct lines')
  -- :cc opens the session at that line
  vim.cmd('cc 1')
  H.eq(qf.items[1].lnum, vim.fn.line('.'), 'cursor line after :cc')
  vim.cmd('cclose')
end)

H.finish()
