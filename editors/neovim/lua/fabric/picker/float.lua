-- The plugin's own list: a floating window with one line per item and the matched terms
-- highlighted (extmarks in the `fabric_match` namespace, group FabricMatch). Used when
-- vim.ui.select is Neovim's stock one, which cannot highlight (option `picker`).
-- Keys: <CR> (or a double click) chooses, j/k (<Down>/<Up>, <C-n>/<C-p>) move and wrap
-- around, q / <Esc> / <C-c> close; leaving the window closes it too. With a live source,
-- `/` (or `i`) opens a search prompt above the list (see open_prompt below).
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

---Show `spec` (fabric.picker) in a float. Returns the window and buffer. Sets
---`spec.update(items, prompt?)` (redraw the open list) and `spec.current_query()`.
---@param spec table
---@return integer win, integer buf
function M.pick(spec)
  -- Lines fit the editor (the float is at most 4 columns narrower), up to 160 cells.
  local room = math.max(20, math.min(vim.o.columns - 6, 160))
  local lines, spans = render(spec, spec.items, room)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].swapfile = false
  fill(buf, lines, spans)
  vim.b[buf].fabric_picker = spec.kind or true

  local footer = spec.live and ' <CR> open · j/k move · / search · q close ' or ' <CR> open · j/k move · q close '
  local widest = vim.fn.strdisplaywidth(footer)
  for _, l in ipairs(lines) do
    widest = math.max(widest, vim.fn.strdisplaywidth(l))
  end
  local width = math.max(20, math.min(widest + 1, vim.o.columns - 4))
  local height = math.max(1, math.min(#lines, vim.o.lines - vim.o.cmdheight - 6))
  local cfg = {
    relative = 'editor',
    -- (a live list keeps three rows above it for its search prompt)
    row = math.max(spec.live and 3 or 0, math.floor((vim.o.lines - vim.o.cmdheight - height) / 2) - 1),
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
    -- (the list keeps its row: more rows than fit below it would make Neovim move it up,
    -- under its search prompt)
    local room_below = vim.o.lines - vim.o.cmdheight - cfg.row - 3
    local win_cfg = { height = math.max(1, math.min(#new_lines, vim.o.lines - vim.o.cmdheight - 6, room_below)) }
    if cfg.title and prompt then
      win_cfg.title = ' ' .. clip(prompt, width - 4) .. ' '
      win_cfg.title_pos = 'center'
    end
    vim.api.nvim_win_set_config(win, win_cfg)
    vim.api.nvim_win_set_cursor(win, { row, 0 })
  end
  local prompt_win ---@type integer?
  local function finish(item)
    if closed then
      return
    end
    closed = true
    if prompt_win and vim.api.nvim_win_is_valid(prompt_win) then
      pcall(vim.api.nvim_win_close, prompt_win, true)
    end
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
  -- Search as you type (a live source: `spec.live.search`): `/` opens a one-line prompt
  -- above the list holding the query; every change searches again (after a short pause, the
  -- newest answer wins) and redraws the list in place. <CR> opens the row under the list's
  -- cursor, <Down>/<Up> (<C-n>/<C-p>) move it, <Esc> goes back to the list, <C-c> closes.
  local text = spec.live and spec.live.query or ''
  ---The search text the list shows the answer of (what was typed last).
  function spec.current_query()
    return text
  end
  local function open_prompt()
    if closed or (prompt_win and vim.api.nvim_win_is_valid(prompt_win)) then
      return
    end
    local pbuf = vim.api.nvim_create_buf(false, true)
    vim.bo[pbuf].bufhidden = 'wipe'
    vim.bo[pbuf].swapfile = false
    vim.b[pbuf].fabric_picker_prompt = spec.kind or true
    vim.api.nvim_buf_set_lines(pbuf, 0, -1, false, { text })
    local pcfg = { relative = 'editor', row = cfg.row - 3, col = cfg.col, width = width, height = 1, style = 'minimal' }
    if cfg.border then
      pcfg.border = cfg.border
    end
    if wb ~= 'none' then
      pcfg.title = ' search as you type '
      pcfg.title_pos = 'left'
    end
    prompt_win = vim.api.nvim_open_win(pbuf, true, pcfg)
    local seq = 0
    vim.api.nvim_buf_attach(pbuf, false, {
      on_lines = function()
        seq = seq + 1
        local mine = seq
        vim.defer_fn(function()
          if closed or mine ~= seq or not vim.api.nvim_buf_is_valid(pbuf) then
            return
          end
          text = vim.api.nvim_buf_get_lines(pbuf, 0, 1, false)[1] or ''
          spec.live.search(text, function(items, title)
            if closed or mine ~= seq then
              return
            end
            spec.update(items, title or ('Fabric: %q, %d row%s'):format(text, #items, #items == 1 and '' or 's'))
          end)
        end, 150)
      end,
    })
    local function back()
      vim.cmd('stopinsert')
      if vim.api.nvim_win_is_valid(win) then
        vim.api.nvim_set_current_win(win)
      end
      if prompt_win and vim.api.nvim_win_is_valid(prompt_win) then
        pcall(vim.api.nvim_win_close, prompt_win, true)
      end
      prompt_win = nil
    end
    local function pmap(modes, keys, fn, desc)
      for _, lhs in ipairs(keys) do
        vim.keymap.set(modes, lhs, fn, { buffer = pbuf, nowait = true, silent = true, desc = 'Fabric search: ' .. desc })
      end
    end
    pmap({ 'i', 'n' }, { '<CR>' }, function()
      vim.cmd('stopinsert')
      local item = spec.items[vim.api.nvim_win_get_cursor(win)[1]]
      if item then
        finish(item)
      end
    end, 'open the row under the cursor')
    pmap({ 'i', 'n' }, { '<Down>', '<C-n>' }, function()
      move(1)
    end, 'next row')
    pmap({ 'i', 'n' }, { '<Up>', '<C-p>' }, function()
      move(-1)
    end, 'previous row')
    pmap({ 'i', 'n' }, { '<Esc>' }, back, 'back to the list')
    pmap({ 'i', 'n' }, { '<C-c>' }, function()
      vim.cmd('stopinsert')
      finish(nil)
    end, 'close')
    -- Leaving the prompt for anything but the list closes both.
    vim.api.nvim_create_autocmd('WinLeave', {
      buffer = pbuf,
      once = true,
      callback = function()
        vim.schedule(function()
          if vim.api.nvim_get_current_win() ~= win then
            finish(nil)
          end
        end)
      end,
    })
    vim.cmd('startinsert!')
  end
  if spec.live then
    map({ '/', 'i' }, open_prompt, 'search again as you type')
  end

  -- Leaving the window (another window, a command that closes it) dismisses the list; after
  -- the autocommand, where closing windows is allowed. Its own search prompt is not away.
  vim.api.nvim_create_autocmd('WinLeave', {
    buffer = buf,
    callback = function()
      vim.schedule(function()
        if not (prompt_win and vim.api.nvim_get_current_win() == prompt_win) then
          finish(nil)
        end
      end)
      return closed
    end,
  })
  vim.api.nvim_create_autocmd('BufWipeout', {
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
