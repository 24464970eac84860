-- The plugin loads with no setup(), attaches to a session JSONL, and :checkhealth, :Fabric
-- completion, :Fabric status and :Fabric log work.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

H.check('plugin/fabric.lua loaded from the runtimepath, :Fabric defined, fabric enabled', function()
  H.eq(true, vim.g.loaded_fabric, 'g:loaded_fabric')
  H.eq(2, vim.fn.exists(':Fabric'), 'exists(:Fabric)')
  H.eq(true, vim.lsp.is_enabled('fabric'), 'vim.lsp.is_enabled')
  -- The program by absolute path (lsp.resolve_cmd), found on $PATH.
  H.eq({ vim.fn.exepath('fabric-lsp') }, vim.lsp.config.fabric.cmd, 'default cmd')
end)

local session = H.session_file('01-')

H.check('a session JSONL gets filetype jsonl and the fabric client attaches', function()
  local buf = H.open_attached(session)
  H.eq('jsonl', vim.bo[buf].filetype, 'filetype')
  local client = H.client()
  H.eq('fabric-lsp', client.server_info.name, 'serverInfo.name')
  H.truthy(client.server_info.version, 'serverInfo.version')
  H.eq(1, #vim.lsp.get_clients({ name = 'fabric' }), 'one fabric client')
end)

H.check('a second session file reuses the same client', function()
  H.open_attached(H.session_file('03-'))
  H.eq(1, #vim.lsp.get_clients({ name = 'fabric' }), 'one fabric client')
  vim.cmd.edit(vim.fn.fnameescape(session))
end)

H.check(':Fabric completion lists the subcommands and scopes', function()
  H.eq(
    { 'branchsummary', 'cancel', 'compact', 'expand', 'history', 'log', 'preview', 'recall', 'reload', 'sessions', 'status' },
    vim.fn.getcompletion('Fabric ', 'cmdline'),
    'subcommands'
  )
  H.eq({ 'recall' }, vim.fn.getcompletion('Fabric rec', 'cmdline'), 'prefix')
  H.eq({ 'global' }, vim.fn.getcompletion('Fabric sessions g', 'cmdline'), 'sessions scope')
end)

H.check(':checkhealth fabric reports the server, its version, the dirs and the capabilities', function()
  vim.cmd('checkhealth fabric')
  local text = table.concat(H.lines(0), '\n')
  local client = H.client()
  H.contains(text, 'server found: fabric-lsp ' .. client.server_info.version)
  H.contains(text, vim.fn.exepath('fabric-lsp'))
  H.contains(text, 'agent dir: ' .. H.agent .. ' ($PI_CODING_AGENT_DIR)')
  local count = #vim.fn.globpath(H.sessions, '*/*.jsonl', false, true)
  H.truthy(count >= 4, 'fixture sessions')
  H.contains(text, ('session dir: %s/sessions (%d session files)'):format(H.agent, count))
  H.contains(text, 'index dir: ' .. H.agent .. '/fabric-lsp/memory-index')
  H.contains(text, 'client ' .. client.id .. ': fabric-lsp')
  H.contains(text, 'capabilities: hover, definition')
  H.contains(text, 'commands: ')
  H.contains(text, 'fabric.recall')
  if text:find('ERROR', 1, true) then
    error('health reports an error:\n' .. text)
  end
  vim.cmd('bwipeout')
end)

H.check(':Fabric status names the server and the session compaction status', function()
  vim.cmd.edit(vim.fn.fnameescape(session))
  H.messages = {}
  local done = H.fabric('Fabric status')
  H.eq(true, done.ok, 'status ok: ' .. tostring(done.message))
  local m = H.truthy(H.notified('Fabric: fabric-lsp '), 'status message')
  H.contains(m.msg, session)
  H.contains(m.msg, 'no pending compaction')
end)

H.check(':Fabric log shows the server log buffer', function()
  local done = H.fabric('Fabric log')
  H.eq(true, done.ok, 'log ok')
  H.contains(vim.api.nvim_buf_get_name(0), 'fabric://log')
  H.contains(H.lines(0), '# fabric-lsp log')
  H.contains(H.lines(0), 'Neovim LSP log: ')
end)

H.check('an unknown subcommand fails with a message naming the subcommands', function()
  H.messages = {}
  local done = H.fabric('Fabric frobnicate')
  H.eq(false, done.ok, 'ok')
  H.contains(done.message, 'unknown subcommand "frobnicate"')
  H.truthy(H.notified('recall, reload, sessions, status'), 'notified')
end)

H.finish()
