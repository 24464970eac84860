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

-- `:help fabric` on any install: when doc/tags is missing or older than doc/fabric.txt (a
-- fresh lazy.nvim `dir` install, a symlinked pack dir), build it. Two stats per start;
-- a read-only plugin dir is left alone (`:helptags` then by hand).
do
  local here = debug.getinfo(1, 'S').source:sub(2)
  local doc = vim.fs.joinpath(vim.fs.dirname(vim.fs.dirname(vim.fn.fnamemodify(here, ':p'))), 'doc')
  local txt, tags = vim.uv.fs_stat(doc .. '/fabric.txt'), vim.uv.fs_stat(doc .. '/tags')
  if txt and (not tags or tags.mtime.sec < txt.mtime.sec) and vim.uv.fs_access(doc, 'W') then
    pcall(vim.cmd.helptags, vim.fn.fnameescape(doc))
  end
end

vim.api.nvim_create_user_command('Fabric', function(cmd)
  require('fabric.commands').run(cmd)
end, {
  nargs = '*',
  bang = true,
  range = true,
  desc = 'Fabric: recall, expand, preview, compact, status, cancel, sessions, history, branchsummary, reload, log',
  complete = function(arglead, cmdline, pos)
    return require('fabric.commands').complete(arglead, cmdline, pos)
  end,
})

-- <Plug> mappings to bind your own keys to (:help fabric-mappings); the plugin maps no key
-- of its own except the buffer-local `gd` (option keymaps).
for lhs, rhs in pairs({
  ['<Plug>(fabric-recall)'] = { '<Cmd>Fabric recall<CR>', 'Fabric: recall (asks for the query)' },
  ['<Plug>(fabric-recall-word)'] = {
    function()
      require('fabric.commands').run({ args = 'recall ' .. vim.fn.expand('<cword>'), bang = false, range = 0 })
    end,
    'Fabric: recall the word under the cursor',
  },
  ['<Plug>(fabric-expand)'] = { '<Cmd>Fabric expand<CR>', 'Fabric: expand the entry under the cursor' },
  ['<Plug>(fabric-preview)'] = { '<Cmd>Fabric preview<CR>', 'Fabric: compaction preview of this session' },
  ['<Plug>(fabric-compact)'] = { '<Cmd>Fabric compact<CR>', 'Fabric: request a compaction (asks first)' },
  ['<Plug>(fabric-history)'] = { '<Cmd>Fabric history<CR>', "Fabric: Pi's history of this file" },
  ['<Plug>(fabric-sessions)'] = { '<Cmd>Fabric sessions<CR>', "Fabric: the project's sessions" },
  ['<Plug>(fabric-codelens)'] = {
    function()
      vim.lsp.codelens.run()
    end,
    'Fabric: run the CodeLens of this line (file history)',
  },
}) do
  vim.keymap.set('n', lhs, rhs[1], { desc = rhs[2], silent = true })
end

-- The server's file-history CodeLens (vim.lsp.codelens.run()) runs this client-side.
vim.lsp.commands['fabric.fileHistory'] = function(command)
  local arg = command.arguments and command.arguments[1]
  if type(arg) == 'table' and type(arg.path) == 'string' then
    require('fabric.commands').history(arg.path, false)
  end
end

local group = vim.api.nvim_create_augroup('fabric', { clear = true })

vim.api.nvim_create_autocmd('LspProgress', {
  group = group,
  desc = 'Fabric: show the server progress',
  callback = function(ev)
    require('fabric.progress').on_progress(ev)
  end,
})

local function map_gd(buf)
  if require('fabric.config').get().keymaps then
    vim.keymap.set('n', 'gd', function()
      require('fabric.buffers').goto_definition()
    end, { buffer = buf, desc = 'Fabric: go to the entry reference under the cursor' })
  end
end

vim.api.nvim_create_autocmd('LspAttach', {
  group = group,
  desc = 'Fabric: gd on entry references',
  callback = function(ev)
    local client = vim.lsp.get_client_by_id(ev.data.client_id)
    if client and client.name == 'fabric' then
      map_gd(ev.buf)
      -- The statusline's session part (pending compaction, last commit, live Pi).
      require('fabric.statusline').refresh(ev.buf)
      -- File-history lenses on source files (option code_lens): fetched on attach, on
      -- entering the buffer and after a write.
      if require('fabric.lsp').lens_buffer(ev.buf) and client:supports_method('textDocument/codeLens') then
        vim.lsp.codelens.refresh({ bufnr = ev.buf })
        vim.api.nvim_create_autocmd({ 'BufEnter', 'BufWritePost' }, {
          group = group,
          buffer = ev.buf,
          callback = function(e)
            vim.lsp.codelens.refresh({ bufnr = e.buf })
          end,
        })
      end
    end
  end,
})

-- A team recall item in the quickfix list names fabric://team/<member>/<session>/<entry>:
-- jumping there (or :edit) shows its stored entry from the team database.
vim.api.nvim_create_autocmd('BufReadCmd', {
  group = group,
  pattern = 'fabric://team/*',
  desc = 'Fabric: the stored entry of a team recall item',
  callback = function(ev)
    require('fabric.team').read(ev.buf)
  end,
})

-- The client attaches only to session JSONL and fabric:// buffers; in notes (markdown) `gd`
-- on a reference still jumps, through fabric/expand (the server starts on first use).
vim.api.nvim_create_autocmd('FileType', {
  group = group,
  pattern = 'markdown',
  desc = 'Fabric: gd on entry references in notes',
  callback = function(ev)
    map_gd(ev.buf)
  end,
})

if require('fabric.config').get().autostart then
  vim.lsp.enable('fabric')
end
