-- Test double (see pickers.lua): actions.state.get_selected_entry().
local M = {}
function M.get_selected_entry()
  local picker = require('telescope.pickers').current
  return picker and picker.entries[picker.selection] or nil
end
return M
