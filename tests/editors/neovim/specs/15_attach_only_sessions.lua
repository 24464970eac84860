-- The client attaches only to Pi session JSONL buffers and fabric:// scratch buffers (and,
-- for the file-history lens, to files of projects Pi sessions ran in: 20_codelens.lua): a
-- markdown README (or a .jsonl that is not a session) of any other project never starts
-- the server.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

local elsewhere = vim.fn.tempname() .. '/not-a-pi-project'
vim.fn.mkdir(elsewhere, 'p')
local readme = elsewhere .. '/README.md'
vim.fn.writefile({ '# A project', '', 'See pi-entry:01a182b4/97e8c51f for the history.' }, readme)
local data = elsewhere .. '/events.jsonl'
vim.fn.writefile({ '{"type":"event","id":"e1"}', '{"type":"event","id":"e2"}' }, data)

local function fabric_clients()
  return #vim.lsp.get_clients({ name = 'fabric' })
end

H.check('opening a markdown README starts no client', function()
  vim.cmd.edit(vim.fn.fnameescape(readme))
  H.eq('markdown', vim.bo.filetype, 'filetype')
  vim.wait(800)
  H.eq(0, fabric_clients(), 'fabric clients')
end)

H.check('a .jsonl that is not a Pi session starts no client', function()
  vim.cmd.edit(vim.fn.fnameescape(data))
  H.eq('jsonl', vim.bo.filetype, 'filetype')
  vim.wait(800)
  H.eq(0, fabric_clients(), 'fabric clients')
end)

H.check('a session JSONL buffer attaches', function()
  local buf = H.open_attached(H.session_file('01-'))
  H.truthy(vim.lsp.buf_is_attached(buf, H.client().id), 'attached')
end)

H.check('with a client running, the README still is not attached', function()
  vim.cmd.edit(vim.fn.fnameescape(readme))
  vim.wait(500)
  H.eq(false, vim.lsp.buf_is_attached(0, H.client().id), 'README attached')
  H.eq(1, fabric_clients(), 'one client')
end)

H.check('a fabric:// scratch buffer attaches (hover and gd on its references)', function()
  vim.cmd.edit(vim.fn.fnameescape((H.session_file('01-'))))
  vim.api.nvim_win_set_cursor(0, { 4, 0 }) -- the user's first message
  local done = H.fabric('Fabric expand')
  H.eq(true, done.ok, 'expand ok: ' .. tostring(done.message))
  H.truthy(vim.startswith(vim.api.nvim_buf_get_name(0), 'fabric://expand/'), 'scratch buffer')
  H.wait_for('scratch attached', function()
    return vim.lsp.buf_is_attached(0, H.client().id)
  end, 5000)
end)

H.check("gd on a reference in the README still works (through fabric/expand)", function()
  local s01 = (H.session_file('01-'))
  local objs = H.read_jsonl(s01)
  local ref = ('pi-entry:%s/%s'):format(objs[1].id, objs[4].id)
  vim.fn.writefile({ 'Look at ' .. ref }, readme)
  vim.cmd.edit({ args = { vim.fn.fnameescape(readme) }, bang = true })
  vim.api.nvim_win_set_cursor(0, { 1, 12 })
  vim.cmd('normal gd')
  H.wait_for('jump to the session file', function()
    return vim.api.nvim_buf_get_name(0) == s01
  end, 15000)
  H.eq(objs[4]._lnum, vim.api.nvim_win_get_cursor(0)[1], 'cursor line')
end)

H.check('the README was never attached', function()
  vim.cmd.edit(vim.fn.fnameescape(readme))
  H.eq(false, vim.lsp.buf_is_attached(0, H.client().id), 'README attached')
end)

H.finish()
