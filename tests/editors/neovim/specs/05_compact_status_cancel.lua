-- :Fabric compact [instructions], :Fabric status, :Fabric cancel. The server is told (through
-- vim.g.fabric.settings → initializationOptions) to wait 10 minutes of quiet before a commit,
-- so the request stays pending while the spec looks at it.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

-- No confirmation here (25_compact_confirm.lua tests it): the request goes straight out.
vim.g.fabric = { settings = { compaction = { commitQuietMs = 600000 } }, compact = { confirm = false } }
-- Pi's own settings keep little, so these sessions have something to compact (a request
-- Pi could not honour, "Nothing to compact", is refused when it is made).
vim.fn.writefile({ '{"compaction": {"keepRecentTokens": 100}}' }, os.getenv('FABRIC_TEST_AGENT') .. '/settings.json')

local s03 = H.session_file('03-')
local before = table.concat(vim.fn.readfile(s03, 'b'), '\n')

H.open_attached(s03)

H.check('settings from vim.g.fabric reach the server as initializationOptions and configuration', function()
  local client = H.client()
  H.eq(600000, client.settings.fabric.compaction.commitQuietMs, 'client.settings.fabric')
  -- What the server answers for workspace/configuration is what it was given.
  local res = vim.lsp.buf_request_sync(0, 'workspace/executeCommand', { command = 'fabric.reload', arguments = { vim.empty_dict() } }, 15000)
  local reload = res and res[client.id]
  H.truthy(reload and not reload.err, 'fabric.reload: ' .. vim.inspect(reload))
  H.contains(vim.inspect(reload.result), 'commitQuietMs = 600000')
end)

H.check(':Fabric status with nothing pending', function()
  H.messages = {}
  local done = H.fabric('Fabric status')
  H.eq(true, done.ok, 'ok: ' .. tostring(done.message))
  local m = H.truthy(H.notified('no pending compaction'), 'status message: ' .. vim.inspect(H.messages))
  H.contains(m.msg, s03)
end)

H.check(':Fabric compact <instructions> records a pending request', function()
  H.messages = {}
  local done = H.fabric('Fabric compact keep the rounding decision')
  H.eq(true, done.ok, 'ok: ' .. tostring(done.message))
  local requested = H.truthy(H.notified('compaction requested for '), 'requested message: ' .. vim.inspect(H.messages))
  H.contains(requested.msg, require('fabric.sessions').label(s03))
  H.messages = {}
  H.eq(true, H.fabric('Fabric status').ok, 'status ok')
  local m = H.truthy(H.notified('pending compaction requested by user'), 'pending: ' .. vim.inspect(H.messages))
  H.contains(m.msg, 'keep the rounding decision')
end)

H.check(':Fabric cancel clears it; a second cancel finds nothing', function()
  H.messages = {}
  H.eq(true, H.fabric('Fabric cancel').ok, 'cancel ok')
  H.truthy(H.notified('cancelled the pending compaction of ' .. s03), 'cancelled: ' .. vim.inspect(H.messages))
  H.messages = {}
  H.eq(true, H.fabric('Fabric cancel').ok, 'cancel ok')
  H.truthy(H.notified('no pending compaction for ' .. s03), 'nothing: ' .. vim.inspect(H.messages))
  H.messages = {}
  H.eq(true, H.fabric('Fabric status').ok, 'status ok')
  H.truthy(H.notified('no pending compaction'), 'status: ' .. vim.inspect(H.messages))
end)

H.check(':Fabric compact from a non-session buffer asks which session', function()
  vim.cmd.enew()
  local rec = H.pick_with(function(items)
    for i, item in ipairs(items) do
      if item.sessionFile == s03 then
        return i
      end
    end
  end)
  H.eq(true, H.fabric('Fabric compact').ok, 'compact ok')
  H.truthy(rec.chosen, 'picked 03')
  H.messages = {}
  H.eq(true, H.fabric('Fabric status ' .. s03).ok, 'status by path')
  H.truthy(H.notified('pending compaction requested by user'), 'pending')
  H.eq(true, H.fabric('Fabric cancel ' .. s03).ok, 'cancel by path')
end)

H.check('oversized instructions are rejected with the server message', function()
  vim.cmd.edit(vim.fn.fnameescape(s03))
  H.messages = {}
  local done = H.fabric('Fabric compact ' .. string.rep('x', 9000))
  H.eq(false, done.ok, 'ok')
  H.truthy(H.notified('Fabric compact: '), 'error notified')
end)

H.check('nothing was written to the session file', function()
  H.eq(before, table.concat(vim.fn.readfile(s03, 'b'), '\n'), 'session bytes')
end)

H.finish()
