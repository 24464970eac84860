-- :help fabric documents every subcommand (tags generated with :helptags on a copy of doc/).
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

local plugin_doc
for _, dir in ipairs(vim.api.nvim_list_runtime_paths()) do
  if vim.uv.fs_stat(dir .. '/doc/fabric.txt') then
    plugin_doc = dir .. '/doc/fabric.txt'
    break
  end
end

H.check(':helptags accepts doc/fabric.txt (no duplicate tags) and :help fabric opens it', function()
  H.truthy(plugin_doc, 'doc/fabric.txt on the runtimepath')
  local copy = vim.fn.tempname()
  vim.fn.mkdir(copy .. '/doc', 'p')
  vim.fn.writefile(vim.fn.readfile(plugin_doc, 'b'), copy .. '/doc/fabric.txt', 'b')
  vim.cmd('helptags ' .. vim.fn.fnameescape(copy .. '/doc'))
  vim.opt.rtp:prepend(copy)
  vim.cmd('help fabric')
  H.eq('help', vim.bo.buftype, 'help buffer')
  H.eq('fabric.txt', vim.fs.basename(vim.api.nvim_buf_get_name(0)), 'file')
  vim.cmd('helpclose')
end)

H.check('every :Fabric subcommand has a help tag and a line in the text', function()
  local text = table.concat(vim.fn.readfile(plugin_doc), '\n')
  for _, name in ipairs(require('fabric.commands').names()) do
    vim.cmd('help :Fabric-' .. name)
    H.eq('fabric.txt', vim.fs.basename(vim.api.nvim_buf_get_name(0)), ':help :Fabric-' .. name)
    vim.cmd('helpclose')
    H.contains(text, 'Fabric ' .. name, 'usage line of ' .. name)
  end
  for _, tag in ipairs({ 'fabric-options', 'fabric-health', 'fabric-hover', 'fabric-progress', ':Fabric-recall!' }) do
    vim.cmd('help ' .. tag)
    H.eq('fabric.txt', vim.fs.basename(vim.api.nvim_buf_get_name(0)), ':help ' .. tag)
    vim.cmd('helpclose')
  end
end)

H.check('every option default is documented', function()
  local text = table.concat(vim.fn.readfile(plugin_doc), '\n')
  for key in pairs(require('fabric.config').defaults) do
    H.contains(text, '    ' .. key .. ' ', 'option ' .. key)
  end
end)

H.finish()
