-- The one reference grammar (docs/protocol.md, "Entry references"), in Lua. The same rules
-- as fabric_lsp/engine/references.py and editors/vscode/src/references.ts, checked against
-- the same table of cases (tests/fixtures/references.json).
--
--   pi-entry:<sessionId>/<entryId>   canonical, also found in running text (M.find)
--   <session>/<entryId>              <session>: an id, an id prefix (>= 8 chars) or a path
--   <entryId>                        an entry of the session at hand (the JSONL buffer)
--   <entryId>/<n>                    operation n (1-6 digits) of that entry
local M = {}

M.scheme = 'pi-entry'
M.forms = 'pi-entry:<session>/<entry>, <session>/<entry>, <entry> or <entry>/<n>'

-- Lua-pattern forms of the id syntax: a session id starts with a letter or digit and goes on
-- with letters, digits, `_`, `.`, `-`; an entry id may also hold `:`.
local SESSION_ID = '^[%w][%w_.%-]*$'
local ENTRY_ID = '^[%w][%w_.:%-]*$'
-- In running text (no anchors).
M.pattern = 'pi%-entry:([%w][%w_.%-]*)/([%w][%w_.:%-]*)'

function M.is_session_id(s)
  return type(s) == 'string' and s:match(SESSION_ID) ~= nil
end

function M.is_entry_id(s)
  return type(s) == 'string' and s:match(ENTRY_ID) ~= nil
end

---A session part that names a file rather than an id.
---@param s string
function M.is_path(s)
  return s:find('/', 1, true) ~= nil
    or s:find('\\', 1, true) ~= nil
    or s:sub(1, 1) == '~'
    or s:sub(1, 1) == '.'
    or vim.startswith(s, 'file://')
    or vim.endswith(s, '.jsonl')
end

-- Trailing sentence punctuation is not part of an entry id.
local function trim_entry(e)
  while #e > 1 and e:match('[.:]$') do
    e = e:sub(1, -2)
  end
  return e
end

local function entry_part(text, whole)
  local entry = trim_entry(text)
  if not M.is_entry_id(entry) then
    return nil, ('not an entry id: %q in %q (expected %s)'):format(text, whole, M.forms)
  end
  return entry
end

---@class fabric.ParsedReference
---@field session string? nil for the bare forms (the session at hand decides)
---@field entry string
---@field operation integer? the sequence of an operation address

---Read one typed reference. Never touches the file system: a session prefix or path is
---resolved by the server.
---@param text string
---@return fabric.ParsedReference? ref, string? err
function M.parse(text)
  local whole = vim.trim(text or '')
  if whole == '' then
    return nil, ('empty reference (expected %s)'):format(M.forms)
  end
  if vim.startswith(whole, M.scheme .. ':') then
    local rest = whole:sub(#M.scheme + 2)
    local slash = rest:find('/', 1, true)
    local session = slash and rest:sub(1, slash - 1) or nil
    if not session or not M.is_session_id(session) then
      return nil, ('not a %s:<session>/<entry> reference: %q'):format(M.scheme, whole)
    end
    local entry, err = entry_part(rest:sub(slash + 1), whole)
    if not entry then
      return nil, err
    end
    return { session = session, entry = entry }
  end
  local last = whole:match('^.*()/') -- position of the last '/'
  local head = last and whole:sub(1, last - 1) or ''
  local tail = last and whole:sub(last + 1) or whole
  -- Only a path may hold spaces ("~/My Sessions/x.jsonl/<entry>").
  if tail:find('%s') or (not M.is_path(head) and head:find('%s')) then
    return nil, ('a reference has no spaces: %q (expected %s)'):format(whole, M.forms)
  end
  if not last then
    local entry, err = entry_part(whole, whole)
    if not entry then
      return nil, err
    end
    return { entry = entry }
  end
  if tail == '' then
    return nil, ("missing entry id after '/': %q (expected %s)"):format(whole, M.forms)
  end
  if tail:match('^%d+$') and #tail <= 6 and M.is_entry_id(head) then
    return { entry = head, operation = tonumber(tail) }
  end
  if head == '' then
    return nil, ("missing session before '/': %q (expected %s)"):format(whole, M.forms)
  end
  if not M.is_path(head) and not M.is_session_id(head) then
    return nil, ('not a session id or path: %q in %q (expected %s)'):format(head, whole, M.forms)
  end
  local entry, err = entry_part(tail, whole)
  if not entry then
    return nil, err
  end
  return { session = head, entry = entry }
end

---`pi-entry:<sessionId>/<entryId>`.
function M.format(session_id, entry_id)
  return ('%s:%s/%s'):format(M.scheme, session_id, entry_id)
end

---Every pi-entry reference on `line`: {session_id, entry_id, first_col, last_col} (1-based,
---inclusive). Never inside a longer word: the character before must not be [%w_.-].
---@param line string
function M.find(line)
  local out = {}
  local init = 1
  while true do
    local s, e, sid, eid = line:find(M.pattern, init)
    if not s then
      break
    end
    local before = s > 1 and line:sub(s - 1, s - 1) or ''
    if before:match('[%w_.%-]') then
      init = s + 1
    else
      local trimmed = trim_entry(eid)
      e = e - (#eid - #trimmed)
      out[#out + 1] = { session_id = sid, entry_id = trimmed, first_col = s, last_col = e }
      init = e + 1
    end
  end
  return out
end

return M
