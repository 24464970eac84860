-- Work-done progress of the fabric client ($/progress, seen through the LspProgress event)
-- in the echo area, through vim.notify, or for a statusline via require('fabric').status().
local config = require('fabric.config')

local M = {}

-- token -> {title, message, percentage}; `order` keeps the newest token last.
local active, order = {}, {}
-- The last `fabric/activity` notification (structured activity; not displayed).
M.last_activity = nil

local function is_fabric(client_id)
  local client = vim.lsp.get_client_by_id(client_id)
  return client ~= nil and client.name == 'fabric'
end

local function format(p)
  local title = p.title or 'working'
  -- The server's titles may already name it ("Fabric: recall").
  local text = title:match('^[Ff]abric') and title or ('Fabric: ' .. title)
  if p.message and p.message ~= '' then
    text = text .. ': ' .. p.message
  end
  if type(p.percentage) == 'number' then
    text = text .. (' (%d%%)'):format(p.percentage)
  end
  return text
end

---The newest active progress as one line, or '' when idle.
---@return string
function M.status()
  local token = order[#order]
  if token == nil then
    return ''
  end
  return format(active[token])
end

local function render(kind, text)
  local mode = config.get().progress
  if mode == 'echo' then
    vim.api.nvim_echo({ { text } }, false, {})
  elseif mode == 'notify' and kind ~= 'report' then
    vim.notify(text, vim.log.levels.INFO, { title = 'Fabric' })
  end
  pcall(vim.cmd.redrawstatus)
end

---LspProgress autocmd callback.
---@param ev {data: {client_id: integer, params: {token: any, value: table}}}
function M.on_progress(ev)
  local data = ev.data or {}
  if not data.client_id or not is_fabric(data.client_id) then
    return
  end
  local params = data.params or {}
  local value = params.value
  if type(value) ~= 'table' then
    return
  end
  local token = tostring(params.token)
  if value.kind == 'begin' then
    active[token] = { title = value.title, message = value.message, percentage = value.percentage }
    order[#order + 1] = token
    render('begin', format(active[token]))
  elseif value.kind == 'report' then
    local p = active[token] or { title = nil }
    p.message = value.message or p.message
    p.percentage = value.percentage or p.percentage
    active[token] = p
    render('report', format(p))
  elseif value.kind == 'end' then
    local p = active[token] or {}
    active[token] = nil
    for i = #order, 1, -1 do
      if order[i] == token then
        table.remove(order, i)
      end
    end
    local text = format({ title = p.title, message = value.message or 'done' })
    render('end', text)
  end
end

---`fabric/activity` notification.
function M.activity(params)
  M.last_activity = params
end

return M
