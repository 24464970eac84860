-- Choosing one item from a list (the results of :Fabric recall): the plugin's floating list,
-- vim.ui.select, or snacks.picker / telescope / fzf-lua when installed (option `picker`,
-- :help fabric-picker). Every backend gets the same spec:
--
--   items      the items, in order
--   display    fun(item, width?): string, spans?   the item's line and the byte spans
--              {start, end} (0-based, end exclusive) of the matched terms in it; `width`
--              is the room the backend has for a line (display cells), nil when unknown
--   preview    fun(item, cb)?  calls cb(lines, spans?, title?) once, maybe later: the preview
--              text and its matches as {row, start, end} (0-based); only pickers with a
--              preview window ask for it
--   prompt     the title;  kind  the vim.ui.select kind
--   live       {query, search}?  a live source: `search(text, cb)` answers the items for
--              another search text (cb(items), maybe later); `items` are those of
--              `query`; `cb` may take a title as its second argument. snacks, telescope
--              and fzf-lua search again as you type, the float once `/` opens its
--              prompt; vim.ui.select shows `items`
--   on_choice  fun(item?)  called once, with nil when the list is dismissed
local config = require('fabric.config')

local M = {}

-- Adapters of the optional pickers, in the order 'auto' tries them.
M.order = { 'snacks', 'telescope', 'fzf-lua' }
M.adapters = {
  snacks = 'fabric.picker.snacks',
  telescope = 'fabric.picker.telescope',
  ['fzf-lua'] = 'fabric.picker.fzf_lua',
}

---Whether `fn` is Neovim's own vim.ui.select (runtime/lua/vim/ui.lua), not a replacement
---from dressing.nvim, a picker's ui_select or a user's function.
---@param fn any
---@return boolean
function M.is_stock_select(fn)
  if type(fn) ~= 'function' then
    return false
  end
  local source = debug.getinfo(fn, 'S').source or ''
  return source:match('[/\\]lua[/\\]vim[/\\]ui%.lua$') ~= nil or source == '@vim/ui.lua'
end

---The adapter module of picker `name` when that picker is installed, else nil.
---@param name string
---@return table?
function M.adapter(name)
  local modname = M.adapters[name]
  if not modname then
    return nil
  end
  local adapter = require(modname)
  if adapter.available() then
    return adapter
  end
  return nil
end

---What the option value `choice` means now: 'float', 'select' or an installed picker's name.
---An absent picker falls back, silently, to vim.ui.select when something replaced it, else
---to the float (the stock vim.ui.select cannot highlight).
---@param choice? string
---@return string
function M.resolve(choice)
  choice = choice or config.get().picker
  if choice == 'float' or choice == 'select' then
    return choice
  end
  if choice == 'auto' then
    for _, name in ipairs(M.order) do
      if M.adapter(name) then
        return name
      end
    end
  elseif M.adapter(choice) then
    return choice
  end
  return M.is_stock_select(vim.ui.select) and 'float' or 'select'
end

local function ui_select(spec)
  vim.ui.select(spec.items, {
    prompt = spec.prompt,
    kind = spec.kind,
    format_item = function(item)
      return (spec.display(item))
    end,
  }, function(choice)
    spec.on_choice(choice)
  end)
end

-- A picker that failed is reported once per session.
local failed = {}

---The room for a line in the list window of snacks, telescope and fzf-lua, whose default
---layouts give the list about half of the editor's width (the preview takes the rest).
---@return integer
function M.list_width()
  return math.max(40, math.floor(vim.o.columns / 2) - 4)
end

---Show `spec` (see the top of this file) with the configured picker.
---@param spec table
---@return string backend the backend used ('float', 'select', 'snacks', 'telescope', 'fzf-lua')
---@return table shown the spec as shown; the float sets `shown.update(items, prompt)`, which
---redraws the open list with other items (fabric.stale: a partial answer made complete)
function M.pick(spec)
  local on_choice, settled = spec.on_choice, false
  spec = vim.tbl_extend('force', {}, spec, {
    on_choice = function(item)
      if not settled then
        settled = true
        on_choice(item)
      end
    end,
  })
  local backend = M.resolve()
  if backend ~= 'float' and backend ~= 'select' then
    local ok, err = pcall(M.adapter(backend).pick, spec)
    if ok then
      return backend, spec
    end
    if not failed[backend] then
      failed[backend] = true
      vim.notify(('fabric: the %s picker failed (%s); using %s'):format(
        backend, tostring(err), M.is_stock_select(vim.ui.select) and 'the float' or 'vim.ui.select'),
        vim.log.levels.WARN)
    end
    backend = M.is_stock_select(vim.ui.select) and 'float' or 'select'
  end
  if backend == 'float' then
    require('fabric.picker.float').pick(spec)
  else
    ui_select(spec)
  end
  return backend, spec
end

return M
