-- :checkhealth fabric
local config = require('fabric.config')

local M = {}

local EXPECTED_COMMANDS = {
  'fabric.recall',
  'fabric.expand',
  'fabric.compactionPreview',
  'fabric.branchSummaryPreview',
  'fabric.compact.request',
  'fabric.compact.status',
  'fabric.compact.cancel',
  'fabric.sessions',
  'fabric.fileHistory',
  'fabric.reload',
}

local function resolved_cmd()
  local ok, cfg = pcall(function()
    return vim.lsp.config.fabric
  end)
  if ok and type(cfg) == 'table' and cfg.cmd ~= nil then
    return cfg.cmd, cfg
  end
  return config.get().cmd, nil
end

---Settings the server gets (vim.g.fabric.settings overlaid by vim.lsp.config / the client).
local function effective_settings(cfg, client)
  local settings = vim.deepcopy(config.get().settings)
  if cfg and type(cfg.settings) == 'table' and type(cfg.settings.fabric) == 'table' then
    settings = vim.tbl_deep_extend('force', settings, cfg.settings.fabric)
  end
  if client and type(client.settings) == 'table' and type(client.settings.fabric) == 'table' then
    settings = vim.tbl_deep_extend('force', settings, client.settings.fabric)
  end
  return settings
end

local function check_server(cmd)
  if type(cmd) ~= 'table' then
    vim.health.info('server command is a Lua function; cannot check its executable')
    return
  end
  local exe = cmd[1]
  if vim.fn.executable(exe) ~= 1 then
    vim.health.error(
      ('server command %q is not executable'):format(tostring(exe)),
      { 'install fabric-lsp (pip install fabric-lsp) or set vim.g.fabric = { cmd = { "/path/to/fabric-lsp" } }' }
    )
    return
  end
  local argv = vim.deepcopy(cmd)
  if argv[#argv] == 'serve' then
    argv[#argv] = nil
  end
  argv[#argv + 1] = '--version'
  local ok, res = pcall(function()
    -- Where the server itself runs (never the project: see lsp.server_cwd).
    return vim.system(argv, { text = true, cwd = require('fabric.lsp').server_cwd() }):wait(15000)
  end)
  if not ok then
    vim.health.error(('could not run %s: %s'):format(table.concat(argv, ' '), tostring(res)))
    return
  end
  local out = vim.trim((res.stdout or '') .. (res.stderr or ''))
  if res.code == 0 and out:match('^fabric%-lsp ') then
    vim.health.ok(('server found: %s (%s)'):format(out, vim.fn.exepath(exe)))
  else
    vim.health.error(
      ('%s exited %s: %s'):format(table.concat(argv, ' '), tostring(res.code), out),
      { 'check that the command starts the fabric-lsp server' }
    )
  end
end

local function expand_dir(path)
  return (vim.fn.fnamemodify(vim.fn.expand(path), ':p'):gsub('/$', ''))
end

local function check_dirs(settings)
  local agent, source
  if type(settings.agentDir) == 'string' and settings.agentDir ~= '' then
    agent, source = settings.agentDir, 'setting agentDir'
  elseif vim.env.PI_CODING_AGENT_DIR and vim.env.PI_CODING_AGENT_DIR ~= '' then
    agent, source = vim.env.PI_CODING_AGENT_DIR, '$PI_CODING_AGENT_DIR'
  else
    agent, source = '~/.pi/agent', 'default'
  end
  agent = expand_dir(agent)
  if vim.fn.isdirectory(agent) == 1 then
    vim.health.ok(('agent dir: %s (%s)'):format(agent, source))
  else
    vim.health.warn(('agent dir: %s (%s) does not exist'):format(agent, source), {
      'run Pi once, or set vim.g.fabric = { settings = { agentDir = "…" } }',
    })
  end
  local session_dir = type(settings.sessionDir) == 'string' and expand_dir(settings.sessionDir)
    or (agent .. '/sessions')
  if vim.fn.isdirectory(session_dir) == 1 then
    local files = vim.fn.globpath(session_dir, '*/*.jsonl', false, true)
    vim.health.ok(('session dir: %s (%d session file%s)'):format(session_dir, #files, #files == 1 and '' or 's'))
  else
    vim.health.warn(('session dir: %s does not exist'):format(session_dir))
  end
  local index = type(settings.indexDir) == 'string' and expand_dir(settings.indexDir)
    or (agent .. '/fabric-lsp/memory-index')
  if vim.fn.isdirectory(index) == 1 then
    vim.health.ok(('index dir: %s'):format(index))
  else
    vim.health.info(('index dir: %s (not created yet; the server creates it on the first recall)'):format(index))
  end
end

local function check_client(client)
  if not client then
    vim.health.info('no fabric client is running: open a session JSONL file or run :Fabric status to start one')
    return
  end
  local info = client.server_info or {}
  vim.health.ok(
    ('client %d: %s %s, %s'):format(
      client.id,
      info.name or '?',
      info.version or '?',
      client.initialized and 'initialized' or 'starting'
    )
  )
  local caps = client.server_capabilities or {}
  local features = {}
  for _, pair in ipairs({
    { 'hoverProvider', 'hover' },
    { 'definitionProvider', 'definition' },
    { 'workspaceSymbolProvider', 'workspace symbols' },
    { 'codeLensProvider', 'CodeLens (file history)' },
  }) do
    if caps[pair[1]] then
      features[#features + 1] = pair[2]
    end
  end
  vim.health.info('capabilities: ' .. (#features > 0 and table.concat(features, ', ') or 'none'))
  local commands = (caps.executeCommandProvider or {}).commands or {}
  local have = {}
  for _, c in ipairs(commands) do
    have[c] = true
  end
  local missing = vim.tbl_filter(function(c)
    return not have[c]
  end, EXPECTED_COMMANDS)
  if #missing == 0 then
    local sorted = vim.deepcopy(commands)
    table.sort(sorted)
    vim.health.ok('commands: ' .. table.concat(sorted, ', '))
  else
    vim.health.warn('commands missing from the server: ' .. table.concat(missing, ', '))
  end
end

function M.check()
  vim.health.start('fabric')
  if vim.fn.has('nvim-0.11') == 1 then
    vim.health.ok('Neovim ' .. tostring(vim.version()))
  else
    vim.health.error('Neovim 0.11 or newer is required')
  end
  local _, problems = config.validate(vim.g.fabric)
  if #problems == 0 then
    vim.health.ok('vim.g.fabric: valid')
  end
  for _, msg in ipairs(problems) do
    vim.health.warn(msg, { 'see :help fabric-options' })
  end
  local server_problems = config.settings_problems((vim.g.fabric or {}).settings)
  if #server_problems == 0 then
    vim.health.ok('vim.g.fabric.settings: valid server settings')
  end
  for _, msg in ipairs(server_problems) do
    vim.health.warn(msg, { 'see docs/configuration.md (the server settings)' })
  end
  local choice = config.get().picker
  local backend = require('fabric.picker').resolve(choice)
  local what = {
    float = "the plugin's float (vim.ui.select is Neovim's own, which cannot highlight)",
    select = 'vim.ui.select (replaced by a plugin or your config)',
  }
  vim.health.info(('recall picker: %s (picker = %q)'):format(what[backend] or backend, choice))
  local cmd, cfg = resolved_cmd()
  check_server(cmd)
  local client = require('fabric.lsp').get_client(0)
  check_dirs(effective_settings(cfg, client))
  check_client(client)
end

return M
