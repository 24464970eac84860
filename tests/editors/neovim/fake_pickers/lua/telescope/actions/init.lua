-- Test double (see pickers.lua): actions.select_default and actions.close, callable, with
-- :replace(fn) and :enhance({pre, post}) valid until the next pickers.new (telescope clears
-- them there), run as pre → replacement or original → post.
local M = {}

local function action(name, original)
  local a = { name = name, original = original }
  function a:replace(fn)
    self.replacement = fn
    return self
  end
  function a:enhance(o)
    self.pre, self.post = o.pre or self.pre, o.post or self.post
    return self
  end
  return setmetatable(a, {
    __call = function(self, ...)
      if self.pre then
        self.pre(...)
      end
      local fn = self.replacement or self.original
      fn(...)
      if self.post then
        self.post(...)
      end
    end,
  })
end

M.select_default = action('select_default', function()
  error('fake telescope: select_default has no original (the adapter must replace it)')
end)
M.close = action('close', function()
  local picker = require('telescope.pickers').current
  assert(picker and not picker.closed, 'fake telescope: close with no open picker')
  picker.closed = true
end)

function M._clear()
  for _, a in ipairs({ M.select_default, M.close }) do
    a.replacement, a.pre, a.post = nil, nil, nil
  end
end

return M
