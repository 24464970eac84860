-- Issue 35: team recall in Neovim. `scope=team` / `scope=team:<member>` are accepted and
-- completed; every picker (vim.ui.select, the float, snacks / telescope / fzf-lua doubles)
-- and the quickfix list show each team item's member and machine; choosing one shows its
-- stored entry (fabric/expand with the member) in a fabric://team/… buffer whose header
-- names the member and the machine where the full source lives, never a jump to the pushed
-- file (it is not on this machine). Run by test_nvim_team.py against a real PostgreSQL.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))
vim.opt.rtp:append(vim.fs.dirname(os.getenv('FABRIC_TEST_HARNESS')) .. '/fake_pickers')
local log = require('fake_pickers')

local expect = vim.json.decode(table.concat(vim.fn.readfile(vim.fs.dirname(H.agent) .. '/team-expect.json'), '\n'))
local Q = expect.query
local first = expect.first

local function label(row)
  return ('%s (%s)'):format(row.member, row.machine)
end

---The stored entry of `first` as the expansion buffer must show it.
local function check_expansion(lines, what)
  what = what or 'expansion'
  H.eq(('Team member: %s · machine: %s'):format(first.member, expect.machine), lines[1], what .. ': header')
  H.eq(('%s (%s)'):format(first.note, expect.machine), lines[2], what .. ': where the full source lives')
  H.contains(lines[2], 'the full source lives on', what)
  H.contains(lines, ('# pi-entry:%s/%s'):format(expect.items[1].sessionId, first.entry.entryId), what)
  H.contains(lines, ('source: line %d of %s on %s'):format(first.entry.line + 1, first.sessionFile, expect.machine), what)
  -- the stored (normalized) text, after the header's blank line
  local body = {}
  local at = require('fabric.match').body_start(lines)
  for i = at + 1, #lines do
    body[#body + 1] = lines[i]
  end
  H.eq(vim.split(first.entry.text, '\n', { plain = true }), body, what .. ': the stored text')
end

---The current buffer is the expansion of the first item (never the pushed file).
local function check_opened(done)
  H.eq(true, done.ok, 'recall ok: ' .. tostring(done.message))
  local name = vim.api.nvim_buf_get_name(0)
  H.truthy(vim.startswith(name, 'fabric://team/'), 'a fabric://team/ buffer: ' .. name)
  H.eq('markdown', vim.bo.filetype, 'markdown')
  check_expansion(H.lines(0))
  H.eq(nil, vim.b.fabric_session, 'no b:fabric_session (that file is not here)')
  H.eq(first.member, vim.b.fabric_team.member, 'b:fabric_team.member')
  H.eq(-1, vim.fn.bufnr('^' .. vim.fn.escape(first.sessionFile, '\\/.*$^~[]') .. '$'), 'no buffer of the pushed file')
end

local function done_after(fn)
  local before = #H.done
  fn()
  H.wait_for('FabricCommandDone', function()
    return #H.done > before
  end)
  return H.done[before + 1]
end

H.open_attached(H.session_file('01-'))
vim.fn.mkdir(vim.fs.dirname(H.agent) .. '/elsewhere', 'p')

H.check('scope=team is completed, with every member the database knows before any team answer', function()
  H.eq({ 'scope=team' }, vim.fn.getcompletion('Fabric recall scope=t', 'cmdline'), 'scope=t')
  H.contains(table.concat(vim.fn.getcompletion('Fabric recall scope=', 'cmdline'), ' '), 'scope=team', 'scope=')
  -- fabric/teamMembers: alice and bob pushed; no team answer was asked for yet
  H.eq({ 'scope=team', 'scope=team:alice@test', 'scope=team:bob@test' },
    vim.fn.getcompletion('Fabric recall scope=team', 'cmdline'), 'scope=team')
end)

local select_rec
H.check('vim.ui.select: every team row names its member and machine, in the server order', function()
  vim.g.fabric = { picker = 'select' }
  select_rec = H.pick_with(function()
    return nil
  end)
  local done = H.fabric('Fabric recall scope=team ' .. Q)
  H.eq(true, done.ok, 'ok: ' .. tostring(done.message))
  local got = {}
  for i, item in ipairs(select_rec.items) do
    if item.kind == 'entry' then
      got[#got + 1] = { member = item.member, machine = item.machine, sessionId = item.sessionId, entryId = item.entryId }
      H.truthy(vim.startswith(select_rec.formatted[i], label(item) .. '  '),
        'the line starts with the member and machine: ' .. select_rec.formatted[i])
      H.contains(select_rec.formatted[i], ('%s/%s'):format(item.sessionId:sub(1, 8), item.entryId), 'the entry')
    end
  end
  H.eq(expect.items, got, 'the rows of the team answer')
  H.truthy(vim.endswith(select_rec.prompt, ' · team'), 'the scope in the title: ' .. select_rec.prompt)
end)

H.check('scope=team:<member> is completed with the members the team answer named', function()
  H.eq({ 'scope=team:alice@test', 'scope=team:bob@test' }, vim.fn.getcompletion('Fabric recall scope=team:', 'cmdline'), 'scope=team:')
  H.eq({ 'scope=team:bob@test' }, vim.fn.getcompletion('Fabric recall scope=team:b', 'cmdline'), 'scope=team:b')
end)

H.check('vim.ui.select: choosing a team row opens its stored entry, with member and machine', function()
  vim.g.fabric = { picker = 'select' }
  H.pick_with(function(items)
    for i, item in ipairs(items) do
      if item.kind == 'entry' then
        return i
      end
    end
  end)
  check_opened(H.fabric('Fabric recall scope=team ' .. Q))
  -- the query's matches are highlighted in the entry text
  local function in_body(m)
    return m[1] >= require('fabric.match').body_start(H.lines(0))
  end
  local want = vim.tbl_filter(in_body, H.occurrences(H.lines(0), Q))
  H.truthy(#want > 0, 'the stored text has the term')
  H.eq(want, vim.tbl_filter(in_body, H.match_marks(0)), 'matches highlighted')
end)

H.check("recall.open_as = 'jsonl' still opens a team row's stored entry (no file to jump to)", function()
  vim.cmd('silent! only')
  vim.cmd.enew()
  vim.g.fabric = { picker = 'select', recall = { open_as = 'jsonl' } }
  H.pick_with(function()
    return 1
  end)
  check_opened(H.fabric('Fabric recall scope=team ' .. Q))
end)

H.check('scope=team:<member> lists that member only', function()
  vim.g.fabric = { picker = 'select' }
  local rec = H.pick_with(function()
    return nil
  end)
  H.eq(true, H.fabric('Fabric recall scope=team:bob@test ' .. Q).ok, 'ok')
  local got = {}
  for _, item in ipairs(rec.items) do
    if item.kind == 'entry' then
      got[#got + 1] = { member = item.member, machine = item.machine, sessionId = item.sessionId, entryId = item.entryId }
    end
  end
  H.eq(expect.onlyBob, got, "bob's rows")
  H.truthy(vim.endswith(rec.prompt, ' · team member bob@test'), 'title: ' .. rec.prompt)
end)

H.check('a member without sessions: a warning naming the member and the members the database knows', function()
  H.messages = {}
  H.pick_with(function()
    error('no picker without sessions')
  end)
  local done = H.fabric('Fabric recall scope=team:carol@test ' .. Q)
  H.eq(true, done.ok, 'not a failure')
  local m = H.truthy(H.notified('member carol@test has pushed no sessions'), vim.inspect(H.messages))
  H.contains(m.msg, 'alice@test, bob@test')
end)

H.check('the float: member and machine on every row; <CR> opens the stored entry', function()
  vim.cmd('silent! only')
  vim.cmd.enew()
  vim.g.fabric = { picker = 'float' }
  vim.cmd('Fabric recall scope=team ' .. Q)
  H.wait_for('the float', function()
    return #H.floats() > 0
  end)
  local lines = H.lines(vim.api.nvim_win_get_buf(H.floats()[1]))
  for i, row in ipairs(expect.items) do
    H.truthy(vim.startswith(lines[i], label(row) .. '  '), 'float line ' .. i .. ': ' .. tostring(lines[i]))
  end
  check_opened(done_after(function()
    H.feed('<CR>')
  end))
end)

for _, name in ipairs({ 'snacks', 'telescope', 'fzf-lua' }) do
  H.check(name .. ': member and machine on every row; the preview and <CR> show the stored entry', function()
    vim.cmd('silent! only')
    vim.cmd.enew()
    log.reset()
    vim.g.fabric = { picker = name }
    vim.cmd('Fabric recall scope=team ' .. Q)
    H.wait_for(name .. ' to open', function()
      local s = log.last[name]
      return s ~= nil and ((s.rendered and #s.rendered > 0) or (s.contents and #s.contents > 0))
    end)
    local session = log.last[name]
    local texts = {}
    if name == 'fzf-lua' then
      for i, line in ipairs(session.contents) do
        texts[i] = line:gsub('\27%[[%d;]*m', ''):gsub('^%d+\t', '')
      end
    else
      texts = vim.tbl_map(function(r)
        return r.text
      end, session.rendered)
    end
    if texts[#texts] and vim.startswith(texts[#texts], '… next page') then
      texts[#texts] = nil
    end
    H.eq(#expect.items, #texts, 'rows')
    for i, row in ipairs(expect.items) do
      H.truthy(vim.startswith(texts[i], label(row) .. '  '), name .. ' line ' .. i .. ': ' .. texts[i])
    end
    local function preview_buf()
      if name == 'snacks' then
        return session.preview_buf
      elseif name == 'telescope' then
        return session.preview_bufs and session.preview_bufs[1]
      end
      return session.previewer.preview_bufnr
    end
    H.wait_for(name .. ' preview of the first row', function()
      local b = preview_buf()
      return b ~= nil and vim.api.nvim_buf_is_valid(b) and vim.startswith(H.lines(b)[1] or '', 'Team member: ')
    end)
    check_expansion(H.lines(preview_buf()), name .. ' preview')
    check_opened(done_after(function()
      session:accept()
    end))
  end)
end

H.check('quickfix: member and machine in each text; :cc opens the stored entry, not a missing file', function()
  vim.cmd('silent! only')
  vim.cmd.enew()
  -- the pickers above opened the first row: start without its buffer, as a fresh list does
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.startswith(vim.api.nvim_buf_get_name(b), 'fabric://team/') then
      vim.api.nvim_buf_delete(b, { force = true })
    end
  end
  local done = H.fabric('Fabric recall! scope=team ' .. Q)
  H.eq(true, done.ok, 'ok: ' .. tostring(done.message))
  local qf = vim.fn.getqflist()
  H.eq(#expect.items, #qf, 'one item per row')
  for i, row in ipairs(expect.items) do
    H.contains(qf[i].text, label(row), 'qf text ' .. i)
    H.contains(qf[i].text, ('pi-entry:%s/%s'):format(row.sessionId, row.entryId), 'qf text ' .. i)
    local name = vim.api.nvim_buf_get_name(qf[i].bufnr)
    H.truthy(vim.startswith(name, 'fabric://team/'), 'qf item ' .. i .. ' names a fabric://team/ buffer: ' .. name)
    H.eq(1, qf[i].valid, 'valid')
  end
  H.eq(false, vim.api.nvim_buf_is_loaded(qf[1].bufnr), 'not read before the jump')
  vim.cmd('wincmd p')
  vim.cmd('cc 1')
  local buf = vim.api.nvim_get_current_buf()
  H.truthy(vim.startswith(vim.api.nvim_buf_get_name(buf), 'fabric://team/'), 'jumped to the team buffer')
  H.wait_for('the stored entry in the buffer', function()
    return vim.startswith(H.lines(buf)[1] or '', 'Team member: ')
  end)
  check_expansion(H.lines(buf), 'quickfix jump')
  H.eq('nofile', vim.bo[buf].buftype, 'a scratch buffer')
  H.eq(first.member, vim.b[buf].fabric_team.member, 'b:fabric_team')
  H.eq(-1, vim.fn.bufnr('^' .. vim.fn.escape(first.sessionFile, '\\/.*$^~[]') .. '$'), 'no buffer of the pushed file')
end)

H.check('a row whose buffer a quickfix list made (not read yet) opens from a picker, and :cc reaches it', function()
  local qf = vim.fn.getqflist()
  local second = expect.items[2]
  H.eq(false, vim.api.nvim_buf_is_loaded(qf[2].bufnr), 'row 2 not read yet')
  vim.g.fabric = { picker = 'select' }
  H.pick_with(function(items)
    for i, item in ipairs(items) do
      if item.kind == 'entry' and item.entryId == second.entryId and item.sessionId == second.sessionId then
        return i
      end
    end
  end)
  H.eq(true, H.fabric('Fabric recall scope=team ' .. Q).ok, 'ok')
  local buf = vim.api.nvim_get_current_buf()
  H.eq(qf[2].bufnr, buf, 'the buffer the quickfix list names')
  local lines = H.lines(buf)
  H.eq(('Team member: %s · machine: %s'):format(second.member, expect.machine), lines[1], 'header')
  H.contains(lines, ('# pi-entry:%s/%s'):format(second.sessionId, second.entryId), 'row 2')
  H.settle()
  H.eq(lines, H.lines(buf), 'not replaced by a late read')
  vim.cmd.enew()
  vim.cmd('cc 2')
  H.eq(buf, vim.api.nvim_get_current_buf(), ':cc 2')
  H.eq(lines, H.lines(buf), 'the same text')
end)

H.finish()
