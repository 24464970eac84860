-- Tiny test harness for the Fabric plugin specs, run by test_neovim.py inside real headless
-- Neovim (`nvim --headless --clean --cmd "set rtp^=editors/neovim" -l spec.lua`).
-- Every wait is bounded, so a hang fails the spec instead of stalling CI.
local H = {}

H.passed, H.failed = 0, 0
H.project = assert(os.getenv('FABRIC_TEST_PROJECT'), 'FABRIC_TEST_PROJECT not set')
H.sessions = assert(os.getenv('FABRIC_TEST_SESSIONS'), 'FABRIC_TEST_SESSIONS not set')
H.agent = assert(os.getenv('FABRIC_TEST_AGENT'), 'FABRIC_TEST_AGENT not set')
H.timeout = tonumber(os.getenv('FABRIC_TEST_TIMEOUT_MS') or '') or 30000

function H.check(name, fn)
  local ok, err = xpcall(fn, debug.traceback)
  if ok then
    H.passed = H.passed + 1
    io.stdout:write('ok - ' .. name .. '\n')
  else
    H.failed = H.failed + 1
    io.stdout:write('not ok - ' .. name .. '\n' .. tostring(err):gsub('\n', '\n    ') .. '\n')
  end
  io.stdout:flush()
end

function H.wait_for(what, pred, ms)
  if not vim.wait(ms or H.timeout, pred, 20) then
    error('timed out waiting for ' .. what, 2)
  end
end

function H.eq(expected, actual, what)
  if not vim.deep_equal(expected, actual) then
    error(('%s: expected %s, got %s'):format(what or 'value', vim.inspect(expected), vim.inspect(actual)), 2)
  end
end

function H.truthy(value, what)
  if not value then
    error((what or 'value') .. ' is ' .. tostring(value), 2)
  end
  return value
end

---Assert that `haystack` contains the plain string `needle`.
function H.contains(haystack, needle, what)
  if type(haystack) == 'table' then
    haystack = table.concat(haystack, '\n')
  end
  if not tostring(haystack):find(needle, 1, true) then
    error(('%s: %q not found in:\n%s'):format(what or 'text', needle, tostring(haystack)), 2)
  end
end

-- vim.notify, captured.
H.messages = {}
vim.notify = function(msg, level)
  H.messages[#H.messages + 1] = { msg = tostring(msg), level = level or vim.log.levels.INFO }
end

function H.notified(needle)
  for _, m in ipairs(H.messages) do
    if m.msg:find(needle, 1, true) then
      return m
    end
  end
end

-- User FabricCommandDone events, in order.
H.done = {}
vim.api.nvim_create_autocmd('User', {
  pattern = 'FabricCommandDone',
  callback = function(ev)
    H.done[#H.done + 1] = ev.data
  end,
})

---Run an Ex command (e.g. 'Fabric recall foo') and wait for its FabricCommandDone event.
---@return table data {command, ok, message}
function H.fabric(cmdline, ms)
  local before = #H.done
  vim.cmd(cmdline)
  H.wait_for('FabricCommandDone after :' .. cmdline, function()
    return #H.done > before
  end, ms)
  return H.done[before + 1]
end

---Replace vim.ui.select: record the call, choose with `chooser(items, formatted)` (an index or
---nil to dismiss). Returns the record table, filled when the picker opens.
function H.pick_with(chooser)
  local rec = {}
  vim.ui.select = function(items, opts, on_choice)
    rec.items = items
    rec.prompt = opts.prompt
    rec.kind = opts.kind
    rec.formatted = vim.tbl_map(function(item)
      return (opts.format_item or tostring)(item)
    end, items)
    local index = chooser(items, rec.formatted)
    rec.chosen = index and items[index] or nil
    vim.schedule(function()
      on_choice(rec.chosen, index)
    end)
  end
  return rec
end

function H.input_with(text)
  local rec = {}
  vim.ui.input = function(opts, on_confirm)
    rec.prompt = opts.prompt
    vim.schedule(function()
      on_confirm(text)
    end)
  end
  return rec
end

---Path of the fixture session whose file name starts with `prefix` (searched one level deep).
function H.session_file(prefix)
  local files = vim.fn.globpath(H.sessions, '*/' .. prefix .. '*.jsonl', false, true)
  table.sort(files)
  return assert(files[1], 'no fixture session ' .. prefix .. ' under ' .. H.sessions)
end

---Decoded JSON objects of a JSONL file, with their 1-based line numbers.
function H.read_jsonl(path)
  local out = {}
  local lnum = 0
  for line in io.lines(path) do
    lnum = lnum + 1
    local ok, obj = pcall(vim.json.decode, line)
    if ok then
      obj._lnum = lnum
      out[#out + 1] = obj
    end
  end
  return out
end

---The session files of the bundled example agent dir (not the 0N-… real-Pi fixtures),
---largest first.
function H.example_sessions()
  local out = {}
  for _, f in ipairs(vim.fn.globpath(H.sessions, '*/*.jsonl', false, true)) do
    if not vim.fs.basename(f):match('^0%d%-') then
      out[#out + 1] = f
    end
  end
  table.sort(out, function(a, b)
    local sa, sb = vim.fn.getfsize(a), vim.fn.getfsize(b)
    if sa ~= sb then
      return sa > sb
    end
    return a < b
  end)
  return out
end

---The first example session whose compaction preview (with `params`) is "compacted".
function H.compactable_example(params)
  for _, f in ipairs(H.example_sessions()) do
    local outcome, finished = nil, false
    require('fabric.lsp').request(
      'fabric/compactionPreview',
      vim.tbl_extend('force', params or {}, { session = f }),
      function(_, result)
        outcome = type(result) == 'table' and result.outcome or nil
        finished = true
      end
    )
    H.wait_for('preview of ' .. f, function()
      return finished
    end)
    if outcome == 'compacted' then
      return f
    end
  end
  error('no example session compacts with ' .. vim.inspect(params))
end

---The ids of the matched entries the server answers for a recall of `query` inside session
---file `session` (first page, the configured page size), in order: what a picker lists.
function H.recall_entry_ids(session, query)
  local answer
  require('fabric.lsp').request('fabric/recall', {
    scope = 'session:' .. session, page = 1, pageSize = require('fabric.config').get().recall.page_size,
    cwd = vim.fn.getcwd(), query = query,
  }, function(_, r)
    answer = r
  end)
  H.wait_for('the recall of ' .. query, function()
    return answer ~= nil
  end)
  local ids = {}
  for _, item in ipairs(answer.items) do
    for _, e in ipairs(item.segment and item.segment.entries or {}) do
      if e.matched then
        ids[#ids + 1] = e.entryId
      end
    end
  end
  return ids
end

function H.client()
  return vim.lsp.get_clients({ name = 'fabric' })[1]
end

---Edit a file and wait until the fabric client is attached to it and initialized.
function H.open_attached(path)
  vim.cmd.edit(vim.fn.fnameescape(path))
  local buf = vim.api.nvim_get_current_buf()
  H.wait_for('fabric client attached to ' .. path, function()
    local c = vim.lsp.get_clients({ name = 'fabric', bufnr = buf })[1]
    return c ~= nil and c.initialized
  end)
  return buf
end

function H.lines(buf)
  return vim.api.nvim_buf_get_lines(buf or 0, 0, -1, false)
end

---The floating windows of the current tab.
function H.floats()
  local out = {}
  for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if vim.api.nvim_win_get_config(w).relative ~= '' then
      out[#out + 1] = w
    end
  end
  return out
end

function H.close_floats()
  for _, w in ipairs(H.floats()) do
    pcall(vim.api.nvim_win_close, w, true)
  end
end

---Put the cursor on the first occurrence of `needle` in the current buffer (inside it).
function H.cursor_on(needle, offset)
  for lnum, line in ipairs(H.lines(0)) do
    local s = line:find(needle, 1, true)
    if s then
      vim.api.nvim_win_set_cursor(0, { lnum, s - 1 + (offset or 2) })
      return lnum
    end
  end
  error('not in buffer: ' .. needle, 2)
end

---Byte spans {row, start, end} (0-based) of every case-insensitive whole-word occurrence of
---`term` (letters, digits, `_`) in `lines`: what the plugin should highlight, found here
---without the plugin's code.
function H.occurrences(lines, term)
  local out = {}
  for row, line in ipairs(lines) do
    local lower, from = line:lower(), 1
    while true do
      local s, e = lower:find('%f[%w_]' .. term:lower() .. '%f[^%w_]', from)
      if not s then
        break
      end
      out[#out + 1] = { row - 1, s - 1, e }
      from = e + 1
    end
  end
  return out
end

---The plugin's match highlights in `buf` as {row, start, end}; each must be FabricMatch.
function H.match_marks(buf)
  local out = {}
  local ns = vim.api.nvim_get_namespaces().fabric_match
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
    H.eq('FabricMatch', m[4].hl_group, 'extmark group')
    out[#out + 1] = { m[2], m[3], m[4].end_col }
  end
  return out
end

---Wait until the fabric client has no request in flight (and its callbacks ran).
function H.settle(ms)
  H.wait_for('no fabric request in flight', function()
    local c = H.client()
    for _, r in pairs(c and c.requests or {}) do
      if r.type == 'pending' then
        return false
      end
    end
    return true
  end, ms)
  vim.wait(50)
end

---Type keys as the user would (mappings apply), executed before returning.
function H.feed(keys)
  vim.api.nvim_feedkeys(vim.keycode(keys), 'xt', false)
end

function H.finish()
  for _, c in ipairs(vim.lsp.get_clients()) do
    c:stop()
  end
  vim.wait(5000, function()
    for _, c in ipairs(vim.lsp.get_clients()) do
      if not c:is_stopped() then
        return false
      end
    end
    return true
  end, 20)
  io.stdout:write(('%d passed, %d failed\n'):format(H.passed, H.failed))
  io.stdout:flush()
  os.exit(H.failed == 0 and H.passed > 0 and 0 or 1)
end

return H
