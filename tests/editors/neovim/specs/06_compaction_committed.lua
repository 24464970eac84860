-- A compaction requested with :Fabric compact is committed by the server at a safe boundary;
-- `fabric/compactionCommitted` becomes a vim.notify message and a User event.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

-- Pi's own settings: a small keepRecentTokens, so an example session has something to compact.
vim.fn.writefile({ '{"compaction":{"keepRecentTokens":200}}' }, H.agent .. '/settings.json')
vim.g.fabric = { settings = { compaction = { commitQuietMs = 200 } } }

-- The largest session of the bundled example agent dir.
local big, big_size = nil, -1
for _, f in ipairs(vim.fn.globpath(H.sessions, '*/*.jsonl', false, true)) do
  if not vim.fs.basename(f):match('^0%d%-') and vim.fn.getfsize(f) > big_size then
    big, big_size = f, vim.fn.getfsize(f)
  end
end
assert(big, 'example sessions copied')
local lines_before = #vim.fn.readfile(big)

local committed
vim.api.nvim_create_autocmd('User', {
  pattern = 'FabricCompactionCommitted',
  callback = function(ev)
    committed = ev.data
  end,
})

H.open_attached(big)

H.check(':Fabric compact is committed and notified', function()
  H.messages = {}
  H.eq(true, H.fabric('Fabric compact keep the open questions').ok, 'compact ok')
  H.wait_for('fabric/compactionCommitted', function()
    return committed ~= nil
  end, 60000)
  H.eq('committed', committed.record.status, 'record status: ' .. vim.inspect(committed))
  local m = H.truthy(H.notified('Fabric: compaction committed to '), 'notify: ' .. vim.inspect(H.messages))
  H.eq(vim.log.levels.INFO, m.level, 'level')
  H.contains(m.msg, 'tokens before')
end)

H.check('the session file gained one compaction entry', function()
  local after = vim.fn.readfile(big)
  H.eq(lines_before + 1, #after, 'line count')
  local last = vim.json.decode(after[#after])
  H.eq('compaction', last.type, 'entry type')
  if committed.record.entryId ~= nil and committed.record.entryId ~= vim.NIL then
    H.eq(committed.record.entryId, last.id, 'entryId')
  end
end)

H.check(':Fabric status shows the last commit', function()
  H.messages = {}
  H.eq(true, H.fabric('Fabric status').ok, 'status ok')
  H.truthy(H.notified('last: committed'), 'status: ' .. vim.inspect(H.messages))
end)

H.finish()
