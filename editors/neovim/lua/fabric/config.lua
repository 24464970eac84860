-- Options of the Fabric plugin: built-in defaults overlaid by `vim.g.fabric`.
-- Read on every use (never cached), so changing `vim.g.fabric` takes effect on the next
-- command or the next server start.
local M = {}

---@class fabric.Options
M.defaults = {
  -- The language server command. `fabric-lsp` (no arguments) is the stdio server. Its program
  -- is an absolute path (or ~/…) or a name looked up on the absolute entries of $PATH, never
  -- a relative path; it runs in stdpath('cache')/fabric-lsp, never in the project.
  cmd = { 'fabric-lsp' },
  -- Filetypes whose buffers may start the server. Of those, the client attaches only to Pi
  -- session JSONL buffers (first line a session header) and Fabric scratch buffers
  -- (fabric://…, markdown): a README.md or another .jsonl never starts it.
  filetypes = { 'jsonl', 'markdown' },
  -- Root markers for the workspace folder; the current directory when none is found.
  root_markers = { '.git' },
  -- File-history CodeLens ("Pi: 3 sessions · edited in 01a182b4") on source files of a
  -- project that has Pi sessions: the client then also attaches to those buffers (any
  -- filetype); other projects' files never start the server. false: sessions only.
  code_lens = true,
  -- Server settings (protocol.md "Configuration"): agentDir, sessionDir, indexDir, trusted,
  -- memory = {...}, compaction = {...}. Sent as initializationOptions and as the
  -- workspace/configuration section "fabric".
  settings = {},
  -- plugin/fabric.lua calls vim.lsp.enable('fabric') unless this is false.
  autostart = true,
  -- Buffer-local `gd` on entry references (falls back to the built-in `gd` elsewhere).
  keymaps = true,
  -- How :Fabric recall shows its results (:help fabric-picker):
  -- 'auto': snacks.picker, telescope or fzf-lua when installed (in that order), else
  --   vim.ui.select when something replaced it (dressing, …), else the plugin's float;
  -- 'select': always vim.ui.select; 'float': the plugin's floating list (matches highlighted);
  -- 'snacks', 'telescope', 'fzf-lua': that picker; when it is not installed, a replaced
  --   vim.ui.select, else the float.
  picker = 'auto',
  compact = {
    -- :Fabric compact asks first (vim.ui.select naming the session, the entries replaced and
    -- the tokens saved, from a compaction preview); false: request without asking.
    -- (VS Code: fabric.compact.confirm. The old name `confirm_compact` still works, with a warning.)
    confirm = true,
  },
  -- Where work-done progress goes: 'echo' (echo area), 'notify', or 'none'.
  -- require('fabric').status() always returns it for a statusline.
  progress = 'echo',
  recall = {
    -- 'auto': the current session JSONL buffer when there is one, else 'project'.
    -- Any protocol scope works: 'session', 'project', 'global', 'session:<id-or-path>',
    -- 'team', 'team:<member>' (the team database: :help fabric-team).
    scope = 'auto',
    page_size = 25,
    -- What choosing a picker item opens: 'expanded' (the entry in a scratch buffer) or 'jsonl'
    -- (the file at its line). (VS Code: fabric.recall.openAs. The old `open = 'expand'` still
    -- works, with a warning.)
    open_as = 'expanded',
  },
  -- The compaction budget of :Fabric preview (each key optional; unset = the server's
  -- default: compaction.contextWindow / targetContextRatio of its settings, Pi's
  -- settings.json for keepRecentTokens / reserveTokens, else Pi's defaults 20000 / 16384).
  -- Sent as the fabric/compactionPreview params of the same names.
  compaction = {
    contextWindow = nil, -- integer >= 0 (0 = no model metadata)
    keepRecentTokens = nil, -- integer >= 0
    reserveTokens = nil, -- integer >= 0
    targetContextRatio = nil, -- 0.25 .. 0.85
  },
  -- Extra fabric/compactionPreview params for :Fabric preview (protocol.md), e.g.
  -- { includeQa = true, instructions = '…' }; they win over `compaction`.
  preview = {},
  -- How scratch buffers are shown: an Ex command that opens a window ('split', 'vsplit', 'tabnew')
  -- or 'current' to replace the current window's buffer.
  open = 'split',
  -- Milliseconds before a request is given up (and cancelled on the server).
  timeout_ms = 60000,
}

-- Validation ------------------------------------------------------------------------------

local function is_int(v, lo, hi)
  return type(v) == 'number' and v == math.floor(v) and v >= lo and (hi == nil or v <= hi)
end

---A program the plugin may run: an absolute path, `~` or `~/…`, or a bare name (looked up on
---$PATH). A relative path (`./fabric-lsp`, `.venv/bin/python`) would name a project's file.
local function is_program(p)
  return type(p) == 'string'
    and p ~= ''
    and (p:sub(1, 1) == '/' or p == '~' or p:sub(1, 2) == '~/' or not p:find('/', 1, true))
end
M.is_program = is_program

local function is_list_of_strings(v, nonempty)
  if type(v) ~= 'table' or not vim.islist(v) or (nonempty and #v == 0) then
    return false
  end
  for _, x in ipairs(v) do
    if type(x) ~= 'string' or x == '' then
      return false
    end
  end
  return true
end

local function one_of(...)
  local set = { ... }
  return function(v)
    return vim.tbl_contains(set, v)
  end, table.concat(
    vim.tbl_map(function(x)
      return ("'%s'"):format(x)
    end, set),
    ', '
  )
end

local progress_ok, progress_expect = one_of('echo', 'notify', 'none')
local open_ok, open_expect = one_of('expanded', 'jsonl')
local old_open_ok, old_open_expect = one_of('expand', 'jsonl')
local picker_ok, picker_expect = one_of('auto', 'select', 'float', 'snacks', 'telescope', 'fzf-lua')

---Per key: {check, what it expects} or a nested table of those (for recall, compaction).
M.rules = {
  cmd = {
    function(v)
      if type(v) == 'string' then
        return is_program(v)
      end
      return is_list_of_strings(v, true) and is_program(v[1])
    end,
    'a command: a string or a non-empty list of strings whose program is an absolute path (or ~/…) '
      .. 'or a name on $PATH, never a relative path',
  },
  filetypes = { is_list_of_strings, 'a list of filetype names' },
  root_markers = { is_list_of_strings, 'a list of file names' },
  code_lens = { function(v) return type(v) == 'boolean' end, 'true or false' },
  settings = { function(v) return type(v) == 'table' end, 'a table of server settings (:help fabric-setup)' },
  autostart = { function(v) return type(v) == 'boolean' end, 'true or false' },
  keymaps = { function(v) return type(v) == 'boolean' end, 'true or false' },
  compact = {
    confirm = { function(v) return type(v) == 'boolean' end, 'true or false' },
  },
  -- Old names, still read (M.get moves them to the new ones and says so once).
  confirm_compact = { function(v) return type(v) == 'boolean' end, 'true or false' },
  picker = { picker_ok, 'one of ' .. picker_expect },
  progress = { progress_ok, 'one of ' .. progress_expect },
  recall = {
    scope = {
      function(v)
        return vim.tbl_contains({ 'auto', 'session', 'project', 'global', 'team' }, v)
          or (type(v) == 'string' and (v:match('^session:.+') ~= nil or v:match('^team:.+') ~= nil))
      end,
      "one of 'auto', 'session', 'project', 'global', 'session:<id-or-path>', 'team' or 'team:<member>'",
    },
    page_size = { function(v) return is_int(v, 1, 100) end, 'an integer from 1 to 100' },
    open_as = { open_ok, 'one of ' .. open_expect },
    open = { old_open_ok, 'one of ' .. old_open_expect },
  },
  compaction = {
    contextWindow = { function(v) return is_int(v, 0) end, 'an integer >= 0 (0 = no model metadata)' },
    keepRecentTokens = { function(v) return is_int(v, 0) end, 'an integer >= 0' },
    reserveTokens = { function(v) return is_int(v, 0) end, 'an integer >= 0' },
    targetContextRatio = {
      function(v) return type(v) == 'number' and v >= 0.25 and v <= 0.85 end,
      'a number from 0.25 to 0.85',
    },
  },
  preview = { function(v) return type(v) == 'table' end, 'a table of fabric/compactionPreview params' },
  open = {
    function(v)
      return type(v) == 'string' and v ~= ''
    end,
    "an Ex command that opens a window ('split', 'vsplit', 'tabnew') or 'current'",
  },
  timeout_ms = { function(v) return is_int(v, 1) end, 'a positive integer (milliseconds)' },
}

local function is_rule(r)
  return type(r[1]) == 'function'
end

local function sorted_keys(t)
  local keys = vim.tbl_keys(t)
  table.sort(keys)
  return keys
end

local function show(v)
  return type(v) == 'string' and ('%q'):format(v) or vim.inspect(v, { newline = ' ', indent = '' })
end

---Check `user` (a vim.g.fabric value) against M.rules. Returns a copy without the invalid
---and unknown keys (so the defaults apply there) and one message per problem, each naming
---the key: `vim.g.fabric.recall.page_size: expected an integer from 1 to 100, got 500`.
---@param user any
---@return table valid, string[] problems
function M.validate(user)
  if user == nil then
    return {}, {}
  end
  if type(user) ~= 'table' then
    return {}, { ('vim.g.fabric: expected a table, got %s; using the defaults'):format(show(user)) }
  end
  local problems = {}
  local function walk(value, rules, path)
    local out = {}
    for _, key in ipairs(sorted_keys(value)) do
      local v = value[key]
      local rule = type(key) == 'string' and rules[key] or nil
      local name = path .. '.' .. tostring(key)
      if rule == nil then
        problems[#problems + 1] = ('%s: unknown option (known: %s); ignored'):format(
          name,
          table.concat(sorted_keys(rules), ', ')
        )
      elseif is_rule(rule) then
        if rule[1](v) then
          out[key] = v
        else
          problems[#problems + 1] = ('%s: expected %s, got %s; using the default'):format(name, rule[2], show(v))
        end
      elseif type(v) ~= 'table' then
        problems[#problems + 1] = ('%s: expected a table, got %s; using the defaults'):format(name, show(v))
      else
        out[key] = walk(v, rule, name)
      end
    end
    return out
  end
  return walk(user, M.rules, 'vim.g.fabric'), problems
end

---Problems of the server settings (`vim.g.fabric.settings`) against the server's own
---schema (lua/fabric/server_settings.lua, generated from fabric_lsp/settings_schema.py):
---one message per unknown key, wrong type or value out of range. The server ignores such a
---value with a warning of its own; :checkhealth fabric lists them before the server runs.
---@param settings any
---@return string[]
function M.settings_problems(settings)
  if settings == nil then
    return {}
  end
  local schema = require('fabric.server_settings')
  local problems = {}
  local function check(key, v)
    local rule = schema[key]
    local name = 'vim.g.fabric.settings.' .. key
    if rule == nil then
      problems[#problems + 1] = ('%s: unknown server setting; the server ignores it'):format(name)
      return
    end
    local k, ok, expect = rule.kind, true, nil
    if k == 'bool' then
      ok, expect = type(v) == 'boolean', 'true or false'
    elseif k == 'int' then
      ok = is_int(v, rule.min or -math.huge, rule.max)
      expect = rule.max and ('an integer from %d to %d'):format(rule.min, rule.max)
        or ('an integer >= %d'):format(rule.min or 0)
    elseif k == 'number' then
      ok = type(v) == 'number' and v >= rule.min and v <= rule.max
      expect = ('a number from %s to %s'):format(rule.min, rule.max)
    elseif k == 'enum' then
      ok = vim.tbl_contains(rule.choices, v)
      expect = 'one of ' .. table.concat(vim.tbl_map(function(c)
        return ("'%s'"):format(c)
      end, rule.choices), ', ')
    elseif k == 'path' or k == 'string' then
      ok, expect = type(v) == 'string' and v ~= '', 'a non-empty string'
    elseif k == 'strings' then
      ok, expect = is_list_of_strings(v), 'a list of strings'
    elseif k == 'number-map' or k == 'int-map' then
      ok = type(v) == 'table' and not vim.islist(v)
      for _, x in pairs(ok and v or {}) do
        ok = ok and type(x) == 'number'
      end
      expect = 'a table of "provider/model" = number'
    end
    if not ok then
      problems[#problems + 1] = ('%s: expected %s, got %s'):format(name, expect, show(v))
    end
  end
  local function walk(t, prefix)
    for _, key in ipairs(sorted_keys(t)) do
      local full = prefix .. tostring(key)
      local v = t[key]
      if type(v) == 'table' and not vim.islist(v) and schema[full] == nil then
        walk(v, full .. '.')
      else
        check(full, v)
      end
    end
  end
  if type(settings) == 'table' then
    walk(settings, '')
  end
  return problems
end

-- Each problem is reported once per session (get() runs on every use).
local reported = {}

---@return fabric.Options
function M.get()
  local user, problems = M.validate(vim.g.fabric)
  for _, msg in ipairs(problems) do
    if not reported[msg] then
      reported[msg] = true
      vim.notify('fabric: ' .. msg, vim.log.levels.WARN)
    end
  end
  local opts = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), user)
  M.rename_old_options(user, opts)
  -- Lists replace, never merge index-wise.
  for _, key in ipairs({ 'cmd', 'filetypes', 'root_markers' }) do
    if user[key] ~= nil then
      opts[key] = user[key]
    end
  end
  if type(opts.cmd) == 'string' then
    opts.cmd = { opts.cmd }
  end
  return opts
end

-- One name per concept in every client (VS Code: fabric.compact.confirm, fabric.recall.openAs).
-- An old name still works: its value moves to the new one (unless that is set too: then the
-- new one wins), and a warning says what to write instead, once per session.
local OLD_OPEN = { expand = 'expanded', jsonl = 'jsonl' }

function M.rename_old_options(user, opts)
  local function warn(msg)
    if not reported[msg] then
      reported[msg] = true
      vim.notify('fabric: ' .. msg, vim.log.levels.WARN)
    end
  end
  if user.confirm_compact ~= nil then
    local new_set = type(user.compact) == 'table' and user.compact.confirm ~= nil
    if not new_set then
      opts.compact.confirm = user.confirm_compact
    end
    warn(('`confirm_compact = %s` is now `compact = { confirm = %s }`%s'):format(
      tostring(user.confirm_compact),
      tostring(user.confirm_compact),
      new_set and '; `compact.confirm` is set too and wins' or ''
    ))
  end
  opts.confirm_compact = nil
  local old = type(user.recall) == 'table' and user.recall.open or nil
  if old ~= nil then
    local new_set = user.recall.open_as ~= nil
    if not new_set then
      opts.recall.open_as = OLD_OPEN[old]
    end
    warn(("`recall.open = '%s'` is now `recall.open_as = '%s'`%s"):format(
      old,
      OLD_OPEN[old],
      new_set and '; `recall.open_as` is set too and wins' or ''
    ))
  end
  opts.recall.open = nil
end

---The fabric/compactionPreview params of :Fabric preview (without `session`): the
---`compaction` budget overlaid by `preview`.
---@return table
function M.preview_params()
  local opts = M.get()
  return vim.tbl_extend('force', {}, opts.compaction or {}, opts.preview or {})
end

return M
