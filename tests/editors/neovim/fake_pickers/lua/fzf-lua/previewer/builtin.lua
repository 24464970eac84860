-- Test double (see ../init.lua): builtin.base, a class with :extend() (`super` is the parent)
-- whose instances are made by calling the class; base:new(o, opts, fzf_win) sets self.win
-- and self.opts; get_tmp_buffer() gives a scratch buffer; set_preview_buf(buf) shows it
-- (recorded as self.preview_bufnr).
local log = require('fake_pickers')

local Class = {}
Class.__index = Class

function Class:extend()
  local cls = {}
  for k, v in pairs(self) do
    if type(k) == 'string' and k:find('__') == 1 then
      cls[k] = v
    end
  end
  cls.__index = cls
  cls.super = self
  return setmetatable(cls, self)
end

function Class:__call(...)
  local obj = setmetatable({}, self)
  return obj:new(...) or obj
end

local base = Class:extend()

function base:new(o, opts, fzf_win)
  self.o, self.opts, self.win = o, opts, fzf_win
  return self
end

function base:get_tmp_buffer()
  return log.scratch()
end

function base:set_preview_buf(buf)
  self.preview_bufnr = buf
end

return { base = base }
