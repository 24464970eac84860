-- Issue 35: the team database is down (team.url names a port nobody listens on). A team
-- recall is one error message, the server's: it names the host and says that local recall
-- keeps working (never the password); the picker does not open and the quickfix list is
-- left alone; local recall then works as before. Run by test_nvim_team.py.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

local expect = vim.json.decode(table.concat(vim.fn.readfile(vim.fs.dirname(H.agent) .. '/team-expect.json'), '\n'))
local host = ('127.0.0.1:%d'):format(expect.port)

H.open_attached(H.session_file('01-'))

---The messages of level ERROR or WARN since H.messages was last emptied.
local function loud()
  return vim.tbl_filter(function(m)
    return m.level >= vim.log.levels.WARN
  end, H.messages)
end

local function check_message(done, what)
  H.eq(false, done.ok, what .. ': a failure')
  H.contains(done.message, 'team_unavailable', what)
  H.contains(done.message, host, what .. ': the host')
  H.contains(done.message, 'local recall keeps working', what)
  H.eq(nil, done.message:find('secret-pw', 1, true), what .. ': no password')
  local msgs = loud()
  H.eq(1, #msgs, what .. ': one message: ' .. vim.inspect(H.messages))
  H.eq(vim.log.levels.ERROR, msgs[1].level, what .. ': an error')
  H.contains(msgs[1].msg, 'Fabric recall: team_unavailable', what)
  H.contains(msgs[1].msg, host, what)
end

H.check('picker: one error naming the database and that local recall keeps working', function()
  vim.g.fabric = { picker = 'select' }
  H.messages = {}
  local rec = H.pick_with(function()
    error('no picker for a failed team recall')
  end)
  check_message(H.fabric('Fabric recall scope=team test'), 'scope=team')
  H.eq(nil, rec.items, 'no picker')
  H.messages = {}
  check_message(H.fabric('Fabric recall scope=team:alice@test test'), 'scope=team:alice@test')
end)

H.check('quickfix: the same one error; the quickfix list is left as it was', function()
  vim.fn.setqflist({}, ' ', { title = 'mine', items = { { filename = H.session_file('01-'), lnum = 1, text = 'keep me' } } })
  H.messages = {}
  check_message(H.fabric('Fabric recall! scope=team test'), 'recall!')
  H.eq('mine', vim.fn.getqflist({ title = 0 }).title, 'the quickfix list untouched')
end)

H.check('local recall keeps working', function()
  vim.g.fabric = { picker = 'select' }
  H.messages = {}
  local rec = H.pick_with(function()
    return nil
  end)
  local done = H.fabric('Fabric recall scope=global test')
  H.eq(true, done.ok, 'ok: ' .. tostring(done.message))
  H.truthy(rec.items and #rec.items > 0, 'local results')
  for _, item in ipairs(rec.items) do
    H.eq(nil, item.member, 'local items have no member')
  end
  H.eq(0, #loud(), 'no message: ' .. vim.inspect(H.messages))
end)

H.finish()
