-- Trust boundaries of the Neovim client. Neovim runs in the test project (its cwd), which
-- ships what a hostile repository would: a `fabric_lsp/` package that `python -m fabric_lsp`
-- would import from the current directory, and a `.pi/fabric.json` + `.pi/settings.json`.
-- The server runs in stdpath('cache')/fabric-lsp (read from /proc/<pid>/cwd), its program
-- is absolute, a relative program is refused, and the project's files are neither run nor
-- applied (the plugin reads no project-local configuration; `trusted` is false unless the
-- user's own configuration says otherwise).
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))
local config = require('fabric.config')

local marker = H.project .. '/project-code-ran'
vim.fn.mkdir(H.project .. '/fabric_lsp', 'p')
vim.fn.writefile({
  'import pathlib',
  ('pathlib.Path(%q).write_text("imported from the project")'):format(marker),
  'raise SystemExit("the project\'s fabric_lsp was imported")',
}, H.project .. '/fabric_lsp/__init__.py')
vim.fn.mkdir(H.project .. '/.pi', 'p')
vim.fn.writefile({ vim.json.encode({ memory = { maxSessions = 3 }, indexDir = H.project .. '/idx' }) }, H.project .. '/.pi/fabric.json')
vim.fn.writefile({ vim.json.encode({ compaction = { keepRecentTokens = 1234 } }) }, H.project .. '/.pi/settings.json')

local cache = vim.fs.joinpath(vim.fn.stdpath('cache'), 'fabric-lsp')
local server = vim.fn.exepath('fabric-lsp')

H.check('the default command is the console script by absolute path, run in stdpath("cache")/fabric-lsp', function()
  H.eq(vim.fn.getcwd(), H.project, "Neovim's cwd is the project")
  H.truthy(server:sub(1, 1) == '/', 'fabric-lsp on PATH: ' .. server)
  H.eq({ server }, vim.lsp.config.fabric.cmd, 'cmd')
  H.eq(cache, vim.lsp.config.fabric.cmd_cwd, 'cmd_cwd')
  H.eq(1, vim.fn.isdirectory(cache), 'cmd_cwd exists')
  H.eq('rwx------', vim.fn.getfperm(cache), 'cmd_cwd is owner-only')
end)

H.check('a relative program is refused (the default applies); absolute, ~/… and bare names are accepted', function()
  H.messages = {}
  for _, bad in ipairs({ { '.venv/bin/fabric-lsp' }, { './fabric-lsp' }, 'bin/fabric-lsp' }) do
    local valid, problems = config.validate({ cmd = bad })
    H.eq(nil, valid.cmd, 'cmd kept for ' .. vim.inspect(bad))
    H.contains(problems[1] or '', 'vim.g.fabric.cmd: expected a command', 'problem for ' .. vim.inspect(bad))
    H.contains(problems[1], 'never a relative path')
  end
  for _, good in ipairs({ { '/opt/fabric-lsp' }, { '~/venv/bin/fabric-lsp' }, 'fabric-lsp', { 'python3', '-I', '-m', 'fabric_lsp' } }) do
    local valid, problems = config.validate({ cmd = good })
    H.eq({}, problems, 'problems for ' .. vim.inspect(good))
    H.eq(good, valid.cmd, 'cmd')
  end
  vim.g.fabric = { cmd = { '.venv/bin/fabric-lsp' } }
  H.eq({ 'fabric-lsp' }, config.get().cmd, 'the default replaces a relative program')
  H.truthy(H.notified('fabric: vim.g.fabric.cmd: expected a command'), vim.inspect(H.messages))
  vim.g.fabric = nil
  -- ~ is expanded and a bare name becomes the absolute path found on $PATH.
  local lsp = require('fabric.lsp')
  H.eq({ vim.fs.normalize('~/x'), '-v' }, lsp.resolve_cmd({ '~/x', '-v' }), '~ expanded')
  H.eq({ server }, lsp.resolve_cmd({ 'fabric-lsp' }), 'bare name resolved')
end)

---The pids of the running fabric-lsp servers started by this Neovim.
local function server_pids()
  local out = {}
  for _, pid in ipairs(vim.api.nvim_get_proc_children(vim.fn.getpid())) do
    local f = io.open(('/proc/%d/cmdline'):format(pid), 'rb')
    local cmdline = f and f:read('*a') or ''
    if f then
      f:close()
    end
    if cmdline:find('fabric', 1, true) then
      out[#out + 1] = pid
    end
  end
  return out
end

-- `python -m fabric_lsp` imports a `fabric_lsp` in its working directory first: the command
-- a user may configure, run from the project, would run the project's code.
local python = vim.fs.joinpath(vim.fs.dirname(server), 'python')
vim.lsp.config('fabric', { cmd = { python, '-m', 'fabric_lsp' } })

H.check("the server's working directory is ours, not the project: the project's code never runs", function()
  H.open_attached(H.session_file('01-'))
  local pids = server_pids()
  H.eq(1, #pids, 'one server process: ' .. vim.inspect(pids))
  local cwd = vim.uv.fs_readlink(('/proc/%d/cwd'):format(pids[1]))
  H.eq(vim.uv.fs_realpath(cache), cwd, 'server cwd')
  H.truthy(cwd ~= vim.uv.fs_realpath(H.project), 'not the project')
  H.eq(0, vim.fn.filereadable(marker), "the project's fabric_lsp was not imported")
end)

H.check("the project's .pi/fabric.json and .pi/settings.json are not applied (trusted = false)", function()
  local res = vim.lsp.buf_request_sync(0, 'workspace/executeCommand', { command = 'fabric.reload', arguments = { vim.empty_dict() } }, 15000)
  local reload = res and res[H.client().id]
  H.truthy(reload and not reload.err and reload.result, 'fabric.reload: ' .. vim.inspect(reload))
  local effective = reload.result
  H.eq(false, effective.trusted, 'trusted')
  H.eq(500, effective.memory.maxSessions, 'memory.maxSessions (the project says 3)')
  H.eq(20000, effective.keepRecentTokens, 'keepRecentTokens (the project says 1234)')
  H.truthy(effective.indexDir ~= H.project .. '/idx', 'indexDir is not the project\'s: ' .. tostring(effective.indexDir))
  for _, source in ipairs(effective.sources or {}) do
    H.truthy(not vim.startswith(source, H.project), 'a project file was read: ' .. source)
  end
end)

H.check(':checkhealth fabric runs the server command in our directory too', function()
  vim.cmd('checkhealth fabric')
  local text = table.concat(H.lines(0), '\n')
  H.contains(text, 'server found: fabric-lsp ')
  vim.cmd('bwipeout')
  H.eq(0, vim.fn.filereadable(marker), "the project's fabric_lsp was not imported")
end)

H.finish()
