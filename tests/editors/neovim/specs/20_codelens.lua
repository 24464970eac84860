-- The file-history CodeLens in a source buffer of a project with Pi sessions (option
-- code_lens, default on): the client attaches, vim.lsp.codelens shows "Pi: N sessions · …"
-- on line 0, and running it lists the operations. A file of a project without sessions
-- starts no client.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

local target = H.project .. '/calc/ops.py'
vim.fn.mkdir(vim.fs.dirname(target), 'p')
if vim.fn.filereadable(target) == 0 then
  vim.fn.writefile({ 'def add(a, b):', '    return a + b' }, target)
end

H.check('a source file of a Pi project gets the lens on line 0', function()
  vim.cmd.edit(target)
  local buf = vim.api.nvim_get_current_buf()
  H.wait_for('the fabric client on the source buffer', function()
    return #vim.lsp.get_clients({ name = 'fabric', bufnr = buf }) == 1
  end, 20000)
  H.wait_for('a resolved lens', function()
    local lenses = vim.lsp.codelens.get(buf)
    return #lenses > 0 and lenses[1].command ~= nil
  end, 20000)
  local lens = vim.lsp.codelens.get(buf)[1]
  H.eq(0, lens.range.start.line, 'on line 0')
  H.truthy(lens.command.title:match('^Pi: 3 sessions'), 'title: ' .. lens.command.title)
  H.eq('fabric.fileHistory', lens.command.command, 'command')
  -- running it (as <cmd>lua vim.lsp.codelens.run()<cr> does) lists the 9 operations
  local rec = H.pick_with(function()
    return nil
  end)
  local before = #H.done
  vim.lsp.commands['fabric.fileHistory'](lens.command, { bufnr = buf })
  H.wait_for('history done', function()
    return #H.done > before
  end)
  H.eq(9, #rec.items, 'operations listed')
end)

H.check('a file of a project without Pi sessions starts no client', function()
  local elsewhere = vim.fn.tempname() .. '/other/main.py'
  vim.fn.mkdir(vim.fs.dirname(elsewhere), 'p')
  vim.fn.writefile({ 'print(1)' }, elsewhere)
  vim.cmd.edit(elsewhere)
  local buf = vim.api.nvim_get_current_buf()
  -- the attach decision is made by lsp.attachable (root_dir never calls back for it)
  H.eq(false, require('fabric.lsp').attachable(buf), 'attachable')
  H.eq(0, #vim.lsp.get_clients({ name = 'fabric', bufnr = buf }), 'clients on the other buffer')
end)

H.finish()
