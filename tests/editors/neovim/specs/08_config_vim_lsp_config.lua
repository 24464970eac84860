-- Options through vim.lsp.config() (the 0.11 way) win over $PI_CODING_AGENT_DIR; a wrong server
-- command shows in :checkhealth and fails the command with a clear message.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

-- A second agent dir with only one session of this project.
local alt = vim.fn.fnamemodify(H.agent, ':h') .. '/alt-agent'
local project_dir = '--' .. H.project:sub(2):gsub('[/\\:]', '-') .. '--'
vim.fn.mkdir(alt .. '/sessions/' .. project_dir, 'p')
local src = H.session_file('01-')
local dest = alt .. '/sessions/' .. project_dir .. '/only.jsonl'
vim.fn.writefile(vim.fn.readfile(src, 'b'), dest, 'b')

vim.lsp.config('fabric', { settings = { fabric = { agentDir = alt } } })

H.check('the agentDir given through vim.lsp.config is what the server uses', function()
  H.open_attached(dest)
  local rec = H.pick_with(function()
    return nil
  end)
  H.eq(true, H.fabric('Fabric sessions').ok, 'sessions ok')
  H.eq(1, #rec.items, 'one session in the alternative agent dir')
  H.eq(dest, rec.items[1].sessionFile, 'file')
end)

H.check(':checkhealth fabric names the agent dir and where it came from', function()
  vim.cmd('checkhealth fabric')
  local text = table.concat(H.lines(0), '\n')
  H.contains(text, ('agent dir: %s (setting agentDir)'):format(alt))
  H.contains(text, ('session dir: %s/sessions (1 session file)'):format(alt))
  vim.cmd('bwipeout')
end)

H.check('a server command that is not executable: health error and a clear command failure', function()
  for _, c in ipairs(vim.lsp.get_clients({ name = 'fabric' })) do
    c:stop(true)
  end
  H.wait_for('client stopped', function()
    return #vim.lsp.get_clients({ name = 'fabric' }) == 0
  end, 10000)
  vim.lsp.config('fabric', { cmd = { '/nonexistent/fabric-lsp' } })
  vim.cmd('checkhealth fabric')
  local text = table.concat(H.lines(0), '\n')
  H.contains(text, 'server command "/nonexistent/fabric-lsp" is not executable')
  vim.cmd('bwipeout')
  vim.cmd.enew()
  H.messages = {}
  local done = H.fabric('Fabric sessions')
  H.eq(false, done.ok, 'ok')
  H.contains(done.message, '"/nonexistent/fabric-lsp" is not executable')
  H.truthy(H.notified('Fabric sessions: server command'), 'notified')
end)

H.finish()
