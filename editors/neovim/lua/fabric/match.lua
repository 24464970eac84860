-- Where a recall query matches text, snippets centred on the first match, and extmark
-- highlights of the matched terms (namespace `fabric_match`, group `FabricMatch`).
-- Literal queries follow the server's lexical rule (engine/memory/tokenize.py): terms are
-- runs of letters, digits and `_`, compared case-insensitively; a `/regex/` query is
-- applied as a Vim regex (very magic, ignore case) where it compiles.
local M = {}

M.ns = vim.api.nvim_create_namespace('fabric_match')
vim.api.nvim_set_hl(0, 'FabricMatch', { default = true, link = 'Search' })

---@param query string?
---@return string[] lowercased terms
function M.terms(query)
  local out, seen = {}, {}
  for word in (query or ''):gmatch('[%w_\128-\255]+') do
    local t = word:lower()
    if not seen[t] then
      seen[t] = true
      out[#out + 1] = t
    end
  end
  return out
end

---Byte spans {start, end} (0-based, end exclusive) of `text` (one line) that `query` matches.
---@param text string
---@param query string?
---@return integer[][]
function M.spans(text, query)
  local spans = {}
  if type(query) ~= 'string' or query == '' then
    return spans
  end
  local pattern = query:match('^/(.+)/$')
  if pattern then
    local ok, re = pcall(vim.regex, '\\v\\c' .. pattern)
    if not ok then
      return spans
    end
    local from = 0
    while from < #text do
      local s, e = re:match_str(text:sub(from + 1))
      if not s or e == s then
        break
      end
      spans[#spans + 1] = { from + s, from + e }
      from = from + e
    end
    return spans
  end
  local terms = {}
  for _, t in ipairs(M.terms(query)) do
    terms[t] = true
  end
  local pos = 1
  while true do
    local s, e = text:find('[%w_\128-\255]+', pos)
    if not s then
      break
    end
    if terms[text:sub(s, e):lower()] then
      spans[#spans + 1] = { s - 1, e }
    end
    pos = e + 1
  end
  return spans
end

---One line of at most `max` characters, whitespace collapsed, starting `lead` characters
---before the first match (with `…` marking cut ends). `lead = 'center'` puts the first
---match in the middle of the line (as far as the text allows).
---@param text string?
---@param query string?
---@param max? integer
---@param lead? integer|'center'
---@return string
function M.snippet(text, query, max, lead)
  max = max or 100
  lead = lead or 20
  local flat = (text or ''):gsub('%s+', ' '):gsub('^ ', ''):gsub(' $', '')
  local first = M.spans(flat, query)[1]
  local start = 0
  if first then
    local before = vim.fn.strchars(flat:sub(1, first[1]))
    if lead == 'center' then
      local len = vim.fn.strchars(flat:sub(first[1] + 1, first[2]))
      local total = vim.fn.strchars(flat)
      -- Centre the match, but never leave the line short when the text ends soon after it.
      start = math.max(0, math.min(before - math.floor((max - len) / 2), total - max))
    else
      start = math.max(0, before - lead)
    end
  end
  local prefix = start > 0 and '…' or ''
  local body = vim.fn.strcharpart(flat, start, max - vim.fn.strchars(prefix))
  local suffix = ''
  if start + vim.fn.strchars(body) < vim.fn.strchars(flat) then
    body = vim.fn.strcharpart(body, 0, vim.fn.strchars(body) - 1)
    suffix = '…'
  end
  return prefix .. body .. suffix
end

---Highlight the matches of `query` in lines `first`..`last` (0-based, inclusive) of `buf`.
---@param buf integer
---@param query string?
---@param first? integer
---@param last? integer
---@return integer count of highlights set
function M.highlight(buf, query, first, last)
  first = first or 0
  local lines = vim.api.nvim_buf_get_lines(buf, first, last and last + 1 or -1, false)
  local n = 0
  for i, line in ipairs(lines) do
    for _, s in ipairs(M.spans(line, query)) do
      vim.api.nvim_buf_set_extmark(buf, M.ns, first + i - 1, s[1], { end_col = s[2], hl_group = 'FabricMatch' })
      n = n + 1
    end
  end
  return n
end

---Row of the first line of an expanded entry's text (after the blank line that ends its
---header, views.expanded), 0-based; 0 when there is no header.
---@param lines string[]
---@return integer
function M.body_start(lines)
  for i, l in ipairs(lines) do
    if l == '' then
      return i
    end
  end
  return 0
end

---Spans {row, start, end} (0-based rows, byte columns) of the matches of `query` in the
---text of an expanded entry (`lines` as views.expanded gives them; the header is skipped).
---@param lines string[]
---@param query string?
---@return integer[][]
function M.body_spans(lines, query)
  local out = {}
  for row = M.body_start(lines), #lines - 1 do
    for _, s in ipairs(M.spans(lines[row + 1], query)) do
      out[#out + 1] = { row, s[1], s[2] }
    end
  end
  return out
end

---Set `FabricMatch` extmarks for `spans` ({row, start, end}) in `buf`, after clearing the
---namespace. Spans outside the buffer are skipped.
---@param buf integer
---@param spans integer[][]
function M.apply(buf, spans)
  vim.api.nvim_buf_clear_namespace(buf, M.ns, 0, -1)
  for _, s in ipairs(spans or {}) do
    pcall(vim.api.nvim_buf_set_extmark, buf, M.ns, s[1], s[2], { end_col = s[3], hl_group = 'FabricMatch' })
  end
end

---Highlight the matches in the quickfix window's buffer (re-applied whenever it is shown).
---@param query string
function M.highlight_quickfix(query)
  local info = vim.fn.getqflist({ qfbufnr = 0 })
  local buf = info.qfbufnr
  if not buf or buf == 0 or not vim.api.nvim_buf_is_valid(buf) then
    return
  end
  vim.api.nvim_buf_clear_namespace(buf, M.ns, 0, -1)
  -- Only the entry text after "file|line col|": not the file name.
  for i, line in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
    local bar = line:find('|[^|]*|')
    local offset = bar and select(2, line:find('|[^|]*| ?')) or 0
    for _, s in ipairs(M.spans(line:sub(offset + 1), query)) do
      vim.api.nvim_buf_set_extmark(buf, M.ns, i - 1, offset + s[1], { end_col = offset + s[2], hl_group = 'FabricMatch' })
    end
  end
end

-- The quickfix buffer is redrawn when its window opens again: re-apply the highlights of a
-- Fabric recall list (its context carries the query).
vim.api.nvim_create_autocmd('BufWinEnter', {
  group = vim.api.nvim_create_augroup('fabric_match', { clear = true }),
  callback = function(ev)
    if vim.bo[ev.buf].buftype ~= 'quickfix' then
      return
    end
    local ctx = vim.fn.getqflist({ context = 0 }).context
    if type(ctx) == 'table' and type(ctx.fabric_query) == 'string' then
      M.highlight_quickfix(ctx.fabric_query)
    end
  end,
})

return M
