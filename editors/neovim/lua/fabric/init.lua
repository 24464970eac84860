-- Public Lua API of the Fabric plugin. Nothing here must be called for the plugin to work:
-- plugin/fabric.lua defines :Fabric and enables the server; options come from vim.g.fabric.
local M = {}

---Optional: set options (same as assigning vim.g.fabric) and enable the server.
---@param opts? table see :help fabric-options
function M.setup(opts)
  if opts then
    vim.g.fabric = vim.tbl_deep_extend('force', vim.g.fabric or {}, opts)
  end
  vim.lsp.enable('fabric')
end

---One line for a statusline: the server's work-done progress, and for the session of the
---current buffer its pending compaction, last commit and the live Pi holding it ('' when
---there is nothing to say): `set statusline+=%{v:lua.require'fabric'.status()}`
---@return string
function M.status()
  local parts = {}
  local progress = require('fabric.progress').status()
  if progress ~= '' then
    parts[#parts + 1] = progress
  end
  local session = require('fabric.statusline').line(0)
  if session ~= '' then
    parts[#parts + 1] = session
  end
  return table.concat(parts, ' | ')
end

---Run a subcommand as if typed: require('fabric').run('recall', 'query').
---@param subcommand string
---@param args? string
---@param bang? boolean
function M.run(subcommand, args, bang)
  require('fabric.commands').run({
    args = subcommand .. ' ' .. (args or ''),
    bang = bang or false,
    range = 0,
    line1 = vim.fn.line('.'),
    line2 = vim.fn.line('.'),
  })
end

---The running fabric client, if any.
---@return vim.lsp.Client?
function M.client()
  return require('fabric.lsp').get_client(0)
end

return M
