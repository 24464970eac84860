-- Recall matches highlighted (extmarks) in the quickfix list and the expanded entry, snippets
-- centred on the match, and the statusline's session part.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))
local match = require('fabric.match')

local s03 = H.session_file('03-')
H.open_attached(s03)

H.check('snippets start near the match, not at the first line', function()
  local text = 'toolResult(bash) [error]: ===== test session starts =====\n' .. ('x '):rep(200) .. 'E ZeroDivisionError: float division'
  local snip = match.snippet(text, 'ZeroDivisionError', 80)
  H.truthy(snip:find('ZeroDivisionError', 1, true), 'match visible: ' .. snip)
  H.truthy(vim.startswith(snip, '…'), 'cut start marked')
  H.truthy(vim.fn.strchars(snip) <= 80, 'width')
  H.eq({ { 2, 19 } }, match.spans('E ZeroDivisionError: x', 'zerodivisionerror'), 'spans')
end)

H.check(':Fabric recall! highlights the matched terms in the quickfix list', function()
  local done = H.fabric('Fabric recall! ZeroDivisionError')
  H.eq(true, done.ok, 'ok: ' .. tostring(done.message))
  local qf = vim.fn.getqflist({ qfbufnr = 0, items = 0, context = 0 })
  H.truthy(#qf.items > 0, 'quickfix entries')
  H.eq('ZeroDivisionError', qf.context.fabric_query, 'context')
  local marks = vim.api.nvim_buf_get_extmarks(qf.qfbufnr, match.ns, 0, -1, { details = true })
  H.truthy(#marks > 0, 'extmarks in the quickfix buffer')
  for _, m in ipairs(marks) do
    local line = vim.api.nvim_buf_get_lines(qf.qfbufnr, m[2], m[2] + 1, false)[1]
    H.eq('zerodivisionerror', line:sub(m[3] + 1, m[4].end_col):lower(), 'highlighted text')
    H.eq('FabricMatch', m[4].hl_group, 'group')
  end
  vim.cmd('cclose')
end)

H.check('choosing a recall result highlights the match in the expanded entry and shows it', function()
  local rec = H.pick_with(function(_, formatted)
    for i, f in ipairs(formatted) do
      if f:find('ZeroDivisionError', 1, true) then
        return i
      end
    end
  end)
  local done = H.fabric('Fabric recall ZeroDivisionError')
  H.eq(true, done.ok, 'ok: ' .. tostring(done.message))
  H.truthy(rec.chosen, 'chosen')
  local buf = vim.api.nvim_get_current_buf()
  local marks = vim.api.nvim_buf_get_extmarks(buf, match.ns, 0, -1, { details = true })
  H.truthy(#marks > 0, 'extmarks in the expanded entry')
  local m = marks[1]
  local line = vim.api.nvim_buf_get_lines(buf, m[2], m[2] + 1, false)[1]
  H.eq('zerodivisionerror', line:sub(m[3] + 1, m[4].end_col):lower(), 'highlighted text')
  H.eq(m[2] + 1, vim.api.nvim_win_get_cursor(0)[1], 'cursor on the first match')
end)

H.check("require('fabric').status() shows the pending compaction of the session at hand", function()
  vim.cmd.edit(s03)
  local sl = require('fabric.statusline')
  sl.cache[s03] = { settled = true, pending = { requestedBy = 'user', requestedAt = '2026-11-30T04:16:09Z' },
    last = { status = 'committed', at = '2026-11-30T03:02:00Z', requestedBy = 'user', committedBy = 'pi' },
    heldBy = { pid = 4242, since = 0 } }
  local want = 'compaction pending · last committed 03:02 by Pi · live Pi 4242'
  H.eq(want, sl.line(0), 'session part')
  -- After the server's progress, if any is running ("… | " before it).
  H.truthy(vim.endswith(require('fabric').status(), want), 'status(): ' .. require('fabric').status())
  -- A real status answer replaces the cache.
  local refreshed = false
  sl.refresh(0, function() refreshed = true end)
  H.wait_for('status answer', function() return refreshed end)
  H.eq('', sl.format({ settled = true }), 'nothing to say')
  H.truthy(not require('fabric').status():find('4242'), 'the server says no live Pi')
end)

H.finish()
