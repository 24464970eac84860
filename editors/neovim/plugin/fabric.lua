-- Fabric for Neovim 0.11+: the :Fabric command, progress display, `gd` on entry references,
-- and vim.lsp.enable('fabric') (set vim.g.fabric = { autostart = false } to enable it yourself).
if vim.g.loaded_fabric then
  return
end
vim.g.loaded_fabric = true

if vim.fn.has('nvim-0.11') == 0 then
  vim.notify('fabric: Neovim 0.11 or newer is required', vim.log.levels.ERROR)
  return
end

vim.api.nvim_create_user_command('Fabric', function(cmd)
  require('fabric.commands').run(cmd)
end, {
  nargs = '*',
  bang = true,
  range = true,
  desc = 'Fabric: recall, expand, preview, compact, status, cancel, sessions, log',
  complete = function(arglead, cmdline, pos)
    return require('fabric.commands').complete(arglead, cmdline, pos)
  end,
})

local group = vim.api.nvim_create_augroup('fabric', { clear = true })

vim.api.nvim_create_autocmd('LspProgress', {
  group = group,
  desc = 'Fabric: show the server progress',
  callback = function(ev)
    require('fabric.progress').on_progress(ev)
  end,
})

vim.api.nvim_create_autocmd('LspAttach', {
  group = group,
  desc = 'Fabric: gd on entry references',
  callback = function(ev)
    local client = vim.lsp.get_client_by_id(ev.data.client_id)
    if not client or client.name ~= 'fabric' then
      return
    end
    if require('fabric.config').get().keymaps then
      vim.keymap.set('n', 'gd', function()
        require('fabric.refs').goto_definition()
      end, { buffer = ev.buf, desc = 'Fabric: go to the entry reference under the cursor' })
    end
  end,
})

if require('fabric.config').get().autostart then
  vim.lsp.enable('fabric')
end
