-- Options of the Fabric plugin: built-in defaults overlaid by `vim.g.fabric`.
-- Read on every use (never cached), so changing `vim.g.fabric` takes effect on the next
-- command or the next server start.
local M = {}

---@class fabric.Options
M.defaults = {
  -- The language server command. `fabric-lsp` (no arguments) is the stdio server.
  cmd = { 'fabric-lsp' },
  -- Buffers the server attaches to: session JSONL files and documents with entry references.
  filetypes = { 'jsonl', 'markdown' },
  -- Root markers for the workspace folder; the current directory when none is found.
  root_markers = { '.git' },
  -- Server settings (protocol.md "Configuration"): agentDir, sessionDir, indexDir, trusted,
  -- memory = {...}, compaction = {...}. Sent as initializationOptions and as the
  -- workspace/configuration section "fabric".
  settings = {},
  -- plugin/fabric.lua calls vim.lsp.enable('fabric') unless this is false.
  autostart = true,
  -- Buffer-local `gd` on entry references (falls back to the built-in `gd` elsewhere).
  keymaps = true,
  -- Where work-done progress goes: 'echo' (echo area), 'notify', or 'none'.
  -- require('fabric').status() always returns it for a statusline.
  progress = 'echo',
  recall = {
    -- 'auto': the current session JSONL buffer when there is one, else 'project'.
    -- Any protocol scope works: 'session', 'project', 'global', 'session:<id-or-path>'.
    scope = 'auto',
    page_size = 25,
    -- What choosing a picker item opens: 'expand' (scratch buffer) or 'jsonl' (the file at its line).
    open = 'expand',
  },
  -- Extra fabric/compactionPreview params for :Fabric preview (protocol.md), e.g.
  -- { contextWindow = 1000000, keepRecentTokens = 8000, reserveTokens = 16384,
  --   targetContextRatio = 0.5, includeQa = true }.
  preview = {},
  -- How scratch buffers are shown: an Ex command that opens a window ('split', 'vsplit', 'tabnew')
  -- or 'current' to replace the current window's buffer.
  open = 'split',
  -- Milliseconds before a request is given up (and cancelled on the server).
  timeout_ms = 60000,
}

---@return fabric.Options
function M.get()
  local user = vim.g.fabric
  if type(user) ~= 'table' then
    user = {}
  end
  local opts = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), user)
  -- Lists replace, never merge index-wise.
  for _, key in ipairs({ 'cmd', 'filetypes', 'root_markers' }) do
    if user[key] ~= nil then
      opts[key] = user[key]
    end
  end
  if type(opts.cmd) == 'string' then
    opts.cmd = { opts.cmd }
  end
  return opts
end

return M
