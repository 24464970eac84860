-- rtp: none
-- The plugin installed the way lazy.nvim installs `{ dir = '…/editors/neovim', init = … }`
-- (the README's spec): `init` sets vim.g.fabric, the dir goes on the runtimepath, its
-- plugin/**/*.lua is sourced and helptags are built into doc/tags (ignored by git). Then a
-- bare entry id typed in a session buffer expands with that buffer's session.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))
local plugin = assert(os.getenv('FABRIC_TEST_PLUGIN'), 'FABRIC_TEST_PLUGIN not set')

H.check('without the dir on the runtimepath there is no :Fabric', function()
  H.eq(0, vim.fn.exists(':Fabric'), ':Fabric before loading')
end)

H.check('the lazy.nvim steps load the plugin from its dir', function()
  -- init = function() vim.g.fabric = {...} end
  vim.g.fabric = { compaction = { keepRecentTokens = 20000 } }
  -- what lazy does for a `dir` spec that is not lazy-loaded
  vim.opt.rtp:prepend(plugin)
  vim.cmd('runtime! plugin/**/*.lua')
  vim.cmd.helptags(vim.fn.fnameescape(plugin .. '/doc'))
  H.eq(2, vim.fn.exists(':Fabric'), ':Fabric')
  H.eq(true, vim.lsp.is_enabled('fabric'), 'fabric enabled')
  H.truthy(#vim.fn.globpath(plugin, 'doc/tags', false, true) == 1, 'doc/tags built')
  vim.fn.system({ 'git', '-C', plugin, 'check-ignore', '-q', 'doc/tags' })
  H.eq(0, vim.v.shell_error, 'git ignores doc/tags')
end)

-- The long example session (01a18ac0…) and one user entry of it.
local long
for _, f in ipairs(H.example_sessions()) do
  if vim.fs.basename(f):find('_01a18ac0', 1, true) then
    long = f
  end
end
local header, user
for _, obj in ipairs(H.read_jsonl(assert(long, 'the long example session'))) do
  if obj.type == 'session' then
    header = obj
  elseif obj.type == 'message' and obj.message.role == 'user' and not user then
    user = obj
  end
end

H.check('a session buffer attaches, and :Fabric expand <bare entry id> uses its session', function()
  H.open_attached(long)
  local done = H.fabric('Fabric expand ' .. user.id)
  H.eq(true, done.ok, 'expand ok: ' .. tostring(done.message))
  H.eq(('fabric://expand/%s/%s'):format(header.id, user.id), vim.api.nvim_buf_get_name(0), 'buffer name')
  H.eq('# pi-entry:' .. header.id .. '/' .. user.id, H.lines(0)[1], 'heading')
  H.contains(H.lines(0), 'Speed up the SGP4 propagation loop')
end)

H.check('inside the expand scratch buffer a bare id still means that session', function()
  local done = H.fabric('Fabric expand ' .. user.id)
  H.eq(true, done.ok, 'expand ok: ' .. tostring(done.message))
end)

H.check('<session prefix>/<entry> resolves the 8-character prefix on the server', function()
  vim.cmd.enew()
  local done = H.fabric(('Fabric expand %s/%s'):format(header.id:sub(1, 8), user.id))
  H.eq(true, done.ok, 'expand ok: ' .. tostring(done.message))
  H.eq(('fabric://expand/%s/%s'):format(header.id, user.id), vim.api.nvim_buf_get_name(0), 'buffer name')
end)

H.check('a bare id outside any session buffer is an error that says what to write', function()
  vim.cmd.enew()
  local done = H.fabric('Fabric expand ' .. user.id)
  H.eq(false, done.ok, 'ok')
  H.contains(done.message, 'names no session')
  H.contains(done.message, '<session>/' .. user.id)
end)

H.check('a malformed reference is a syntax error naming the forms', function()
  local done = H.fabric('Fabric expand pi-entry:nope')
  H.eq(false, done.ok, 'ok')
  H.contains(done.message, 'pi-entry:<session>/<entry>')
end)

H.finish()
