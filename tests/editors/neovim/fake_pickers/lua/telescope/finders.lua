-- Test double (see pickers.lua): finders.new_table({results, entry_maker}).
local M = {}
function M.new_table(t)
  assert(type(t.results) == 'table' and type(t.entry_maker) == 'function', 'fake telescope: new_table{results, entry_maker}')
  return { results = t.results, entry_maker = t.entry_maker }
end
return M
