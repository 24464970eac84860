-- Issue 34, finding 12: snacks.picker, telescope and fzf-lua are live sources: typing in the
-- picker runs the recall again for the typed text (the same scope), and the list shows the
-- server's answer for it; choosing a row opens it with the new query's matches. Run against
-- the test doubles of the three pickers (see 22_picker_adapters.lua) and the real server.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))
vim.opt.rtp:append(vim.fs.dirname(os.getenv('FABRIC_TEST_HARNESS')) .. '/fake_pickers')
local log = require('fake_pickers')

local FIRST, TYPED = 'rounding', 'ZeroDivisionError'
local s03 = H.session_file('03-')
local header = H.read_jsonl(s03)[1]
H.open_attached(s03)

---The entry ids the server answers for a recall of `query` in session 03 (what the picker
---must list after the query is typed), in order.
local function server_ids(query)
  return H.recall_entry_ids(s03, query)
end

local function line_ids(lines)
  return vim.tbl_map(function(l)
    return assert(l:match('^%x+/(%S+)'), 'an entry line: ' .. l)
  end, lines)
end

local function open(name)
  log.reset()
  vim.g.fabric = { picker = name }
  vim.cmd.edit(vim.fn.fnameescape(s03))
  vim.cmd('Fabric recall ' .. FIRST)
  H.wait_for(name .. ' to open', function()
    return log.last[name] ~= nil
  end)
  return log.last[name]
end

local function accept_opens(session, typed_ids)
  local before = #H.done
  session:accept()
  H.wait_for('the entry opened', function()
    return #H.done > before
  end)
  H.eq(true, H.done[before + 1].ok, 'opened: ' .. tostring(H.done[before + 1].message))
  H.eq(('# pi-entry:%s/%s'):format(header.id, typed_ids[1]), H.lines(0)[1], 'the first row of the typed query')
  -- the expanded entry highlights the typed query's matches
  H.truthy(#H.match_marks(0) > 0 and #H.occurrences(H.lines(0), TYPED) > 0, 'matches of ' .. TYPED)
end

local first_ids, typed_ids
H.check('the two queries answer different entries', function()
  first_ids, typed_ids = server_ids(FIRST), server_ids(TYPED)
  H.truthy(#first_ids > 0 and #typed_ids > 0, 'both match')
  H.truthy(not vim.deep_equal(first_ids, typed_ids), 'different answers')
end)

H.check('snacks: typing searches the server again and lists its answer', function()
  local session = open('snacks')
  H.eq(true, session.opts.live, 'a live source')
  H.eq(FIRST, session.opts.search, 'the first search text')
  H.eq(first_ids, line_ids(vim.tbl_map(function(r) return r.text end, session.rendered)), 'first answer')
  session:type(TYPED)
  H.wait_for('the typed search', function()
    return session.searching == false and session.searches[#session.searches] == TYPED
  end)
  H.eq(typed_ids, line_ids(vim.tbl_map(function(r) return r.text end, session.rendered)), 'the typed answer')
  for _, r in ipairs(session.rendered) do
    H.truthy(#r.highlights > 0, 'the new term highlighted: ' .. r.text)
  end
  accept_opens(session, typed_ids)
end)

H.check('telescope: the prompt re-runs the recall (dynamic finder)', function()
  local session = open('telescope')
  H.eq(FIRST, session.opts.default_text, 'the prompt starts with the query')
  H.eq(first_ids, line_ids(vim.tbl_map(function(r) return r.text end, session.rendered)), 'first answer')
  session:type(TYPED)
  H.eq(typed_ids, line_ids(vim.tbl_map(function(r) return r.text end, session.rendered)), 'the typed answer')
  accept_opens(session, typed_ids)
end)

H.check('fzf-lua: fzf_live runs the recall for the typed query', function()
  local session = open('fzf-lua')
  H.eq(FIRST, session.opts.query, 'the first query')
  local function ids()
    return line_ids(vim.tbl_map(function(l)
      return require('fzf-lua').strip_ansi(l):match('^%d+\t(.*)$')
    end, session.contents))
  end
  H.eq(first_ids, ids(), 'first answer')
  session:type(TYPED)
  H.wait_for('the typed query', function()
    return session.loading == false and session.queries[#session.queries] == TYPED
  end)
  H.eq(typed_ids, ids(), 'the typed answer')
  accept_opens(session, typed_ids)
end)

H.finish()
