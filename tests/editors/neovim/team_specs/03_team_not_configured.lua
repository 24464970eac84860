-- Issue 35: no team.url. A team recall is one error message, the server's, naming the
-- setting to set; local recall works. Run by test_nvim_team.py.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

H.open_attached(H.session_file('01-'))

H.check('scope=team without team.url: one error naming team.url', function()
  vim.g.fabric = { picker = 'select' }
  H.messages = {}
  local rec = H.pick_with(function()
    error('no picker for a failed team recall')
  end)
  local done = H.fabric('Fabric recall scope=team test')
  H.eq(false, done.ok, 'a failure')
  H.contains(done.message, 'team_not_configured')
  H.contains(done.message, 'team.url')
  H.eq(nil, rec.items, 'no picker')
  local loud = vim.tbl_filter(function(m)
    return m.level >= vim.log.levels.WARN
  end, H.messages)
  H.eq(1, #loud, 'one message: ' .. vim.inspect(H.messages))
  H.contains(loud[1].msg, 'team.url')
end)

H.check('scope=team completes without members, quietly (no team database to ask)', function()
  H.messages = {}
  H.eq({ 'scope=team' }, vim.fn.getcompletion('Fabric recall scope=team', 'cmdline'), 'scope=team')
  H.eq({}, H.messages, 'no message while completing')
end)

H.check('local recall keeps working', function()
  local rec = H.pick_with(function()
    return nil
  end)
  H.eq(true, H.fabric('Fabric recall scope=global test').ok, 'ok')
  H.truthy(rec.items and #rec.items > 0, 'local results')
end)

H.finish()
