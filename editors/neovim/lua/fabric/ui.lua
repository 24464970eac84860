-- Scratch buffers, messages and the completion event shared by the subcommands.
local config = require('fabric.config')

local M = {}

---Whether `fn` is Neovim's own vim.notify (runtime/lua/vim/_editor.lua), which echoes: a
---message wider than the echo area, or of several lines, then asks "Press ENTER".
---@param fn any
---@return boolean
function M.is_stock_notify(fn)
  if type(fn) ~= 'function' then
    return false
  end
  local source = debug.getinfo(fn, 'S').source or ''
  return source:match('[/\\]lua[/\\]vim[/\\]_editor%.lua$') ~= nil or source == '@vim/_editor.lua'
end

-- The float of the last long message (closed by the next one).
M.message_win = nil

---Paths under $HOME as ~/… (messages name files; the full path rarely helps).
---@param msg string
---@return string
function M.shorten(msg)
  local home = vim.uv.os_homedir()
  if home and #home > 1 then
    msg = msg:gsub(vim.pesc(home) .. '/', '~/')
  end
  return msg
end

---A message to the user. With Neovim's own vim.notify, a message that would not fit the
---echo area (several lines, or wider than it) is shown whole in a float that closes when
---the cursor moves, and echoed as one line that fits: no "Press ENTER". A replaced
---vim.notify (nvim-notify, snacks, fidget, …) gets the whole message.
---@param msg string
---@param level? integer vim.log.levels.*
function M.notify(msg, level)
  msg = M.shorten(msg)
  level = level or vim.log.levels.INFO
  local room = math.max(20, vim.v.echospace - 1)
  if not M.is_stock_notify(vim.notify) or (not msg:find('\n', 1, true) and vim.fn.strdisplaywidth(msg) <= room) then
    return vim.notify(msg, level, { title = 'Fabric' })
  end
  local lines = vim.split(msg, '\n', { plain = true })
  if M.message_win and vim.api.nvim_win_is_valid(M.message_win) then
    pcall(vim.api.nvim_win_close, M.message_win, true)
  end
  local _, win = vim.lsp.util.open_floating_preview(lines, 'text', {
    focus = false,
    close_events = { 'CursorMoved', 'CursorMovedI', 'InsertEnter', 'BufLeave' },
    max_width = math.max(40, vim.o.columns - 4),
    title = ' Fabric ',
  })
  M.message_win = win
  local first = lines[1]
  local more = #lines > 1 and ' (more in the float)' or ''
  if vim.fn.strdisplaywidth(first .. more) > room then
    first = vim.fn.strcharpart(first, 0, math.max(10, room - vim.fn.strdisplaywidth(more) - 1)) .. '…'
  end
  vim.notify(first .. more, level)
end

---Fire `User FabricCommandDone` (data: {command, ok, message?}) when a subcommand finished.
---Scripts and tests wait for it; a failure is also reported with vim.notify.
---@param command string
---@param ok boolean
---@param message? string
function M.done(command, ok, message)
  if not ok and message then
    M.notify(('Fabric %s: %s'):format(command, message), vim.log.levels.ERROR)
  end
  vim.api.nvim_exec_autocmds('User', {
    pattern = 'FabricCommandDone',
    modeline = false,
    data = { command = command, ok = ok, message = message },
  })
end

---Show `buf`: in the window already showing it, else in a window showing another Fabric
---scratch buffer (so repeated commands do not pile up splits), else following `open`.
---@param buf integer
function M.show(buf)
  local reuse
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    local shown = vim.api.nvim_win_get_buf(win)
    if shown == buf then
      vim.api.nvim_set_current_win(win)
      return
    end
    if not reuse and vim.api.nvim_win_get_config(win).relative == ''
      and vim.api.nvim_buf_get_name(shown):match('^fabric://') then
      reuse = win
    end
  end
  if reuse then
    vim.api.nvim_set_current_win(reuse)
    vim.api.nvim_set_current_buf(buf)
    return
  end
  local open = config.get().open
  if open == 'current' then
    vim.api.nvim_set_current_buf(buf)
  else
    vim.cmd(open)
    vim.api.nvim_set_current_buf(buf)
  end
end

---Create or refresh the read-only scratch buffer `name` with `lines` and show it.
---@param name string a `fabric://…` buffer name
---@param lines string[]
---@param opts? {filetype?: string, vars?: table<string, any>}
---@return integer bufnr
function M.scratch(name, lines, opts)
  opts = opts or {}
  local buf = vim.fn.bufnr('^' .. vim.fn.escape(name, '\\/.*$^~[]') .. '$')
  if buf == -1 or not vim.api.nvim_buf_is_valid(buf) then
    buf = vim.api.nvim_create_buf(true, true)
    vim.api.nvim_buf_set_name(buf, name)
  end
  local bo = vim.bo[buf]
  bo.buftype = 'nofile'
  bo.bufhidden = 'hide'
  bo.swapfile = false
  bo.modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  bo.modifiable = false
  bo.modified = false
  for k, v in pairs(opts.vars or {}) do
    vim.b[buf][k] = v
  end
  if opts.filetype then
    bo.filetype = opts.filetype
    M.plain_underscores(buf)
  end
  M.show(buf)
  return buf
end

---In a Markdown scratch buffer of ours, an underscore inside a word (`test_tle.py`, a
---session file's `…914Z_01a18ac0…`) is text, not the Markdown syntax's error (Vim's
---markdown.vim marks every one red). Only Vim syntax highlighting is affected.
---@param buf integer
function M.plain_underscores(buf)
  if vim.bo[buf].filetype ~= 'markdown' then
    return
  end
  vim.api.nvim_buf_call(buf, function()
    vim.cmd([[syntax match fabricWordUnderscore /\w\@<=_\w\@=/ containedin=ALL]])
  end)
end

---Replace the text of the scratch buffer `buf` (read-only again after), wherever it is shown.
---@param buf integer
---@param lines string[]
function M.replace(buf, lines)
  local bo = vim.bo[buf]
  bo.modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  bo.modifiable = false
  bo.modified = false
end

---Split text into buffer lines (no embedded newlines; CR dropped).
---@param text string?
---@return string[]
function M.lines(text)
  local out = {}
  for line in ((text or '') .. '\n'):gmatch('(.-)\r?\n') do
    out[#out + 1] = line
  end
  return out
end

---One-line excerpt: whitespace collapsed, at most `max` characters.
---@param text string?
---@param max? integer
function M.excerpt(text, max)
  max = max or 100
  local s = (text or ''):gsub('%s+', ' '):gsub('^ ', '')
  if vim.fn.strchars(s) > max then
    s = vim.fn.strcharpart(s, 0, max - 1) .. '…'
  end
  return s
end

---One-line excerpt that shows the first occurrence of a word of `query` (case-insensitive),
---with a little context before it.
---@param text string?
---@param query string?
---@param max? integer
function M.excerpt_around(text, query, max)
  max = max or 100
  local flat = (text or ''):gsub('%s+', ' '):gsub('^ ', '')
  local lower = flat:lower()
  local at
  for word in (type(query) == 'string' and query or ''):lower():gmatch('%S+') do
    local s = lower:find(word, 1, true)
    if s and (not at or s < at) then
      at = s
    end
  end
  if not at or vim.fn.strchars(flat:sub(1, at)) < max / 2 then
    return M.excerpt(flat, max)
  end
  -- Start ~20 characters before the match, on a character boundary.
  local chars_before = vim.fn.strchars(flat:sub(1, at - 1))
  local start = math.max(0, chars_before - 20)
  return '…' .. M.excerpt(vim.fn.strcharpart(flat, start), max - 1)
end

---A timestamp from the server (epoch milliseconds or an ISO string) as ISO-8601 UTC.
---@param value any
---@return string
function M.time(value)
  if type(value) == 'number' then
    return os.date('!%Y-%m-%dT%H:%M:%SZ', math.floor(value / 1000)) --[[@as string]]
  elseif value == nil or value == vim.NIL then
    return '?'
  end
  return tostring(value)
end

---@param value any
---@return boolean
function M.present(value)
  return value ~= nil and value ~= vim.NIL
end

return M
