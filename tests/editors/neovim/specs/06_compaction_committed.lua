-- A compaction requested with :Fabric compact is committed by the server at a safe boundary;
-- `fabric/compactionCommitted` becomes a vim.notify message and a User event.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

-- Pi's own settings: a small keepRecentTokens, so an example session has something to compact.
vim.fn.writefile({ '{"compaction":{"keepRecentTokens":200}}' }, H.agent .. '/settings.json')
vim.g.fabric = { settings = { compaction = { commitQuietMs = 200 } } }


local committed
vim.api.nvim_create_autocmd('User', {
  pattern = 'FabricCompactionCommitted',
  callback = function(ev)
    committed = ev.data
  end,
})

H.open_attached(H.session_file('01-'))
-- An example session that compacts with Pi's keepRecentTokens = 200 (settings.json above).
local big = H.compactable_example({})
local lines_before = #vim.fn.readfile(big)
vim.cmd.edit(vim.fn.fnameescape(big))

local refreshed
vim.api.nvim_create_autocmd('User', {
  pattern = 'FabricViewRefreshed',
  callback = function(ev)
    if ev.data.kind == 'preview' then
      refreshed = ev.data
    end
  end,
})

-- A preview of the session, open while the compaction is committed (issue 34: views that
-- stay true). Shown in a split; the session buffer stays current.
H.eq(true, H.fabric('Fabric preview').ok, 'preview ok')
local preview_buf = vim.api.nvim_get_current_buf()
local preview_before = H.lines(preview_buf)
H.contains(preview_before, 'Compacting now would replace')
vim.cmd.wincmd('p')

H.check(':Fabric compact is committed and notified', function()
  H.messages = {}
  local confirm = H.pick_with(function(items)
    return vim.fn.index(items, 'Compact now') + 1 -- the confirmation (compact.confirm, the default)
  end)
  H.eq(true, H.fabric('Fabric compact keep the open questions').ok, 'compact ok')
  H.eq('fabric.confirm', confirm.kind, 'asked first')
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

H.check('the open preview of the session is refreshed after the commit', function()
  H.wait_for('FabricViewRefreshed', function()
    return refreshed ~= nil
  end)
  H.eq(preview_buf, refreshed.buf, 'the preview buffer')
  H.eq(true, refreshed.ok, 'refreshed from the server')
  -- what the server now previews for the session, rendered as :Fabric preview renders it
  local fresh
  require('fabric.lsp').request('fabric/compactionPreview', vim.b[preview_buf].fabric_preview_params, function(_, r)
    fresh = r
  end)
  H.wait_for('a fresh preview', function()
    return fresh ~= nil
  end)
  H.eq(require('fabric.views').preview(fresh), H.lines(preview_buf), 'the buffer shows the fresh preview')
  H.truthy(not vim.deep_equal(preview_before, H.lines(preview_buf)), 'the text changed')
end)

H.check(':Fabric status shows the last commit', function()
  H.messages = {}
  H.eq(true, H.fabric('Fabric status').ok, 'status ok')
  H.truthy(H.notified('last: committed'), 'status: ' .. vim.inspect(H.messages))
end)

H.finish()
