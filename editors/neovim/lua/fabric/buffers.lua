-- Session JSONL buffers and the entry reference under the cursor: which session a buffer
-- or file is, the session at hand, the entry of a JSONL line, `gd` and opening a JSONL at a
-- line. The reference grammar itself is fabric/references.lua.
local M = {}

local references = require('fabric.references')

---The reference under the cursor of the current window, if any.
---@return {session_id: string, entry_id: string}?
function M.under_cursor()
  local line = vim.api.nvim_get_current_line()
  local col = vim.api.nvim_win_get_cursor(0)[2] + 1
  for _, ref in ipairs(references.find(line)) do
    if col >= ref.first_col and col <= ref.last_col then
      return ref
    end
  end
end

---The session header of `bufnr` when it is a Pi session JSONL buffer (first line
---`{"type":"session","id":…}`), else nil. `cwd` is the header's project directory.
---@param bufnr? integer
---@return {id: string, path: string, cwd: string?}?
function M.session_of_buffer(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if not vim.api.nvim_buf_is_valid(bufnr) then
    return nil
  end
  local name = vim.api.nvim_buf_get_name(bufnr)
  if not name:match('%.jsonl$') then
    return nil
  end
  local first = vim.api.nvim_buf_get_lines(bufnr, 0, 1, false)[1]
  if not first or first == '' then
    return nil
  end
  local ok, header = pcall(vim.json.decode, first)
  if ok and type(header) == 'table' and header.type == 'session' and type(header.id) == 'string' then
    return {
      id = header.id,
      path = vim.fn.fnamemodify(name, ':p'),
      cwd = type(header.cwd) == 'string' and header.cwd ~= '' and header.cwd or nil,
    }
  end
end

---The header of the session file at `path` (its first line), as session_of_buffer returns it.
---@param path string
---@return {id: string, path: string, cwd: string?}?
function M.session_of_file(path)
  local fh = io.open(path, 'r')
  if not fh then
    return nil
  end
  local first = fh:read('*l')
  fh:close()
  local ok, header = pcall(vim.json.decode, first or '')
  if ok and type(header) == 'table' and header.type == 'session' and type(header.id) == 'string' then
    return {
      id = header.id,
      path = path,
      cwd = type(header.cwd) == 'string' and header.cwd ~= '' and header.cwd or nil,
    }
  end
end

---The session a buffer is about: the session JSONL it shows, else the session of a Fabric
---scratch buffer (`b:fabric_session`).
---@param bufnr? integer
---@return {id: string, path: string, cwd: string?}?
function M.session_at_hand(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local here = M.session_of_buffer(bufnr)
  if here then
    return here
  end
  local ok, scratch = pcall(vim.api.nvim_buf_get_var, bufnr, 'fabric_session')
  if ok and type(scratch) == 'string' and scratch ~= '' then
    return M.session_of_file(scratch) or { id = vim.fn.fnamemodify(scratch, ':t:r'), path = scratch }
  end
end

---The entry id on line `lnum` (1-based) of a session buffer.
---@param bufnr integer
---@param lnum integer
---@return string?
function M.entry_id_at(bufnr, lnum)
  local text = vim.api.nvim_buf_get_lines(bufnr, lnum - 1, lnum, false)[1]
  if not text or text == '' then
    return nil
  end
  local ok, obj = pcall(vim.json.decode, text)
  if ok and type(obj) == 'table' and type(obj.id) == 'string' and obj.type ~= 'session' then
    return obj.id
  end
end

---`gd`: the server's textDocument/definition on a reference in a buffer the client is attached
---to; through fabric/expand (which knows the entry's line) elsewhere; the built-in `gd`
---when the cursor is on no reference.
---A bare entry id under the cursor in a buffer of one session (a compaction preview, whose
---b:fabric_session names its file): "9faf909a (line 4)" in the cut map, "[entry 2fa6b38a]"
---in the summary.
---@return {session: string, entry_id: string}?
function M.bare_id_under_cursor()
  local session = vim.b.fabric_session
  if type(session) ~= 'string' or session == '' then
    return nil
  end
  local word = vim.fn.expand('<cword>')
  if word:match('^%x%x%x%x%x%x%x%x$') then
    return { session = session, entry_id = word }
  end
end

---The entry `id` of `session` through fabric/expand; `done(err, entry, result)`.
local function expand_one(session, id, done)
  require('fabric.lsp').request('fabric/expand', { session = session, entryIds = { id } }, function(err, result)
    if err then
      return done(err)
    end
    if type(result) == 'table' and type(result.error) == 'table' then
      return done(result.error.message)
    end
    done(nil, result.expanded and result.expanded[1], result)
  end)
end

---`K` in a compaction preview: a bare entry id opens a float with the entry; anything else
---is the LSP hover.
function M.hover()
  local bare = M.bare_id_under_cursor()
  if not bare then
    return vim.lsp.buf.hover()
  end
  expand_one(bare.session, bare.entry_id, function(err, entry, result)
    if err or not entry then
      return require('fabric.ui').done('hover', false, err or ('no entry ' .. bare.entry_id))
    end
    local lines = {
      '# ' .. references.format(result.sessionId, entry.entryId or bare.entry_id),
      ('%s · %s · line %d'):format(tostring(entry.role or entry.type), tostring(entry.timestamp or ''), (entry.line or 0) + 1),
      '',
    }
    vim.list_extend(lines, vim.split(tostring(entry.text or ''), '\n', { plain = true }))
    vim.lsp.util.open_floating_preview(vim.list_slice(lines, 1, 40), 'markdown', { focus_id = 'fabric_entry' })
  end)
end

function M.goto_definition()
  local ref = M.under_cursor()
  if not ref then
    local bare = M.bare_id_under_cursor()
    if not bare then
      vim.cmd('normal! gd')
      return
    end
    expand_one(bare.session, bare.entry_id, function(err, entry, result)
      if err or not entry then
        return require('fabric.ui').done('definition', false, err or ('no entry ' .. bare.entry_id))
      end
      M.open_jsonl(result.sessionFile, entry.line or 0)
      require('fabric.ui').done('definition', true)
    end)
    return
  end
  local attached = vim.lsp.get_clients({ name = 'fabric', bufnr = 0 })[1]
  if attached then
    vim.lsp.buf.definition()
    return
  end
  require('fabric.lsp').request(
    'fabric/expand',
    { session = ref.session_id, entryIds = { ref.entry_id } },
    function(err, result)
      if err then
        return require('fabric.ui').done('definition', false, err)
      end
      if type(result) == 'table' and type(result.error) == 'table' then
        return require('fabric.ui').done('definition', false, result.error.message)
      end
      local entry = result.expanded and result.expanded[1]
      M.open_jsonl(result.sessionFile, entry and entry.line or 0)
      require('fabric.ui').done('definition', true)
    end
  )
end

---Open a session JSONL at a 0-based line.
---@param path string
---@param line integer
function M.open_jsonl(path, line)
  vim.cmd.edit(vim.fn.fnameescape(path))
  local last = vim.api.nvim_buf_line_count(0)
  vim.api.nvim_win_set_cursor(0, { math.min(math.max((line or 0) + 1, 1), last), 0 })
end

return M
