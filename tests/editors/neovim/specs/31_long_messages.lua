-- Issue 34, finding 15: long messages must not ask "Press ENTER". With Neovim's own
-- vim.notify, a message of several lines or wider than the echo area is shown whole in a
-- float that closes when the cursor moves, and echoed as one line that fits.
local stock_notify = vim.notify -- before the harness replaces it
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))
vim.notify = stock_notify

local s03 = H.session_file('03-')
H.open_attached(s03)

local function last_message()
  local lines = vim.split(vim.trim(vim.fn.execute('messages')), '\n')
  return lines[#lines]
end

H.check(':Fabric status (several lines) opens a float and echoes one line that fits', function()
  H.close_floats()
  local done = H.fabric('Fabric status')
  H.eq(true, done.ok, 'ok')
  local floats = H.floats()
  H.eq(1, #floats, 'one float')
  local text = table.concat(H.lines(vim.api.nvim_win_get_buf(floats[1])), '\n')
  H.contains(text, 'no pending compaction')
  H.contains(text, 'Fabric: ')
  local echoed = last_message()
  H.truthy(vim.fn.strdisplaywidth(echoed) < vim.v.echospace, 'fits the echo area: ' .. echoed)
  H.truthy(not echoed:find('\n'), 'one line')
  H.contains(echoed, '(more in the float)')
  -- moving the cursor closes it
  -- (headless Neovim fires CursorMoved from its main loop, which a spec does not reach
  -- between keys: move, then fire the event the loop would)
  vim.api.nvim_win_set_cursor(0, { 2, 0 })
  vim.api.nvim_exec_autocmds('CursorMoved', { buffer = 0 })
  H.wait_for('the float closed', function()
    return #H.floats() == 0
  end)
end)

H.check('a short message is echoed as it is, no float', function()
  H.close_floats()
  require('fabric.ui').notify('Fabric: short')
  H.eq(0, #H.floats(), 'no float')
  H.eq('Fabric: short', last_message(), 'echoed')
end)

H.check('paths under $HOME are written ~/…', function()
  require('fabric.ui').notify('Fabric: ' .. vim.uv.os_homedir() .. '/x.jsonl')
  H.eq('Fabric: ~/x.jsonl', last_message(), 'shortened')
end)

H.finish()
