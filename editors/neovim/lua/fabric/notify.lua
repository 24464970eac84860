-- Server notifications that the user should see.
local ui = require('fabric.ui')

local M = {}

---`fabric/compactionCommitted` {session, record: CommitRecord} → vim.notify, then
---`User FabricCompactionCommitted` with the params as data.
---@param params {session: string, record: table}?
function M.compaction_committed(params)
  if type(params) ~= 'table' then
    return
  end
  local record = type(params.record) == 'table' and params.record or {}
  -- named as the other messages name a session: its Pi name and short id (no long path)
  local session = require('fabric.sessions').label(tostring(params.session), type(record.sessionId) == 'string'
    and record.sessionId or require('fabric.buffers').session_of_file(tostring(params.session)) and
    require('fabric.buffers').session_of_file(tostring(params.session)).id or nil)
  if record.status == 'committed' then
    local tokens = ''
    if ui.present(record.tokensBefore) then
      tokens = (' (%s tokens before'):format(record.tokensBefore)
      if ui.present(record.estimatedTokensAfter) then
        tokens = tokens .. (', ~%s after'):format(record.estimatedTokensAfter)
      end
      tokens = tokens .. ')'
    end
    local by = record.committedBy == 'pi' and ' by Pi' or ''
    ui.notify(('Fabric: compaction committed%s to %s%s'):format(by, session, tokens), vim.log.levels.INFO)
  else
    ui.notify(
      ('Fabric: compaction of %s failed: %s'):format(session, tostring(record.error or record.status)),
      vim.log.levels.WARN
    )
  end
  vim.api.nvim_exec_autocmds('User', {
    pattern = 'FabricCompactionCommitted',
    modeline = false,
    data = params,
  })
end

return M
