-- The plugin's own list: a floating window with one line per item and the matched terms
-- highlighted (extmarks in the `fabric_match` namespace, group FabricMatch). Used when
-- vim.ui.select is Neovim's stock one, which cannot highlight (option `picker`).
-- Keys: <CR> (or a double click) chooses, j/k (<Down>/<Up>, <C-n>/<C-p>) move and wrap
-- around, q / <Esc> / <C-c> close; leaving the window closes it too.
local match = require('fabric.match')

local M = {}

---Neovim 0.11's 'winborder' (the user's default border of floats), '' when unset.
local function winborder()
  local ok, value = pcall(function()
    return vim.o.winborder
  end)
  return ok and type(value) == 'string' and value or ''
end

local function clip(text, width)
  if vim.fn.strdisplaywidth(text) <= width then
    return text
  end
  return vim.fn.strcharpart(text, 0, math.max(1, width - 1)) .. '…'
end

---Show `spec` (fabric.picker) in a float. Returns the window and buffer.
---@param spec table
---@return integer win, integer buf
---The lines of `items` and their match spans, for lines of `room` cells.
local function render(spec, items, room)
  local lines, spans = {}, {}
  for i, item in ipairs(items) do
    local line, s = spec.display(item, room)
    lines[i] = (tostring(line):gsub('[\r\n]', ' '))
    spans[i] = s or {}
  end
  return lines, spans
end

---Write `lines` into the list buffer and highlight `spans`.
local function fill(buf, lines, spans)
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.api.nvim_buf_clear_namespace(buf, match.ns, 0, -1)
  for i, list in ipairs(spans) do
    for _, s in ipairs(list) do
      vim.api.nvim_buf_set_extmark(buf, match.ns, i - 1, s[1], { end_col = s[2], hl_group = 'FabricMatch' })
    end
  end
end

function M.pick(spec)
  -- Lines fit the editor (the float is at most 4 columns narrower), up to 160 cells.
  local room = math.max(20, math.min(vim.o.columns - 6, 160))
  local lines, spans = render(spec, spec.items, room)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].swapfile = false
  fill(buf, lines, spans)
  vim.b[buf].fabric_picker = spec.kind or true

  local footer = ' <CR> open · j/k move · q close '
  local widest = vim.fn.strdisplaywidth(footer)
  for _, l in ipairs(lines) do
    widest = math.max(widest, vim.fn.strdisplaywidth(l))
  end
  local width = math.max(20, math.min(widest + 1, vim.o.columns - 4))
  local height = math.max(1, math.min(#lines, vim.o.lines - vim.o.cmdheight - 6))
  local cfg = {
    relative = 'editor',
    row = math.max(0, math.floor((vim.o.lines - vim.o.cmdheight - height) / 2) - 1),
    col = math.max(0, math.floor((vim.o.columns - width) / 2)),
    width = width,
    height = height,
    style = 'minimal',
  }
  local wb = winborder()
  if wb == '' then
    cfg.border = 'rounded'
  end
  if wb ~= 'none' then
    -- A title and footer need a border.
    cfg.title = ' ' .. clip(spec.prompt or 'Fabric', width - 4) .. ' '
    cfg.title_pos = 'center'
    cfg.footer = footer
    cfg.footer_pos = 'right'
  end
  local win = vim.api.nvim_open_win(buf, true, cfg)
  vim.wo[win].cursorline = true
  vim.wo[win].wrap = false
  vim.wo[win].winhighlight = 'CursorLine:PmenuSel'
  vim.api.nvim_win_set_cursor(win, { 1, 0 })

  local closed = false
  ---Show other items (and title) in the open list: the cursor stays on its row where it can.
  function spec.update(items, prompt)
    if closed or not vim.api.nvim_win_is_valid(win) then
      return
    end
    spec.items = items
    local new_lines, new_spans = render(spec, items, room)
    fill(buf, new_lines, new_spans)
    local row = math.min(vim.api.nvim_win_get_cursor(win)[1], math.max(1, #new_lines))
    local win_cfg = { height = math.max(1, math.min(#new_lines, vim.o.lines - vim.o.cmdheight - 6)) }
    if cfg.title and prompt then
      win_cfg.title = ' ' .. clip(prompt, width - 4) .. ' '
      win_cfg.title_pos = 'center'
    end
    vim.api.nvim_win_set_config(win, win_cfg)
    vim.api.nvim_win_set_cursor(win, { row, 0 })
  end
  local function finish(item)
    if closed then
      return
    end
    closed = true
    if vim.api.nvim_win_is_valid(win) then
      pcall(vim.api.nvim_win_close, win, true)
    end
    vim.schedule(function()
      spec.on_choice(item)
    end)
  end
  local function move(delta)
    local n = vim.api.nvim_buf_line_count(buf)
    local row = vim.api.nvim_win_get_cursor(win)[1] - 1
    vim.api.nvim_win_set_cursor(win, { (row + delta) % n + 1, 0 })
  end
  local function map(keys, fn, desc)
    for _, lhs in ipairs(keys) do
      vim.keymap.set('n', lhs, fn, { buffer = buf, nowait = true, silent = true, desc = 'Fabric picker: ' .. desc })
    end
  end
  map({ '<CR>', '<2-LeftMouse>' }, function()
    finish(spec.items[vim.api.nvim_win_get_cursor(win)[1]])
  end, 'open the item')
  map({ 'q', '<Esc>', '<C-c>' }, function()
    finish(nil)
  end, 'close')
  map({ 'j', '<Down>', '<C-n>' }, function()
    move(vim.v.count1)
  end, 'next item')
  map({ 'k', '<Up>', '<C-p>' }, function()
    move(-vim.v.count1)
  end, 'previous item')
  -- Leaving the window (another window, a command that closes it) dismisses the list; after
  -- the autocommand, where closing windows is allowed.
  vim.api.nvim_create_autocmd({ 'WinLeave', 'BufWipeout' }, {
    buffer = buf,
    once = true,
    callback = function()
      vim.schedule(function()
        finish(nil)
      end)
    end,
  })
  return win, buf
end

return M
