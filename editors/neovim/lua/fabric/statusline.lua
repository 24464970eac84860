-- The session part of require('fabric').status(): pending compaction, last commit and the
-- live Pi holding the session of the current buffer, from fabric/compact/status (cached per
-- session file, refreshed when a session buffer is entered or a commit is announced).
local ui = require('fabric.ui')

local M = {}

---@type table<string, table> session file → fabric/compact/status result
M.cache = {}

---@param session string
---@param result table
function M.set(session, result)
  M.cache[session] = result
end

---The status text of one compact/status result.
---@param st table?
---@return string
function M.format(st)
  if type(st) ~= 'table' then
    return ''
  end
  local parts = {}
  if type(st.pending) == 'table' then
    parts[#parts + 1] = 'compaction pending'
  end
  if type(st.last) == 'table' then
    local at = ui.time(st.last.at)
    parts[#parts + 1] = ('last %s %s%s'):format(tostring(st.last.status), at:sub(12, 16),
      st.last.committedBy == 'pi' and ' by Pi' or '')
  end
  if type(st.heldBy) == 'table' then
    parts[#parts + 1] = ('live Pi %s'):format(tostring(st.heldBy.pid))
  end
  return table.concat(parts, ' · ')
end

---@param bufnr integer
---@return string
function M.line(bufnr)
  local here = require('fabric.buffers').session_at_hand(bufnr or 0)
  if not here then
    return ''
  end
  return M.format(M.cache[here.path])
end

---Ask the server for the status of the current buffer's session (async); `cb` after.
---@param bufnr integer
---@param cb? fun()
function M.refresh(bufnr, cb)
  local here = require('fabric.buffers').session_at_hand(bufnr or 0)
  if not here then
    return cb and cb()
  end
  require('fabric.lsp').request('fabric/compact/status', { session = here.path }, function(err, result)
    if not err and type(result) == 'table' and type(result.error) ~= 'table' then
      M.cache[here.path] = result
      vim.cmd('redrawstatus')
    end
    if cb then
      cb()
    end
  end)
end

return M
