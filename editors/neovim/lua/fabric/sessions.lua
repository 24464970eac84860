-- Session lists and "which session does this command mean".
local lsp = require('fabric.lsp')
local buffers = require('fabric.buffers')
local ui = require('fabric.ui')

local M = {}

-- Session ids seen in the last listing, for :Fabric completion.
M.known_ids = {}

-- Session names read from the files, by path: {size, mtime, name}.
local names = {}

---The session's name (Pi's `/name`: its last `session_info` entry with a name), or nil.
---Read from the file, remembered until its size or mtime changes.
---@param file string?
---@return string?
function M.name(file)
  if type(file) ~= 'string' or file == '' then
    return nil
  end
  local st = vim.uv.fs_stat(file)
  if not st or st.type ~= 'file' then
    return nil
  end
  local mtime = ('%d.%d'):format(st.mtime.sec, st.mtime.nsec)
  local hit = names[file]
  if hit and hit.size == st.size and hit.mtime == mtime then
    return hit.name or nil
  end
  -- The last named session_info wins. A long session is read at its end, then its start
  -- (PART bytes each), not whole: a listing of many large sessions stays quick.
  local function last_name(text)
    local found
    for line in text:gmatch('[^\n]+') do
      if line:find('"session_info"', 1, true) then
        local ok, obj = pcall(vim.json.decode, line)
        if ok and type(obj) == 'table' and obj.type == 'session_info' and type(obj.name) == 'string'
          and vim.trim(obj.name) ~= '' then
          found = vim.trim(obj.name)
        end
      end
    end
    return found
  end
  local PART = 2 * 1024 * 1024
  local name
  local fh = io.open(file, 'rb')
  if fh then
    if st.size <= 2 * PART then
      name = last_name(fh:read('*a') or '')
    else
      fh:seek('set', st.size - PART)
      name = last_name(fh:read(PART) or '')
      if not name then
        fh:seek('set', 0)
        name = last_name(fh:read(PART) or '')
      end
    end
    fh:close()
  end
  names[file] = { size = st.size, mtime = mtime, name = name or false }
  return name
end

---How messages name a session: `"<name>" (<id8>)`, or the short id, or the file name.
---@param file string? the session file
---@param id string? the session id
---@return string
function M.label(file, id)
  local name = M.name(file)
  local short = type(id) == 'string' and id:sub(1, 8) or nil
  if name then
    return short and ('"%s" (%s)'):format(name, short) or ('"%s"'):format(name)
  end
  return short or (file and vim.fs.basename(file)) or '?'
end

---@param info table SessionInfo
function M.format_item(info)
  local when = ui.time(info.lastTs)
  local name = M.name(info.sessionFile)
  return ('%s%s  %s  %d entries  %s'):format(
    name and (name .. '  ') or '',
    tostring(info.sessionId):sub(1, name and 8 or -1),
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
  local here = buffers.session_at_hand(bufnr or 0)
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

---The message for a session id prefix the server cannot take (fewer than 8 characters),
---or nil: a path, a file:// URI or a long enough id.
---@param session string
---@return string?
function M.too_short(session)
  if require('fabric.references').is_path(session) or #session >= 8 then
    return nil
  end
  return ('session id prefix %q is too short: give at least 8 characters of the session id, or its path'):format(session)
end

---The session a command means: its argument, the current session JSONL buffer, the session of
---a Fabric scratch buffer, else one the user picks.
---@param arg string?
---@param prompt string
---@param cb fun(err: string?, session: string?)
function M.resolve(arg, prompt, cb)
  if arg and arg ~= '' then
    local short = M.too_short(arg)
    if short then
      return cb(short)
    end
    if arg:find('/') and not arg:match('^file://') then
      arg = vim.fn.fnamemodify(vim.fn.expand(arg), ':p')
    end
    if require('fabric.references').is_path(arg) and not arg:match('^file://') then
      local st = vim.uv.fs_stat(arg)
      if st and st.type == 'file' and not buffers.session_of_file(arg) then
        return cb(('%s is not a Pi session: its first line is not a session header; pick one with :Fabric sessions'):format(
          vim.fn.fnamemodify(arg, ':~:.')))
      end
    end
    return cb(nil, arg)
  end
  local here = buffers.session_of_buffer(0)
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
