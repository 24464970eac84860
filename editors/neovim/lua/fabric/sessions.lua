-- Session lists and "which session does this command mean".
local lsp = require('fabric.lsp')
local refs = require('fabric.refs')
local ui = require('fabric.ui')

local M = {}

-- Session ids seen in the last listing, for :Fabric completion.
M.known_ids = {}

---@param info table SessionInfo
function M.format_item(info)
  local when = ui.time(info.lastTs)
  return ('%s  %s  %d entries  %s'):format(
    tostring(info.sessionId),
    when,
    tonumber(info.entryCount) or 0,
    ui.present(info.cwd) and tostring(info.cwd) or ''
  )
end

---The project a command means: the cwd in the session header of the current session JSONL
---buffer (or of a Fabric scratch buffer's session), else Neovim's current directory.
---@param bufnr? integer
---@return string
function M.project_cwd(bufnr)
  local here = refs.session_at_hand(bufnr or 0)
  if here and here.cwd then
    return here.cwd
  end
  return vim.fn.getcwd()
end

---fabric/sessions for `scope` ('project': the current buffer's session project, see
---project_cwd; or 'global').
---@param scope string
---@param cb fun(err: string?, result: table?)
function M.list(scope, cb)
  local params = { scope = scope, pageSize = 200 }
  if scope ~= 'global' then
    params.cwd = M.project_cwd(0)
  end
  lsp.request('fabric/sessions', params, function(err, result)
    if not err and type(result) == 'table' then
      for _, info in ipairs(result.sessions or {}) do
        M.known_ids[info.sessionId] = true
      end
    end
    cb(err, result)
  end)
end

---Let the user pick a session (project first, all sessions when the project has none).
---@param prompt string
---@param cb fun(err: string?, session: string?) session = its file path; both nil when dismissed
function M.pick(prompt, cb)
  M.list('project', function(err, result)
    if err then
      return cb(err)
    end
    local function choose(sessions)
      if #sessions == 0 then
        return cb('no sessions found in the agent dir')
      end
      vim.ui.select(sessions, { prompt = prompt, format_item = M.format_item, kind = 'fabric.session' }, function(choice)
        cb(nil, choice and choice.sessionFile or nil)
      end)
    end
    if #(result.sessions or {}) > 0 then
      return choose(result.sessions)
    end
    M.list('global', function(gerr, gresult)
      if gerr then
        return cb(gerr)
      end
      choose(gresult.sessions or {})
    end)
  end)
end

---The session a command means: its argument, the current session JSONL buffer, the session of
---a Fabric scratch buffer, else one the user picks.
---@param arg string?
---@param prompt string
---@param cb fun(err: string?, session: string?)
function M.resolve(arg, prompt, cb)
  if arg and arg ~= '' then
    if arg:find('/') and not arg:match('^file://') then
      arg = vim.fn.fnamemodify(vim.fn.expand(arg), ':p')
    end
    return cb(nil, arg)
  end
  local here = refs.session_of_buffer(0)
  if here then
    return cb(nil, here.path)
  end
  local scratch = vim.b.fabric_session
  if type(scratch) == 'string' and scratch ~= '' then
    return cb(nil, scratch)
  end
  M.pick(prompt, cb)
end

return M
