-- snacks.nvim's picker (Snacks.picker.pick) for fabric.picker specs: one item per entry,
-- the line in chunks with the matched terms in FabricMatch, and a preview of the expanded
-- entry (fetched from the server when the item is first shown) with its matches highlighted.
-- Written against snacks' documented API (docs/picker.md: items, format, preview, confirm,
-- on_close; the preview context's preview:set_lines / set_title / highlight and ctx.buf).
local match = require('fabric.match')

local M = {}

local function snacks()
  local ok, mod = pcall(require, 'snacks')
  if ok and type(mod) == 'table' and type(mod.picker) == 'table' and type(mod.picker.pick) == 'function' then
    return mod
  end
end

function M.available()
  return snacks() ~= nil
end

---The line of `item` as snacks text chunks {text, hl_group?}: FabricMatch on the spans.
---@param line string
---@param spans integer[][]
---@return table[]
function M.chunks(line, spans)
  local out, at = {}, 0
  for _, s in ipairs(spans or {}) do
    if s[1] > at then
      out[#out + 1] = { line:sub(at + 1, s[1]) }
    end
    out[#out + 1] = { line:sub(s[1] + 1, s[2]), 'FabricMatch' }
    at = s[2]
  end
  if at < #line then
    out[#out + 1] = { line:sub(at + 1) }
  end
  return out
end

---snacks items of fabric.picker items.
local function snacks_items(spec, list)
  local items = {}
  for i, item in ipairs(list) do
    local line, spans = spec.display(item, require('fabric.picker').list_width())
    items[i] = { idx = i, text = line, fabric = { item = item, line = line, spans = spans or {} } }
  end
  return items
end

---A live finder (snacks `live = true`: the finder runs again with `ctx.filter.search`
---whenever the search text changes): `spec.live.search` asks the server, the coroutine
---waits on `ctx.async` until the answer is there. Answers are kept per search text.
local function live_finder(spec)
  local cache = { [spec.live.query] = spec.items }
  return function(_, ctx)
    local search = ctx.filter and ctx.filter.search or ''
    return function(emit)
      local list = cache[search]
      if not list then
        local done = false
        spec.live.search(search, function(found)
          list, done = found, true
          cache[search] = found
          ctx.async:resume()
        end)
        while not done do
          ctx.async:suspend()
        end
      end
      for _, it in ipairs(snacks_items(spec, list)) do
        emit(it)
      end
    end
  end
end

---@param spec table fabric.picker spec
function M.pick(spec)
  local Snacks = assert(snacks(), 'snacks.picker is not installed')
  local chosen = false
  Snacks.picker.pick({
    source = 'fabric',
    title = spec.prompt,
    -- live: the search text re-queries the server (spec.live); else the fixed list
    items = not spec.live and snacks_items(spec, spec.items) or nil,
    live = spec.live and true or nil,
    search = spec.live and spec.live.query or nil,
    finder = spec.live and live_finder(spec) or nil,
    format = function(it)
      return M.chunks(it.fabric.line, it.fabric.spans)
    end,
    preview = function(ctx)
      local it = ctx.item
      if not spec.preview then
        ctx.preview:set_lines({ it.fabric.line })
        return
      end
      ctx.preview:reset()
      ctx.preview:set_lines({ 'Loading the expanded entry…' })
      spec.preview(it.fabric.item, function(lines, spans, title)
        -- The cursor may have moved on while the server answered.
        if ctx.preview.item ~= it then
          return
        end
        ctx.preview:set_lines(lines)
        if title then
          ctx.preview:set_title(title)
        end
        ctx.preview:highlight({ ft = 'markdown' })
        local buf = ctx.buf
        if buf and vim.api.nvim_buf_is_valid(buf) then
          match.apply(buf, spans)
        end
      end)
    end,
    confirm = function(picker, it)
      chosen = true
      picker:close()
      vim.schedule(function()
        spec.on_choice(it and it.fabric.item or nil)
      end)
    end,
    on_close = function()
      -- Cancelled (confirm sets `chosen` before it closes the picker).
      if not chosen then
        vim.schedule(function()
          spec.on_choice(nil)
        end)
      end
    end,
  })
end

return M
