-- Answers shown while the server's index was still being built (coverage reason
-- `indexing_in_progress`: the request went beyond the per-call budgets and the background
-- indexer had the rest). When the indexer reports the whole history indexed
-- (`fabric/activity` {type: "metrics", request: "fabric/backgroundIndex", complete: true}),
-- every such answer still on screen is searched again in place — a quickfix list keeps its
-- place in the quickfix stack, the plugin's float list is redrawn — or, where the picker
-- cannot be redrawn (vim.ui.select, snacks, telescope, fzf-lua), said to be stale. Never
-- left as if it were complete.
local ui = require('fabric.ui')

local M = {}

---@class fabric.ShownAnswer
---@field label string      what the user asked, for messages ('recall "parse epoch"')
---@field still_shown fun(): boolean
---@field rerun? fun()      search again and redraw in place; nil: the view cannot be redrawn

---@type fabric.ShownAnswer[]
local shown = {}

---Whether `result` (fabric/recall or fabric/fileHistory) waits on the background indexer.
---@param result any
---@return boolean
function M.partial(result)
  local cov = type(result) == 'table' and result.coverage or nil
  if type(cov) ~= 'table' or type(cov.reasons) ~= 'table' then
    return false
  end
  return vim.tbl_contains(cov.reasons, 'indexing_in_progress')
end

---The words a title adds for a partial answer ('' for a complete one).
---@param result any
---@return string
function M.note(result)
  if not M.partial(result) then
    return ''
  end
  local cov = result.coverage
  local done, all = tonumber(cov.indexedSessions), tonumber(cov.eligibleSessions)
  if done and all then
    return (' · partial: %d of %d sessions indexed so far'):format(done, all)
  end
  return ' · partial: still indexing'
end

-- At most this many are remembered (with the indexer off, `complete` never comes): the
-- oldest is forgotten first.
M.MAX = 50

---Remember an answer on screen that `M.partial` said waits on the indexer.
---@param answer fabric.ShownAnswer
function M.track(answer)
  shown[#shown + 1] = answer
  if #shown > M.MAX then
    table.remove(shown, 1)
  end
end

---Remember quickfix list `qid` when `result` is partial: `rerun()` searches it again
---once the index is complete (while the list is still in the stack).
---@param result table
---@param label string
---@param qid integer
---@param rerun fun()
function M.track_quickfix(result, label, qid, rerun)
  if M.partial(result) then
    M.track({
      label = label,
      still_shown = function()
        return M.qf_alive(qid)
      end,
      rerun = rerun,
    })
  end
end

---Remember a partial answer that was only said (a "no matches" message): a warning to run
---it again once the index is complete.
---@param result table
---@param label string
function M.track_message(result, label)
  if M.partial(result) then
    M.track({
      label = label,
      still_shown = function()
        return true
      end,
    })
  end
end

---How many answers are remembered (for tests and :checkhealth).
---@return integer
function M.count()
  return #shown
end

---The quickfix list `id` is still in the stack (not replaced by ten newer lists).
---@param id integer
---@return boolean
function M.qf_alive(id)
  return id ~= 0 and vim.fn.getqflist({ id = id }).id == id
end

---The index is complete: search each remembered answer still on screen again.
function M.index_complete()
  local list = shown
  shown = {}
  for _, answer in ipairs(list) do
    if answer.still_shown() then
      if answer.rerun then
        answer.rerun()
      else
        ui.notify(
          ('Fabric: %s was answered while the history was still being indexed; indexing is complete now — '
            .. 'run it again to search every session'):format(answer.label),
          vim.log.levels.WARN
        )
      end
    end
  end
  vim.api.nvim_exec_autocmds('User', { pattern = 'FabricViewRefreshed', modeline = false, data = { kind = 'partial' } })
end

return M
