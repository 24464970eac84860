-- fzf-lua for fabric.picker specs: fzf_exec over "<index>\t<line>" lines (the index hidden
-- with --with-nth), the matched terms coloured with ANSI codes taken from FabricMatch, and
-- a builtin previewer (a subclass of fzf-lua.previewer.builtin's base) that shows the
-- expanded entry with its matches highlighted. <CR> ('default' action) chooses.
-- Written against fzf-lua's documented API (the "Advanced" wiki: fzf_exec(contents, opts)
-- with prompt / actions / fzf_opts / previewer / winopts.on_close, and custom previewers
-- extending builtin.base with populate_preview_buf, get_tmp_buffer, set_preview_buf).
local match = require('fabric.match')

local M = {}

local function fzf()
  local ok, mod = pcall(require, 'fzf-lua')
  if ok and type(mod) == 'table' and type(mod.fzf_exec) == 'function' then
    return mod
  end
end

function M.available()
  return fzf() ~= nil
end

local function rgb(n)
  return ('%d;%d;%d'):format(math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256)
end

---The ANSI escape that starts text in highlight group `group` (true colour; reverse video
---when the group has no colour).
---@param group string
---@return string
function M.ansi_start(group)
  local hl = vim.api.nvim_get_hl(0, { name = group, link = false })
  local codes = {}
  if hl.bold then
    codes[#codes + 1] = '1'
  end
  if hl.fg then
    codes[#codes + 1] = '38;2;' .. rgb(hl.fg)
  end
  if hl.bg then
    codes[#codes + 1] = '48;2;' .. rgb(hl.bg)
  end
  if #codes == 0 or (not hl.fg and not hl.bg) then
    codes[#codes + 1] = '7'
  end
  return '\27[' .. table.concat(codes, ';') .. 'm'
end

M.ansi_reset = '\27[0m'

---`line` with the spans wrapped in FabricMatch's ANSI colour.
---@param line string
---@param spans integer[][]
---@return string
function M.colour(line, spans)
  if not spans or #spans == 0 then
    return line
  end
  local start, out, at = M.ansi_start('FabricMatch'), {}, 0
  for _, s in ipairs(spans) do
    out[#out + 1] = line:sub(at + 1, s[1])
    out[#out + 1] = start .. line:sub(s[1] + 1, s[2]) .. M.ansi_reset
    at = s[2]
  end
  out[#out + 1] = line:sub(at + 1)
  return table.concat(out)
end

---The item index at the start of an fzf line ("<index>\t…"), or nil.
---@param line string?
---@return integer?
function M.index(line)
  return tonumber(type(line) == 'string' and line:match('^%s*(%d+)\t') or nil)
end

local function previewer_class(spec, current)
  local builtin = require('fzf-lua.previewer.builtin')
  local Previewer = builtin.base:extend()

  function Previewer:new(o, opts, fzf_win)
    Previewer.super.new(self, o, opts, fzf_win)
    setmetatable(self, Previewer)
    return self
  end

  function Previewer:populate_preview_buf(entry_str)
    local item = current()[M.index(entry_str)]
    if not item then
      return
    end
    self.fabric_entry = entry_str
    spec.preview(item, function(lines, spans, title)
      -- The cursor may have moved on, or fzf closed, while the server answered.
      if self.fabric_entry ~= entry_str then
        return
      end
      if type(self.win.validate_preview) == 'function' and not self.win:validate_preview() then
        return
      end
      local buf = self:get_tmp_buffer()
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
      vim.bo[buf].syntax = 'markdown'
      match.apply(buf, spans)
      self:set_preview_buf(buf)
      if title and type(self.win.update_preview_title) == 'function' then
        self.win:update_preview_title(' ' .. title .. ' ')
      end
    end)
  end

  return Previewer
end

---fzf lines ("<index>\t<coloured line>") of fabric.picker items.
local function fzf_lines(spec, list)
  local lines = {}
  for i, item in ipairs(list) do
    local line, spans = spec.display(item, require('fabric.picker').list_width())
    lines[i] = ('%d\t%s'):format(i, M.colour((tostring(line):gsub('[\t\r\n]', ' ')), spans))
  end
  return lines
end

---@param spec table fabric.picker spec
function M.pick(spec)
  local fzf_lua = assert(fzf(), 'fzf-lua is not installed')
  -- The items the lines on screen index (live: those of the latest search).
  local items = spec.items
  local function current()
    return items
  end
  local contents, run = fzf_lines(spec, spec.items), fzf_lua.fzf_exec
  if spec.live then
    -- Live: fzf_live runs `contents` with the query on every change (fzf-lua passes it as
    -- args[1]; older versions as a string); the lines come from the server's answer.
    local cache = { [spec.live.query] = spec.items }
    run = fzf_lua.fzf_live
    contents = function(args)
      local query = type(args) == 'table' and (args[1] or '') or tostring(args or '')
      if cache[query] then
        items = cache[query]
        return fzf_lines(spec, items)
      end
      return function(cb)
        spec.live.search(query, function(found)
          cache[query], items = found, found
          for _, line in ipairs(fzf_lines(spec, found)) do
            cb(line)
          end
          cb(nil)
        end)
      end
    end
  end
  local chosen = false
  run(contents, {
    query = spec.live and spec.live.query or nil,
    prompt = 'Fabric> ',
    winopts = {
      title = ' ' .. (spec.prompt or 'Fabric') .. ' ',
      on_close = function()
        -- fzf-lua runs the chosen action right after closing its window.
        vim.schedule(function()
          if not chosen then
            spec.on_choice(nil)
          end
        end)
      end,
    },
    fzf_opts = { ['--ansi'] = true, ['--delimiter'] = '\t', ['--with-nth'] = '2..', ['--no-multi'] = true },
    previewer = spec.preview and previewer_class(spec, current) or nil,
    actions = {
      default = function(selected)
        local item = items[M.index(selected and selected[1])]
        chosen = true
        vim.schedule(function()
          spec.on_choice(item)
        end)
      end,
    },
  })
end

return M
