-- Issue 34, "irreversible actions ask first" and finding 11: `:Fabric compact` confirms with
-- vim.ui.select naming the session (its Pi name), the entries replaced and the tokens saved
-- (from the preview); cancelling leaves the file byte-identical; `compact.confirm = false`
-- skips the question; the result is shown once. A session with nothing to compact says so
-- (the server's reason) and `:Fabric status` shows what happened to the last request.
-- The server waits 10 minutes of quiet before a commit, so a request stays pending.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

vim.g.fabric = { settings = { compaction = { commitQuietMs = 600000 } } }

local function read(path)
  local fh = assert(io.open(path, 'rb'))
  local data = fh:read('*a')
  fh:close()
  return data
end

local function name_of(path)
  local name
  for _, obj in ipairs(H.read_jsonl(path)) do
    if obj.type == 'session_info' and type(obj.name) == 'string' then
      name = obj.name
    end
  end
  return name
end

local function count(needle)
  local n = 0
  for _, m in ipairs(H.messages) do
    if m.msg:find(needle, 1, true) then
      n = n + 1
    end
  end
  return n
end

local function group(n)
  local s = tostring(n)
  return (s:reverse():gsub('(%d%d%d)', '%1,'):reverse():gsub('^,', ''))
end

-- a named example session that compacts at the server's settings
local big
for _, f in ipairs(H.example_sessions()) do
  if name_of(f) then
    big = f
    break
  end
end
H.open_attached(assert(big, 'a named example session'))
local preview
require('fabric.lsp').request('fabric/compactionPreview', { session = big }, function(_, r)
  preview = r
end)
H.wait_for('preview', function()
  return preview ~= nil
end)
local original = read(big)

H.check('the confirmation names the session, the entries replaced and the tokens saved', function()
  H.eq('compacted', preview.outcome, 'outcome of ' .. big)
  local rec = H.pick_with(function()
    return nil -- cancel
  end)
  H.messages = {}
  local done = H.fabric('Fabric compact')
  H.eq(true, done.ok, 'ok')
  H.eq('fabric.confirm', rec.kind, 'kind')
  H.eq({ 'Compact now', 'Cancel' }, rec.items, 'choices')
  H.contains(rec.prompt, name_of(big), 'session name')
  H.contains(rec.prompt, preview.sessionId:sub(1, 8), 'short id')
  -- the entries the preview summarizes: its cut range, counted on the branch independently
  local budget = preview.details.budget
  local saved = preview.tokensBefore - budget.projectedTokensAfter
  H.contains(rec.prompt, ('saves about %s tokens'):format(group(saved)))
  local n = tonumber((rec.prompt:match('replaces ([%d,]+) entries') or ''):gsub(',', ''), 10)
  H.truthy(n and n > 0, 'entries replaced in: ' .. rec.prompt)
end)

H.check('cancelling leaves the file byte-identical and nothing pending', function()
  H.eq(original, read(big), 'file bytes')
  H.messages = {}
  H.eq(true, H.fabric('Fabric status').ok, 'status ok')
  local m = H.truthy(H.notified('no pending compaction'), 'status: ' .. vim.inspect(H.messages))
  H.contains(m.msg, 'last request from this editor: cancelled')
end)

H.check('confirming records the request, reported once', function()
  local rec = H.pick_with(function(items)
    return vim.fn.index(items, 'Compact now') + 1
  end)
  H.messages = {}
  H.eq(true, H.fabric('Fabric compact').ok, 'compact ok')
  H.eq('Compact now', rec.chosen, 'chosen')
  H.eq(1, count('compaction requested for'), 'one result message: ' .. vim.inspect(H.messages))
  H.contains(H.notified('compaction requested for').msg, name_of(big))
  H.messages = {}
  H.eq(true, H.fabric('Fabric status').ok, 'status ok')
  local m = H.truthy(H.notified('pending compaction requested by user'), 'pending: ' .. vim.inspect(H.messages))
  H.contains(m.msg, 'last request from this editor: requested')
  H.eq(true, H.fabric('Fabric cancel').ok, 'cancel ok')
end)

H.check('compact.confirm = false requests without asking', function()
  vim.g.fabric = { settings = { compaction = { commitQuietMs = 600000 } }, compact = { confirm = false } }
  local rec = H.pick_with(function()
    error('vim.ui.select must not be called')
  end)
  H.messages = {}
  H.eq(true, H.fabric('Fabric compact').ok, 'compact ok')
  H.eq(nil, rec.items, 'no question')
  H.eq(1, count('compaction requested for'), 'one result message')
  H.eq(true, H.fabric('Fabric cancel').ok, 'cancel ok')
  vim.g.fabric = { settings = { compaction = { commitQuietMs = 600000 } } }
end)

local small = H.session_file('01-')

H.check('nothing to compact: the reason is shown and status says so (confirming)', function()
  H.open_attached(small)
  local rec = H.pick_with(function()
    error('nothing to confirm')
  end)
  H.messages = {}
  local done = H.fabric('Fabric compact')
  H.eq(true, done.ok, 'ok')
  H.eq(nil, rec.items, 'no question')
  local m = H.truthy(H.notified('has nothing to compact'), 'message: ' .. vim.inspect(H.messages))
  H.contains(m.msg, 'Nothing to compact (session too small)')
  H.eq(vim.log.levels.WARN, m.level, 'level')
  H.messages = {}
  H.eq(true, H.fabric('Fabric status').ok, 'status ok')
  H.contains(H.messages[#H.messages].msg, 'last request from this editor: not requested')
end)

H.check("nothing to compact: the server's refusal is shown and status says so (no confirmation)", function()
  vim.g.fabric = { settings = { compaction = { commitQuietMs = 600000 } }, compact = { confirm = false } }
  H.messages = {}
  local done = H.fabric('Fabric compact')
  H.eq(true, done.ok, 'ok')
  local m = H.truthy(H.notified('was not compacted'), 'message: ' .. vim.inspect(H.messages))
  H.contains(m.msg, 'Nothing to compact (session too small)')
  H.contains(m.msg, 'ask again after more turns')
  H.eq(1, #H.messages, 'shown once: ' .. vim.inspect(H.messages))
  H.messages = {}
  H.eq(true, H.fabric('Fabric status').ok, 'status ok')
  local s = H.messages[#H.messages].msg
  H.contains(s, 'last request from this editor: refused')
  H.contains(s, 'Nothing to compact')
end)

H.finish()
