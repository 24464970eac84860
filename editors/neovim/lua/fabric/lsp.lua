-- Client-side pieces of the vim.lsp.Config in lsp/fabric.lua, and access to the running client.
local config = require('fabric.config')

local M = {}

M.name = 'fabric'

---Whether the client attaches to `bufnr`: a Pi session JSONL buffer (first line a session
---header) or a Fabric scratch buffer (`fabric://…`). Any other buffer of the configured
---filetypes (a README.md, a data .jsonl) never starts the server.
---@param bufnr integer
---@return boolean
function M.attachable(bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) then
    return false
  end
  local name = vim.api.nvim_buf_get_name(bufnr)
  if vim.startswith(name, 'fabric://') then
    return true
  end
  if require('fabric.buffers').session_of_buffer(bufnr) ~= nil then
    return true
  end
  return M.lens_buffer(bufnr)
end

---Pi's session folder name of a cwd (leading separator dropped, `/ \ :` → `-`, in `--`).
---@param cwd string
---@return string
function M.encode_cwd(cwd)
  local trimmed = cwd:gsub('^[/\\]', '')
  return '--' .. trimmed:gsub('[/\\:]', '-') .. '--'
end

---The sessions directory the server reads (agentDir from the settings, else
---$PI_CODING_AGENT_DIR, else ~/.pi/agent).
---@return string
function M.sessions_dir()
  local settings = config.get().settings or {}
  if type(settings.sessionDir) == 'string' and settings.sessionDir ~= '' then
    return vim.fs.normalize(settings.sessionDir)
  end
  local agent = settings.agentDir
  if type(agent) ~= 'string' or agent == '' then
    agent = vim.env.PI_CODING_AGENT_DIR
  end
  if type(agent) ~= 'string' or agent == '' then
    agent = '~/.pi/agent'
  end
  return vim.fs.joinpath(vim.fs.normalize(agent), 'sessions')
end

---Whether `bufnr` is a source file of a project with Pi sessions, for the file-history
---CodeLens (option `code_lens`).
---@param bufnr integer
---@return boolean
function M.lens_buffer(bufnr)
  if not config.get().code_lens or vim.bo[bufnr].buftype ~= '' then
    return false
  end
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == '' or not vim.startswith(name, '/') then
    return false
  end
  -- the file lies in (or below) a directory some Pi session ran in
  local sessions = M.sessions_dir()
  for dir in vim.fs.parents(name) do
    if vim.fn.isdirectory(vim.fs.joinpath(sessions, M.encode_cwd(dir))) == 1 then
      return true
    end
  end
  return false
end

---Workspace root: the nearest root marker, else the current directory. Not called back
---(so not attached) for buffers that are not `attachable`.
---@param bufnr integer
---@param on_dir fun(dir: string)
function M.root_dir(bufnr, on_dir)
  if not M.attachable(bufnr) then
    return
  end
  local markers = config.get().root_markers
  local root = (#markers > 0) and vim.fs.root(bufnr, markers) or nil
  on_dir(root or vim.fn.getcwd())
end

---The server's working directory: stdpath('cache')/fabric-lsp (created, owner-only). Never
---the project: `python -m fabric_lsp` puts its working directory first on sys.path, and a
---relative $PATH entry resolves against it, so a repository could otherwise run its code.
---@return string
function M.server_cwd()
  local dir = vim.fs.joinpath(vim.fn.stdpath('cache'), 'fabric-lsp')
  if vim.fn.isdirectory(dir) == 0 then
    vim.fn.mkdir(dir, 'p', tonumber('700', 8))
  end
  return dir
end

---The server command with an absolute program: `~` expanded, a bare name looked up on the
---absolute entries of $PATH (a relative entry such as `.` would name the project's files).
---A name that is not found is left as it is (starting it then fails with that name).
---@param cmd string[]|function
---@return string[]|function
function M.resolve_cmd(cmd)
  if type(cmd) ~= 'table' or type(cmd[1]) ~= 'string' then
    return cmd
  end
  local out = vim.deepcopy(cmd)
  local exe = cmd[1]
  if exe == '~' or exe:sub(1, 2) == '~/' then
    out[1] = vim.fs.normalize(exe)
    return out
  end
  if exe:find('/', 1, true) then
    return out
  end
  for dir in vim.gsplit(vim.env.PATH or '', ':', { plain = true }) do
    if dir:sub(1, 1) == '/' then
      local candidate = vim.fs.joinpath(dir, exe)
      if vim.fn.isdirectory(candidate) == 0 and vim.fn.executable(candidate) == 1 then
        out[1] = candidate
        return out
      end
    end
  end
  return out
end

---Reuse any running fabric client: the server is editor-wide, not per project.
---@param client vim.lsp.Client
---@param cfg vim.lsp.ClientConfig
function M.reuse_client(client, cfg)
  return client.name == cfg.name and not client:is_stopped()
end

---Merge settings tables; an empty result is a JSON object (`{}`), never an array.
local function deep_merge(base, over)
  local merged = vim.tbl_deep_extend('force', base or {}, over or {})
  if next(merged) == nil then
    return vim.empty_dict()
  end
  return merged
end
M.deep_merge = deep_merge

---Server settings = vim.g.fabric.settings (read now, at server start) overlaid by the
---"fabric" section given through vim.lsp.config(); sent as initializationOptions (merged
---under any init_options of vim.lsp.config) and answered for workspace/configuration.
---@param params lsp.InitializeParams
---@param cfg vim.lsp.ClientConfig
function M.before_init(params, cfg)
  local from_config = type(cfg.settings) == 'table' and cfg.settings.fabric or nil
  local merged = deep_merge(config.get().settings, from_config)
  if type(cfg.settings) == 'table' then
    -- Mutate in place: the client already holds this table as client.settings.
    cfg.settings.fabric = merged
  end
  params.initializationOptions = deep_merge(merged, params.initializationOptions)
end

-- Server log lines (window/logMessage), newest last, for `:Fabric log`.
M.log_lines = {}
local MAX_LOG = 2000
local LEVEL_NAMES = { 'ERROR', 'WARN', 'INFO', 'LOG', 'DEBUG' }

local function record_log(params)
  local level = LEVEL_NAMES[params.type] or tostring(params.type)
  for line in tostring(params.message):gmatch('[^\n]+') do
    M.log_lines[#M.log_lines + 1] = ('[%s] %s'):format(level, line)
  end
  while #M.log_lines > MAX_LOG do
    table.remove(M.log_lines, 1)
  end
end

M.handlers = {
  ['window/logMessage'] = function(err, params, ctx)
    if params then
      record_log(params)
    end
    return vim.lsp.handlers['window/logMessage'](err, params, ctx)
  end,
  ['fabric/compactionCommitted'] = function(_, params)
    require('fabric.notify').compaction_committed(params)
    if type(params) == 'table' and type(params.session) == 'string' then
      require('fabric.statusline').cache[params.session] = nil
      pcall(require('fabric.statusline').refresh, 0)
      -- Views of that session that the commit made stale.
      require('fabric.commands').refresh_previews(params.session)
    end
  end,
  ['fabric/activity'] = function(_, params)
    require('fabric.progress').activity(params)
    if type(params) == 'table' and params.complete == true and params.request == 'fabric/backgroundIndex' then
      -- The whole history is indexed now: the file-history lenses may have more to say, and
      -- the partial answers still on screen are searched again (fabric.stale).
      M.refresh_lenses()
      require('fabric.stale').index_complete()
    end
  end,
}

---Refresh the CodeLens of every buffer the fabric client is attached to (option code_lens).
function M.refresh_lenses()
  for _, client in ipairs(vim.lsp.get_clients({ name = M.name })) do
    if client:supports_method('textDocument/codeLens') then
      for buf in pairs(client.attached_buffers or {}) do
        if vim.api.nvim_buf_is_loaded(buf) and M.lens_buffer(buf) then
          pcall(vim.lsp.codelens.refresh, { bufnr = buf })
        end
      end
    end
  end
  vim.api.nvim_exec_autocmds('User', { pattern = 'FabricViewRefreshed', modeline = false, data = { kind = 'codelens' } })
end

---The fabric client attached to `bufnr`, else any running fabric client.
---@param bufnr? integer
---@return vim.lsp.Client?
function M.get_client(bufnr)
  local attached = vim.lsp.get_clients({ name = M.name, bufnr = bufnr or 0 })
  if attached[1] then
    return attached[1]
  end
  return vim.lsp.get_clients({ name = M.name })[1]
end

---Start (or reuse) the fabric client without attaching it to the current buffer.
---@return vim.lsp.Client?, string?
function M.ensure_client()
  local client = M.get_client(0)
  if client then
    return client
  end
  local ok, resolved = pcall(function()
    return vim.lsp.config[M.name]
  end)
  if not ok or type(resolved) ~= 'table' then
    return nil, 'no vim.lsp config named "fabric" (is editors/neovim on the runtimepath?)'
  end
  local cfg = vim.deepcopy(resolved)
  if type(cfg.root_dir) == 'function' then
    local dir
    cfg.root_dir(vim.api.nvim_get_current_buf(), function(d)
      dir = d
    end)
    cfg.root_dir = dir or vim.fn.getcwd()
  end
  local cmd = cfg.cmd
  if type(cmd) == 'table' and vim.fn.executable(cmd[1]) ~= 1 then
    return nil, ('server command %q is not executable (set vim.g.fabric.cmd; see :checkhealth fabric)'):format(
      tostring(cmd[1])
    )
  end
  local id = vim.lsp.start(cfg, { attach = false, silent = true })
  if not id then
    return nil, 'the fabric-lsp server failed to start (see :Fabric log and :checkhealth fabric)'
  end
  return vim.lsp.get_client_by_id(id)
end

---Call `fn(client)` once a fabric client is initialized, or `fn(nil, err)`.
---@param fn fun(client: vim.lsp.Client?, err: string?)
function M.with_client(fn)
  local client, err = M.ensure_client()
  if not client then
    return fn(nil, err)
  end
  if client.initialized then
    return fn(client)
  end
  local deadline = vim.uv.now() + config.get().timeout_ms
  local timer = assert(vim.uv.new_timer())
  timer:start(
    20,
    20,
    vim.schedule_wrap(function()
      if timer:is_closing() then
        return
      end
      if client.initialized then
        timer:close()
        fn(client)
      elseif client:is_stopped() or vim.uv.now() > deadline then
        timer:close()
        fn(nil, 'the fabric-lsp server did not initialize (see :Fabric log)')
      end
    end)
  )
end

---Send a request; `cb(err_message, result)` runs exactly once, also on timeout.
---@param method string
---@param params table
---@param cb fun(err: string?, result: any)
---@param opts? {bufnr?: integer, timeout_ms?: integer}
function M.request(method, params, cb, opts)
  opts = opts or {}
  M.with_client(function(client, cerr)
    if not client then
      return cb(cerr)
    end
    local done = false
    local timer
    local function finish(err, result)
      if done then
        return
      end
      done = true
      if timer and not timer:is_closing() then
        timer:close()
      end
      cb(err, result)
    end
    local bufnr = opts.bufnr or vim.api.nvim_get_current_buf()
    local ok, request_id = client:request(method, params, function(err, result)
      if err then
        finish(('%s (%s)'):format(err.message or vim.inspect(err), tostring(err.code)))
      else
        finish(nil, result)
      end
    end, bufnr)
    if not ok then
      return finish('the fabric-lsp server is not running')
    end
    local timeout = opts.timeout_ms or config.get().timeout_ms
    timer = assert(vim.uv.new_timer())
    timer:start(
      timeout,
      0,
      vim.schedule_wrap(function()
        if not done then
          pcall(client.cancel_request, client, request_id)
          finish(('%s timed out after %d ms'):format(method, timeout))
        end
      end)
    )
  end)
end

return M
