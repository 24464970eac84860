-- Test double (see pickers.lua): previewers.new_buffer_previewer({title, define_preview}).
local M = {}
function M.new_buffer_previewer(o)
  assert(type(o.define_preview) == 'function', 'fake telescope: new_buffer_previewer{define_preview}')
  return { title = o.title, define_preview = o.define_preview, state = {} }
end
return M
