-- :Fabric history [path] (picker that expands the chosen operation's entry), :Fabric! history
-- (quickfix), and the client-side `fabric.fileHistory` command a CodeLens runs.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

local target = H.project .. '/calc/ops.py' -- the fixtures' `calc/ops.py`, joined to their cwd

H.check(':Fabric! history fills the quickfix list, newest first', function()
  local done = H.fabric('Fabric! history ' .. target)
  H.eq(true, done.ok, 'ok: ' .. tostring(done.message))
  local qf = vim.fn.getqflist({ title = 1, items = 1 })
  H.contains(qf.title, '9 operations in 3 sessions')
  H.eq(9, #qf.items, 'items')
  H.truthy(qf.items[1].text:match('^edit succeeded '), 'newest is an edit: ' .. qf.items[1].text)
  H.contains(qf.items[1].text, 'pi-entry:')
  vim.cmd('cclose')
end)

H.check(':Fabric history <path> picks an operation and expands its entry', function()
  local rec = H.pick_with(function()
    return 1
  end)
  local done = H.fabric('Fabric history ' .. target)
  H.eq(true, done.ok, 'ok: ' .. tostring(done.message))
  H.eq('fabric.file_operation', rec.kind, 'kind')
  H.contains(rec.prompt, '3 sessions')
  H.eq(rec.chosen.entryId, vim.api.nvim_buf_get_name(0):match('fabric://expand/[^/]+/(.+)$'), 'expanded entry')
end)

H.check('the CodeLens command runs the same history client-side', function()
  local rec = H.pick_with(function()
    return nil
  end)
  local before = #H.done
  vim.lsp.commands['fabric.fileHistory']({ title = 'Pi', command = 'fabric.fileHistory', arguments = { { path = target } } })
  H.wait_for('history done', function()
    return #H.done > before
  end)
  H.eq(9, #rec.items, 'items')
end)

H.check(':Fabric history of a file no session touched says so', function()
  local done = H.fabric('Fabric history ' .. H.project .. '/never.py')
  H.eq(true, done.ok, 'ok')
  H.truthy(H.notified('no Pi session read, edited or wrote'), 'notified')
end)

H.finish()
