-- :Fabric expand (JSONL line, range, reference under the cursor, reference argument), hover (K)
-- on session lines and on references, gd on a reference.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

local s01 = H.session_file('01-')
local objs = H.read_jsonl(s01)
local header = objs[1]
-- The user's first message and the bash tool result.
local user, bash
for _, obj in ipairs(objs) do
  if obj.type == 'message' and obj.message.role == 'user' and not user then
    user = obj
  elseif obj.type == 'message' and obj.message.toolName == 'bash' and not bash then
    bash = obj
  end
end
local ref_user = ('pi-entry:%s/%s'):format(header.id, user.id)
local ref_bash = ('pi-entry:%s/%s'):format(header.id, bash.id)

H.open_attached(s01)

H.check(':Fabric expand on a session JSONL line shows that entry', function()
  vim.api.nvim_win_set_cursor(0, { user._lnum, 0 })
  local done = H.fabric('Fabric expand')
  H.eq(true, done.ok, 'expand ok: ' .. tostring(done.message))
  H.eq(('fabric://expand/%s/%s'):format(header.id, user.id), vim.api.nvim_buf_get_name(0), 'buffer name')
  local lines = H.lines(0)
  H.eq('# ' .. ref_user, lines[1], 'heading')
  H.contains(lines[2], 'role: user')
  H.eq(('%s:%d'):format(s01, user._lnum), lines[3], 'file:line')
  H.contains(lines, 'Please fix the failing tests in the calc project')
  H.eq(false, vim.bo.modifiable, 'read-only')
end)

H.check(':Fabric expand over a range expands every entry in it', function()
  vim.cmd.edit(vim.fn.fnameescape(s01))
  local done = H.fabric(('%d,%dFabric expand'):format(user._lnum, user._lnum + 2))
  H.eq(true, done.ok, 'expand ok: ' .. tostring(done.message))
  local headings = vim.tbl_filter(function(l)
    return l:match('^# pi%-entry:')
  end, H.lines(0))
  H.eq(3, #headings, 'three entries')
  H.eq('# ' .. ref_user, headings[1], 'first')
  H.contains(vim.api.nvim_buf_get_name(0), '+2')
end)

H.check(':Fabric expand <reference> expands the referenced entry (tool result text)', function()
  local done = H.fabric('Fabric expand ' .. ref_bash)
  H.eq(true, done.ok, 'expand ok: ' .. tostring(done.message))
  local lines = H.lines(0)
  H.eq('# ' .. ref_bash, lines[1], 'heading')
  H.contains(lines[2], 'tool: bash')
end)

H.check('repeated expands reuse the scratch window instead of adding splits', function()
  vim.cmd('only')
  vim.cmd.edit(vim.fn.fnameescape(s01))
  vim.api.nvim_win_set_cursor(0, { user._lnum, 0 })
  H.eq(true, H.fabric('Fabric expand').ok, 'first')
  H.eq(2, #vim.api.nvim_tabpage_list_wins(0), 'one split')
  H.eq(true, H.fabric('Fabric expand ' .. ref_bash).ok, 'second')
  H.eq(2, #vim.api.nvim_tabpage_list_wins(0), 'still one split')
  H.eq('# ' .. ref_bash, H.lines(0)[1], 'second entry shown')
  vim.cmd('only')
end)

H.check(':Fabric expand of an unknown entry reports the domain error', function()
  H.messages = {}
  local done = H.fabric(('Fabric expand pi-entry:%s/deadbeef'):format(header.id))
  H.eq(false, done.ok, 'ok')
  H.contains(done.message, 'address_not_found')
  H.truthy(H.notified('Fabric expand: address_not_found'), 'notified')
end)

-- A markdown note with references, in the project.
local note = H.project .. '/notes.md'
vim.fn.writefile({ '# Notes', '', 'The first request was ' .. ref_user .. '.', 'Tests ran in ' .. ref_bash }, note)

H.check('K on a session JSONL line shows the server hover in a float', function()
  H.open_attached(s01)
  vim.api.nvim_win_set_cursor(0, { user._lnum, 5 })
  local params = vim.lsp.util.make_position_params(0, 'utf-16')
  local res = vim.lsp.buf_request_sync(0, 'textDocument/hover', params, 15000)
  local client = H.client()
  local hover = H.truthy(res and res[client.id] and res[client.id].result, 'hover result')
  H.contains(hover.contents.value, user.id)
  -- The UI: K is Neovim's default hover mapping once a client with hover attaches.
  H.close_floats()
  vim.cmd('normal K')
  H.wait_for('hover float', function()
    return #H.floats() > 0
  end, 15000)
  local fbuf = vim.api.nvim_win_get_buf(H.floats()[1])
  local text = table.concat(H.lines(fbuf), '\n')
  H.contains(text, user.id)
  H.contains(text, 'Please fix the failing tests')
  H.close_floats()
end)

H.check('an entry reference in a markdown note (not attached) expands with :Fabric expand', function()
  vim.cmd.edit(vim.fn.fnameescape(note))
  H.eq('markdown', vim.bo.filetype, 'filetype')
  H.eq(false, vim.lsp.buf_is_attached(0, H.client().id), 'notes are not attached')
  H.cursor_on(ref_bash, 12)
  local done = H.fabric('Fabric expand')
  H.eq(true, done.ok, 'expand ok: ' .. tostring(done.message))
  H.eq('# ' .. ref_bash, H.lines(0)[1], 'heading')
  H.contains(H.lines(0)[2], 'tool: bash')
end)

H.check('gd on an entry reference jumps to its JSONL line', function()
  vim.cmd.edit(vim.fn.fnameescape(note))
  H.cursor_on(ref_user, 12)
  vim.cmd('normal gd')
  H.wait_for('jump to the session file', function()
    return vim.api.nvim_buf_get_name(0) == s01
  end, 15000)
  H.eq(user._lnum, vim.api.nvim_win_get_cursor(0)[1], 'cursor line')
end)

H.check('gd off a reference keeps the built-in gd', function()
  vim.cmd.edit(vim.fn.fnameescape(note))
  vim.api.nvim_win_set_cursor(0, { 1, 2 }) -- on "Notes"
  vim.cmd('normal gd')
  H.eq(note, vim.api.nvim_buf_get_name(0), 'same buffer')
end)

H.check('gd on a reference in an expand scratch buffer jumps to the JSONL line', function()
  vim.cmd.edit(vim.fn.fnameescape(s01))
  vim.api.nvim_win_set_cursor(0, { bash._lnum, 0 })
  H.eq(true, H.fabric('Fabric expand').ok, 'expand')
  vim.api.nvim_win_set_cursor(0, { 1, 20 })
  H.truthy(require('fabric.buffers').under_cursor(), 'reference under cursor')
  -- The scratch buffer is attached to the client, so K is the server's hover there too.
  H.eq(true, vim.lsp.buf_is_attached(0, H.client().id), 'scratch buffer attached')
  H.close_floats()
  vim.cmd('normal K')
  H.wait_for('hover float in the scratch buffer', function()
    return #H.floats() > 0
  end, 15000)
  H.contains(H.lines(vim.api.nvim_win_get_buf(H.floats()[1])), bash.id)
  H.close_floats()
  local before = #H.done
  require('fabric.buffers').goto_definition()
  H.wait_for('jump', function()
    return vim.api.nvim_buf_get_name(0) == s01
  end, 15000)
  H.eq(bash._lnum, vim.api.nvim_win_get_cursor(0)[1], 'cursor line')
  local _ = before
end)

H.finish()
