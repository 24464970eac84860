-- Shared record of the test doubles under fake_pickers/lua (snacks, telescope, fzf-lua).
--
-- These are NOT the real picker plugins: GitHub, where they are published, cannot be
-- reached from the machines these tests run on, and no package registry here carries them.
-- Each double implements only the API surface that editors/neovim/lua/fabric/picker/*.lua
-- calls, shaped after the plugins' documentation, renders what the adapter gives it the way
-- the real plugin would (lines, highlight ranges, preview buffer), and records it here so a
-- spec can check it and drive the picker (move to an item, accept, cancel).
local M = {}

---The last picker session each double opened, by plugin name.
M.last = {}

function M.reset()
  M.last = {}
end

---A scratch buffer for a double's results or preview.
function M.scratch()
  local buf = vim.api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = 'hide'
  return buf
end

return M
