-- :Fabric recall: the picker (vim.ui.select), choosing an entry (expanded scratch buffer or the
-- JSONL at its line), :Fabric recall! (quickfix), the query prompt, progress events.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

local s03 = H.session_file('03-')
local by_id = {}
for _, obj in ipairs(H.read_jsonl(s03)) do
  if obj.id then
    by_id[obj.id] = obj
  end
end
local header = H.read_jsonl(s03)[1]

-- Progress of the fabric client, as LspProgress sees it.
local progress = {}
vim.api.nvim_create_autocmd('LspProgress', {
  callback = function(ev)
    local c = vim.lsp.get_client_by_id(ev.data.client_id)
    if c and c.name == 'fabric' then
      -- The plugin's own LspProgress handler ran first (it was registered at startup), so
      -- the statusline function already reflects this event.
      progress[#progress + 1] = {
        token = ev.data.params.token,
        kind = ev.data.params.value.kind,
        status = require('fabric').status(),
      }
    end
  end,
})

H.open_attached(s03)

H.check('recall in a session buffer: picker lists matched entries; choosing one expands it', function()
  local rec = H.pick_with(function(_, formatted)
    for i, f in ipairs(formatted) do
      if f:find('ZeroDivisionError', 1, true) then
        return i
      end
    end
  end)
  local done = H.fabric('Fabric recall ZeroDivisionError')
  H.eq(true, done.ok, 'recall ok: ' .. tostring(done.message))
  H.eq('fabric.recall', rec.kind, 'picker kind')
  H.contains(rec.prompt, 'Fabric recall "ZeroDivisionError"')
  local chosen = H.truthy(rec.chosen, 'an entry mentioning ZeroDivisionError')
  H.eq('entry', chosen.kind, 'kind')
  H.eq(header.id, chosen.sessionId, 'sessionId')
  H.eq(s03, chosen.sessionFile, 'sessionFile')
  H.eq(by_id[chosen.entryId]._lnum - 1, chosen.line, 'line of the entry')
  -- The scratch buffer with the expanded entry.
  local name = vim.api.nvim_buf_get_name(0)
  H.eq(('fabric://expand/%s/%s'):format(header.id, chosen.entryId), name, 'scratch buffer name')
  H.eq('markdown', vim.bo.filetype, 'filetype')
  H.eq('nofile', vim.bo.buftype, 'buftype')
  local lines = H.lines(0)
  H.eq(('# pi-entry:%s/%s'):format(header.id, chosen.entryId), lines[1], 'heading')
  -- one meaning per number: the JSONL line, and the entry index labelled as such
  H.contains(lines[2], ('line %d (entry index %d)'):format(chosen.line + 1, chosen.index), 'line and entry index')
  H.contains(lines, ('%s:%d'):format(s03, chosen.line + 1), 'file:line')
  H.contains(lines, 'ZeroDivisionError')
  H.eq(s03, vim.b.fabric_session, 'b:fabric_session')
  -- an underscore inside a word (the session file's `…Z_01…`) is text, not a Markdown error
  local lnum = H.truthy(vim.fn.search([[\w_\w]], 'nw'), 'a line with an underscore inside a word')
  local col = vim.fn.getline(lnum):find('%w_%w') + 1
  H.truthy(vim.fn.synIDattr(vim.fn.synID(lnum, col, 1), 'name') ~= 'markdownError', 'no markdownError on the underscore')
end)

H.check('recall shows progress: begin … end on one token', function()
  H.truthy(#progress > 0, 'progress events')
  H.wait_for('progress end', function()
    return progress[#progress].kind == 'end'
  end, 10000)
  local kinds = {}
  local token = progress[1].token
  for _, p in ipairs(progress) do
    if p.token == token then
      kinds[#kinds + 1] = p.kind
    end
  end
  H.eq('begin', kinds[1], 'first kind')
  H.eq('end', kinds[#kinds], 'last kind')
  local ends = 0
  for _, k in ipairs(kinds) do
    ends = ends + (k == 'end' and 1 or 0)
  end
  H.eq(1, ends, 'exactly one end')
  H.truthy(vim.startswith(progress[1].status, 'Fabric: '), 'statusline during begin: ' .. progress[1].status)
  H.eq('', require('fabric').status(), 'status line is idle afterwards')
end)

H.check('progress = "notify" sends begin and end through vim.notify', function()
  vim.g.fabric = { progress = 'notify' }
  vim.cmd.edit(vim.fn.fnameescape(s03))
  H.messages = {}
  H.pick_with(function()
    return nil
  end)
  H.eq(true, H.fabric('Fabric recall calc').ok, 'recall ok')
  local function count()
    return #vim.tbl_filter(function(m)
      return vim.startswith(m.msg, 'Fabric')
    end, H.messages)
  end
  -- The end may arrive just after the response.
  local ok = vim.wait(10000, function()
    return count() >= 2
  end, 20)
  vim.g.fabric = nil
  H.truthy(ok, 'begin and end notified: ' .. vim.inspect(H.messages))
end)

H.check('recall with open_as = "jsonl" jumps to the entry line in the session file', function()
  vim.g.fabric = { recall = { open_as = 'jsonl' } }
  vim.cmd.edit(vim.fn.fnameescape(s03))
  local rec = H.pick_with(function()
    return 1
  end)
  local done = H.fabric('Fabric recall rounding')
  vim.g.fabric = nil
  H.eq(true, done.ok, 'recall ok: ' .. tostring(done.message))
  local chosen = H.truthy(rec.chosen, 'chosen')
  H.eq(chosen.sessionFile, vim.api.nvim_buf_get_name(0), 'buffer')
  H.eq(chosen.line + 1, vim.api.nvim_win_get_cursor(0)[1], 'cursor line')
  local entry = vim.json.decode(vim.api.nvim_get_current_line())
  H.eq(chosen.entryId, entry.id, 'entry on the cursor line')
end)

H.check('recall! fills the quickfix list with file:line items', function()
  vim.cmd.edit(vim.fn.fnameescape(s03))
  local done = H.fabric('Fabric recall! rounding')
  H.eq(true, done.ok, 'recall! ok: ' .. tostring(done.message))
  local qf = vim.fn.getqflist({ title = 1, items = 1 })
  H.eq('Fabric recall: rounding', qf.title, 'title')
  H.truthy(#qf.items > 0, 'quickfix items')
  for _, item in ipairs(qf.items) do
    H.eq(s03, vim.api.nvim_buf_get_name(item.bufnr), 'item file')
    local obj = H.read_jsonl(s03)[item.lnum]
    H.contains(item.text, ('pi-entry:%s/'):format(header.id))
  end
  H.eq('quickfix', vim.bo.buftype, 'quickfix window opened')
  vim.cmd('cclose')
end)

H.check('the bang may also go on the command: :Fabric! recall', function()
  vim.fn.setqflist({}, 'r', { title = 'cleared', items = {} })
  local done = H.fabric('Fabric! recall rounding')
  H.eq(true, done.ok, 'ok')
  H.eq('Fabric recall: rounding', vim.fn.getqflist({ title = 1 }).title, 'title')
  vim.cmd('cclose')
end)

H.check('recall with no query asks for one', function()
  vim.cmd.edit(vim.fn.fnameescape(s03))
  local input = H.input_with('CHANGELOG')
  local rec = H.pick_with(function()
    return nil -- dismiss
  end)
  local done = H.fabric('Fabric recall')
  H.eq('Fabric recall: ', input.prompt, 'input prompt')
  H.eq(true, done.ok, 'ok')
  H.eq('dismissed', done.message, 'dismissed')
  H.truthy(#rec.items > 0, 'items for CHANGELOG')
  H.contains(rec.formatted[1], header.id:sub(1, 8))
end)

H.check('recall from a non-session buffer searches the project', function()
  vim.cmd.enew()
  local rec = H.pick_with(function()
    return nil
  end)
  local done = H.fabric('Fabric recall calc')
  H.eq(true, done.ok, 'ok: ' .. tostring(done.message))
  local sessions = {}
  for _, item in ipairs(rec.items) do
    if item.sessionId then
      sessions[item.sessionFile] = true
    end
  end
  for file in pairs(sessions) do
    H.contains(file, vim.fs.basename(vim.fs.dirname(s03)), 'project session dir')
  end
  H.truthy(next(sessions), 'project sessions found')
end)

H.check('a query with no match is reported, not an empty picker', function()
  vim.cmd.edit(vim.fn.fnameescape(s03))
  H.messages = {}
  local opened = false
  vim.ui.select = function()
    opened = true
  end
  local done = H.fabric('Fabric recall zzzqqqxxyyznotthere')
  H.eq(true, done.ok, 'ok')
  H.eq(false, opened, 'picker opened')
  H.truthy(H.notified('no matches for "zzzqqqxxyyznotthere"'), 'no-match message')
end)

H.check('recall /pattern/ searches with a regular expression', function()
  vim.cmd.edit(vim.fn.fnameescape(s03))
  local rec = H.pick_with(function()
    return nil
  end)
  local done = H.fabric([[Fabric recall /Zero\w+Error/]])
  H.eq(true, done.ok, 'ok: ' .. tostring(done.message))
  H.truthy(rec.items and #rec.items > 0, 'regex matches')
  H.contains(rec.items[1].text, 'ZeroDivisionError')
end)

H.check('an invalid regular expression fails with the server reason', function()
  H.messages = {}
  local opened = false
  vim.ui.select = function()
    opened = true
  end
  local done = H.fabric('Fabric recall /Zero[/')
  H.eq(false, done.ok, 'ok')
  H.eq(false, opened, 'picker opened')
  H.contains(done.message, 'invalid_regex')
  H.truthy(H.notified('Fabric recall: invalid_regex'), 'notified')
end)

H.finish()
