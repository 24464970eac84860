-- rtp: none
-- Issue 34, finding 13: `:help fabric` works on a fresh install where nothing ran
-- :helptags (lazy.nvim's `dir` spec before `:Lazy build`): loading the plugin builds its
-- doc/tags. The plugin is a fresh copy (no doc/tags) put on the runtimepath as lazy does.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))
local plugin = assert(os.getenv('FABRIC_TEST_PLUGIN'), 'FABRIC_TEST_PLUGIN not set')

local copy = vim.fn.tempname() .. '/fabric'
vim.fn.mkdir(copy, 'p')
vim.fn.system({ 'cp', '-R', plugin .. '/lua', plugin .. '/plugin', plugin .. '/lsp', plugin .. '/doc', copy })
H.eq(0, vim.v.shell_error, 'copied')
vim.fn.delete(copy .. '/doc/tags')

H.check('a fresh copy has no doc/tags and :help fabric fails before the plugin loads', function()
  H.eq(nil, vim.uv.fs_stat(copy .. '/doc/tags'), 'no tags')
  vim.opt.rtp:prepend(copy)
  H.eq(false, pcall(vim.cmd, 'help fabric'), ':help before loading')
end)

H.check('loading the plugin builds doc/tags: :help fabric and :help fabric-picker open', function()
  vim.cmd('runtime! plugin/**/*.lua') -- what lazy does for a `dir` spec that is not lazy-loaded
  H.truthy(vim.uv.fs_stat(copy .. '/doc/tags'), 'doc/tags built')
  vim.cmd('help fabric')
  H.eq(copy .. '/doc/fabric.txt', vim.api.nvim_buf_get_name(0), 'help file')
  vim.cmd('helpclose')
  vim.cmd('help fabric-picker')
  H.eq('fabric.txt', vim.fs.basename(vim.api.nvim_buf_get_name(0)), 'fabric-picker')
  vim.cmd('helpclose')
end)

H.finish()
