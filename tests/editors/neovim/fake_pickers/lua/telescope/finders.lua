-- Test double (see pickers.lua): finders.new_table({results, entry_maker}) and
-- finders.new_dynamic({fn, entry_maker}) (fn(prompt) -> results, run on every prompt change).
local M = {}
function M.new_table(t)
  assert(type(t.results) == 'table' and type(t.entry_maker) == 'function', 'fake telescope: new_table{results, entry_maker}')
  return { results = t.results, entry_maker = t.entry_maker }
end
function M.new_dynamic(t)
  assert(type(t.fn) == 'function' and type(t.entry_maker) == 'function', 'fake telescope: new_dynamic{fn, entry_maker}')
  return { fn = t.fn, entry_maker = t.entry_maker, dynamic = true }
end
return M
