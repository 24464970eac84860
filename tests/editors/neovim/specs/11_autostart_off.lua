-- cmd: lua vim.g.fabric = { autostart = false }
-- With autostart = false the plugin does not enable the server; :Fabric still works (it starts
-- a client without attaching it), and require('fabric').setup() enables it.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

local s01 = H.session_file('01-')

H.check('autostart = false: :Fabric exists, fabric is not enabled, nothing attaches', function()
  H.eq(2, vim.fn.exists(':Fabric'), ':Fabric')
  H.eq(false, vim.lsp.is_enabled('fabric'), 'enabled')
  vim.cmd.edit(vim.fn.fnameescape(s01))
  vim.wait(300)
  H.eq(0, #vim.lsp.get_clients({ name = 'fabric' }), 'clients')
end)

H.check(':Fabric sessions starts a detached client', function()
  local rec = H.pick_with(function()
    return nil
  end)
  local done = H.fabric('Fabric sessions')
  H.eq(true, done.ok, 'ok: ' .. tostring(done.message))
  H.eq(3, #rec.items, 'project sessions')
  local client = H.truthy(H.client(), 'a fabric client')
  H.eq(false, vim.lsp.buf_is_attached(0, client.id), 'not attached to the buffer')
  H.eq(s01, vim.api.nvim_buf_get_name(0), 'still in the session file')
end)

H.check("require('fabric').setup() enables the server; the next buffer attaches to the same client", function()
  local first = H.client().id
  require('fabric').setup({ recall = { page_size = 5 } })
  H.eq(true, vim.lsp.is_enabled('fabric'), 'enabled')
  H.eq(5, vim.g.fabric.recall.page_size, 'options merged into vim.g.fabric')
  H.eq(false, vim.g.fabric.autostart, 'earlier options kept')
  H.open_attached(H.session_file('03-'))
  H.eq(1, #vim.lsp.get_clients({ name = 'fabric' }), 'one client')
  H.eq(first, H.client().id, 'reused')
end)

H.finish()
