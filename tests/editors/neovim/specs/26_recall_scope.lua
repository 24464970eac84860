-- Issue 34, finding 10: a recall where the scope has no sessions names the scope and what the
-- global scope holds, with the command that searches it; `scope=` chooses the scope in the
-- command, with completion. Finding 12: the picker's title counts the rows it shows.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

local empty = vim.fn.tempname()
vim.fn.mkdir(empty, 'p')
local all_sessions = #vim.fn.globpath(H.sessions, '*/*.jsonl', false, true)

H.open_attached(H.session_file('01-'))
vim.cmd.enew()
vim.cmd.cd(vim.fn.fnameescape(empty))

H.check('no sessions in the project: the message names the scope, the global count and the command', function()
  H.messages = {}
  local rec = H.pick_with(function()
    error('no picker for an empty scope')
  end)
  local done = H.fabric('Fabric recall rounding')
  H.eq(true, done.ok, 'ok')
  H.eq(nil, rec.items, 'no picker')
  local m = H.truthy(H.notified('no sessions in scope project'), 'message: ' .. vim.inspect(H.messages))
  H.contains(m.msg, vim.fn.fnamemodify(empty, ':~'), 'the project named')
  H.contains(m.msg, ('the global scope has %d sessions'):format(all_sessions))
  H.contains(m.msg, ':Fabric recall scope=global rounding')
end)

H.check('scope=global in the command searches every session; the title counts its rows', function()
  local rec = H.pick_with(function()
    return nil
  end)
  local done = H.fabric('Fabric recall scope=global rounding')
  H.eq(true, done.ok, 'ok: ' .. tostring(done.message))
  H.truthy(rec.items and #rec.items > 0, 'results')
  local rows = 0
  for _, item in ipairs(rec.items) do
    if item.kind ~= 'next' then
      rows = rows + 1
    end
  end
  H.contains(rec.prompt, 'Fabric recall "rounding": ' .. rows .. ' row', 'title: ' .. rec.prompt)
  H.truthy(vim.endswith(rec.prompt, ' · global'), 'the scope in the title: ' .. rec.prompt)
  -- the query is the words around scope=, as typed
  local rec2 = H.pick_with(function()
    return nil
  end)
  H.eq(true, H.fabric('Fabric recall rounding scope=global').ok, 'scope after the query')
  H.eq(rec.prompt, rec2.prompt, 'same search')
end)

H.check('scope=project names its project, and scope=session:<path> searches that session', function()
  vim.cmd.cd(vim.fn.fnameescape(H.project))
  local rec = H.pick_with(function()
    return nil
  end)
  H.eq(true, H.fabric('Fabric recall scope=session:' .. H.session_file('03-') .. ' rounding').ok, 'ok')
  for _, item in ipairs(rec.items) do
    if item.kind == 'entry' then
      H.eq(H.session_file('03-'), item.sessionFile, 'only that session')
    end
  end
end)

H.check('an unknown scope is an error naming the valid ones', function()
  H.messages = {}
  local done = H.fabric('Fabric recall scope=everywhere rounding')
  H.eq(false, done.ok, 'fails')
  H.contains(done.message, 'unknown scope "everywhere"')
  H.contains(done.message, 'scope=global')
  H.contains(done.message, 'scope=team:<member>')
end)

H.check(':Fabric recall completes scope=', function()
  H.eq({ 'scope=global', 'scope=project', 'scope=session', 'scope=team' },
    vim.fn.getcompletion('Fabric recall scope=', 'cmdline'), 'after scope=')
  H.eq({ 'scope=global' }, vim.fn.getcompletion('Fabric recall scope=g', 'cmdline'), 'scope=g')
  H.eq({ 'scope=global', 'scope=project', 'scope=session', 'scope=team' },
    vim.fn.getcompletion('Fabric recall! sc', 'cmdline'), 'with a bang')
  -- the team database (test_nvim_team.py has the members)
  H.eq({ 'scope=team' }, vim.fn.getcompletion('Fabric recall scope=te', 'cmdline'), 'scope=te')
end)

H.finish()
