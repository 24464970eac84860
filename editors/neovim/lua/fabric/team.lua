-- Team recall items (docs/team.md, :help fabric-team): results of `scope=team` and
-- `scope=team:<member>` come from the team database, pushed by a member from another
-- machine. Such an item has no file here: choosing it (picker or quickfix) shows the stored
-- normalized entries (fabric/expand with the item's member) in a `fabric://team/…` scratch
-- buffer whose header names the member and the machine where the full source lives.
local lsp = require('fabric.lsp')
local ui = require('fabric.ui')

local M = {}

---Member names for the completion of `scope=team:<member>`: those the team database
---knows (fabric/teamMembers, `M.fetch_members`) and those seen in team answers.
---@type table<string, boolean>
M.members = {}

local asked_at = nil ---@type integer? (vim.uv.now() of the last fetch_members request)

---Add the members the team database knows (fabric/teamMembers) to `M.members`. Asked of
---a running server only, and synchronously (a completion function cannot wait for a
---callback), for at most `timeout_ms`, and at most once in 5 s (each <Tab> would ask
---again, and a database that does not answer would hold each one); nothing changes when
---there is no server, no team database, or no answer in time.
---@param timeout_ms? integer
function M.fetch_members(timeout_ms)
  local client = lsp.get_client()
  if not client or not client.initialized or client:is_stopped() then
    return
  end
  local now = vim.uv.now()
  if asked_at and now - asked_at < 5000 then
    return
  end
  asked_at = now
  -- (an empty Lua table would be sent as `[]`: params are an object)
  local ok, resp = pcall(client.request_sync, client, 'fabric/teamMembers', vim.empty_dict(), timeout_ms or 500, 0)
  local result = ok and type(resp) == 'table' and resp.result or nil
  if type(result) ~= 'table' or type(result.members) ~= 'table' then
    return
  end
  for _, m in ipairs(result.members) do
    if type(m) == 'table' and type(m.member) == 'string' and m.member ~= '' then
      M.members[m.member] = true
    end
  end
end

---Whether `scope` is a team scope: 'team' or 'team:<member>'.
---@param scope any
---@return boolean
function M.is_scope(scope)
  return type(scope) == 'string' and (scope == 'team' or scope:match('^team:.+') ~= nil)
end

---Remember the members of a fabric/recall answer's items.
---@param result table
function M.remember(result)
  for _, item in ipairs(type(result) == 'table' and result.items or {}) do
    local seg = type(item) == 'table' and item.segment or nil
    if type(seg) == 'table' and type(seg.member) == 'string' and seg.member ~= '' then
      M.members[seg.member] = true
    end
  end
end

---How an item names its member: `alice@laptop (host)`.
---@param item {member: string, machine?: string}
---@return string
function M.label(item)
  if item.machine and item.machine ~= '' then
    return ('%s (%s)'):format(item.member, item.machine)
  end
  return item.member
end

local function encode(s)
  return (tostring(s):gsub('[%%/]', function(c)
    return ('%%%02X'):format(c:byte())
  end))
end

local function decode(s)
  return (s:gsub('%%(%x%x)', function(h)
    return string.char(tonumber(h, 16))
  end))
end

---What a `fabric://team/…` buffer shows, by buffer name: {member, machine?, sessionId,
---sessionFile?, entryId, sourceHash?, query?} (the item it was made for).
---@type table<string, table>
M.registry = {}

---The scratch buffer name of a team item: fabric://team/<member>/<sessionId>/<entryId>.
---@param item table
---@return string
function M.buffer_name(item)
  return ('fabric://team/%s/%s/%s'):format(encode(item.member), encode(item.sessionId or '?'), encode(item.entryId or '?'))
end

---Remember what the buffer of `item` shows; its name.
---@param item table
---@return string
function M.register(item)
  local name = M.buffer_name(item)
  M.registry[name] = {
    member = item.member,
    machine = item.machine,
    sessionId = item.sessionId,
    sessionFile = item.sessionFile,
    entryId = item.entryId,
    sourceHash = item.sourceHash,
    query = item.query,
  }
  return name
end

---The item a `fabric://team/…` buffer name stands for (registered, else parsed from it).
---@param name string
---@return table?
function M.item_of(name)
  if M.registry[name] then
    return M.registry[name]
  end
  local member, sid, eid = name:match('^fabric://team/([^/]+)/([^/]+)/([^/]+)$')
  if member then
    return { member = decode(member), sessionId = decode(sid), entryId = decode(eid) }
  end
end

---fabric/expand params of a team item: its member and session (the pushed file, else the
---id), the entry, and the source hash the answer came with.
---@param item table
---@return table
function M.expand_params(item)
  return {
    member = item.member,
    session = item.sessionFile or item.sessionId,
    entryIds = { item.entryId },
    expectedSourceHash = item.sourceHash,
  }
end

---Expand a team item: cb(err) or cb(nil, lines, result) (lines: views.expanded).
---@param item table
---@param cb fun(err: string?, lines: string[]?, result: table?)
function M.fetch(item, cb)
  lsp.request('fabric/expand', M.expand_params(item), function(err, result)
    if not err and type(result) == 'table' and type(result.error) == 'table' then
      err = require('fabric.commands').domain_error(result.error)
    end
    if not err and type(result) ~= 'table' then
      err = 'no answer from the server'
    end
    if err then
      return cb(tostring(err))
    end
    cb(nil, require('fabric.views').expanded(result), result)
  end)
end

---Buffer variables of a team expansion (never b:fabric_session: that file is not here).
local function vars(item, result)
  return {
    fabric_kind = 'team-expand',
    fabric_team = {
      member = result.member or item.member,
      machine = ui.present(result.machine) and result.machine or item.machine,
      sessionId = result.sessionId,
      sessionFile = result.sessionFile,
    },
  }
end

---Highlight the query's matches in the entry text and put the cursor on the first one.
local function highlight(buf, query)
  local match = require('fabric.match')
  vim.api.nvim_buf_clear_namespace(buf, match.ns, 0, -1)
  if not query or query == '' then
    return
  end
  match.apply(buf, match.body_spans(vim.api.nvim_buf_get_lines(buf, 0, -1, false), query))
  local marks = vim.api.nvim_buf_get_extmarks(buf, match.ns, 0, -1, {})
  local win = vim.fn.bufwinid(buf)
  if marks[1] and win ~= -1 then
    vim.api.nvim_win_set_cursor(win, { marks[1][2] + 1, marks[1][3] })
  end
end

---Open a team item: its stored entry in the scratch buffer `fabric://team/…`.
---@param item table a recall item with `member`
---@param done fun(ok: boolean, msg: string?)
---@param opts? {query?: string}
function M.open(item, done, opts)
  local name = M.register(item)
  M.fetch(item, function(err, lines, result)
    if err then
      return done(false, ('the team entry of %s: %s'):format(M.label(item), err))
    end
    local existing = vim.fn.bufnr('^' .. vim.fn.escape(name, '\\/.*$^~[]') .. '$')
    if existing ~= -1 and not vim.api.nvim_buf_is_loaded(existing) then
      -- made by a quickfix list and not shown yet (its items keep pointing at it): load it
      -- empty here, without the BufReadCmd's own request, and fill it below
      local ignore = vim.o.eventignore
      vim.o.eventignore = 'BufReadCmd'
      pcall(vim.fn.bufload, existing)
      vim.o.eventignore = ignore
    end
    local buf = ui.scratch(name, lines, { filetype = 'markdown', vars = vars(item, result) })
    require('fabric.commands').attach_scratch(buf)
    highlight(buf, opts and opts.query or item.query)
    done(true)
  end)
end

---BufReadCmd of `fabric://team/*` (a quickfix jump, `:edit`): fill the buffer with the
---expansion of the item it names.
---@param buf integer
function M.read(buf)
  local name = vim.api.nvim_buf_get_name(buf)
  local bo = vim.bo[buf]
  bo.buftype = 'nofile'
  bo.bufhidden = 'hide'
  bo.swapfile = false
  local item = M.item_of(name)
  if not item then
    ui.replace(buf, { ('Fabric: %s is not a team entry (fabric://team/<member>/<session>/<entry>)'):format(name) })
    return
  end
  ui.replace(buf, { ('Loading the team entry of %s…'):format(M.label(item)) })
  bo.filetype = 'markdown'
  ui.plain_underscores(buf)
  M.fetch(item, function(err, lines, result)
    if not vim.api.nvim_buf_is_valid(buf) then
      return
    end
    if err then
      local msg = ('the team entry of %s: %s'):format(M.label(item), err)
      ui.replace(buf, { 'Fabric: ' .. msg })
      return ui.notify('Fabric expand: ' .. msg, vim.log.levels.ERROR)
    end
    ui.replace(buf, lines)
    for k, v in pairs(vars(item, result)) do
      vim.b[buf][k] = v
    end
    require('fabric.commands').attach_scratch(buf)
    highlight(buf, item.query)
  end)
end

return M
