-- vim.lsp.Config for the fabric-lsp server (Neovim 0.11+):
--
--   vim.lsp.enable('fabric')                                  -- plugin/fabric.lua does this by default
--   vim.lsp.config('fabric', { settings = { fabric = { agentDir = '~/.pi/agent' } } })
--
-- Options also come from `vim.g.fabric` (see `:help fabric-options`); values given through
-- vim.lsp.config() win over vim.g.fabric.
local opts = require('fabric.config').get()
local lsp = require('fabric.lsp')

---@type vim.lsp.Config
return {
  -- The program as an absolute path, run in a directory of ours, never the project.
  cmd = lsp.resolve_cmd(opts.cmd),
  cmd_cwd = lsp.server_cwd(),
  -- With file-history lenses on, any filetype may attach (lsp.attachable decides: session
  -- JSONL, fabric://, and source files of projects with Pi sessions).
  filetypes = (not opts.code_lens) and opts.filetypes or nil,
  root_dir = lsp.root_dir,
  -- One server for the whole editor: it serves every session of the agent dir.
  reuse_client = lsp.reuse_client,
  -- vim.g.fabric.settings are read when the server starts (see before_init), so they can
  -- change after this file was loaded; settings given here through vim.lsp.config() win.
  settings = { fabric = {} },
  before_init = lsp.before_init,
  handlers = lsp.handlers,
}
