-- Issue 34, finding 12 with the plugin's own float (what a Neovim without snacks, telescope
-- or fzf-lua shows): `/` in the recall list opens a search prompt above it holding the query;
-- typing runs the recall again for the typed text (the same scope) and redraws the list in
-- place with the server's answer; <CR> opens the row under the list's cursor with the new
-- query's matches; <Esc> goes back to the list. Real Neovim, real server.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

local s03 = H.session_file('03-')
H.open_attached(s03)

local function float_of(kind)
  for _, w in ipairs(H.floats()) do
    local b = vim.api.nvim_win_get_buf(w)
    if vim.b[b].fabric_picker == kind or vim.b[b].fabric_picker_prompt == kind then
      return w, b
    end
  end
end

local function title(win)
  local t = vim.api.nvim_win_get_config(win).title
  return type(t) == 'table' and table.concat(vim.tbl_map(function(c)
    return c[1]
  end, t)) or tostring(t)
end

---The entry ids the server answers for `query` in session 03, in order.
local function server_ids(query)
  return H.recall_entry_ids(s03, query)
end

local list_win, list_buf
H.check('/ opens a search prompt holding the query, above the list', function()
  vim.cmd('Fabric recall rounding')
  H.wait_for('the recall float', function()
    list_win, list_buf = float_of('fabric.recall')
    return list_win ~= nil
  end)
  H.contains(vim.inspect(vim.api.nvim_win_get_config(list_win).footer), '/ search', 'the footer names the key')
  H.feed('/')
  local pwin, pbuf = float_of('fabric.recall')
  H.wait_for('the prompt', function()
    for _, w in ipairs(H.floats()) do
      if vim.b[vim.api.nvim_win_get_buf(w)].fabric_picker_prompt then
        pwin, pbuf = w, vim.api.nvim_win_get_buf(w)
        return true
      end
    end
  end)
  H.eq(pwin, vim.api.nvim_get_current_win(), 'the prompt has the focus')
  H.eq({ 'rounding' }, H.lines(pbuf), 'the query in the prompt')
  H.truthy(vim.api.nvim_win_get_config(pwin).row < vim.api.nvim_win_get_config(list_win).row, 'above the list')
end)

H.check('typing searches again and redraws the list in place', function()
  local want = server_ids('division')
  H.truthy(#want >= 2, 'the server has several matches for the typed text: ' .. #want)
  -- (H.feed ends Insert mode once the keys are typed, as <Esc> would, without mappings:
  -- the prompt keeps the focus, in Normal mode, where its keys work as well)
  H.feed('ccdivision')
  H.wait_for('the list for the typed text', function()
    return vim.api.nvim_win_is_valid(list_win) and title(list_win):find('division', 1, true) ~= nil
  end)
  local ids = vim.tbl_map(function(l)
    return assert(l:match('^%x+/(%S+)'), 'an entry line: ' .. l)
  end, H.lines(list_buf))
  H.eq(want, ids, 'the rows are the server answer for the typed text, in order')
  H.truthy(#H.match_marks(list_buf) >= #ids, 'the typed word highlighted in the rows')
end)

H.check('<Down> moves the list cursor; <CR> opens that row with the typed matches', function()
  H.feed('<Down>')
  H.eq(2, vim.api.nvim_win_get_cursor(list_win)[1], 'the list cursor moved')
  local before = #H.done
  H.feed('<CR>')
  H.wait_for('the entry opened', function()
    return #H.done > before
  end)
  H.eq(0, #H.floats(), 'the list and the prompt are closed')
  H.contains(H.lines(0), 'division', 'the expanded entry shows the typed match')
  H.eq('n', vim.api.nvim_get_mode().mode, 'back in Normal mode')
end)

H.check('<Esc> goes back to the list; q closes it', function()
  vim.cmd.edit(vim.fn.fnameescape(s03))
  vim.cmd('Fabric recall rounding')
  H.wait_for('the recall float', function()
    list_win, list_buf = float_of('fabric.recall')
    return list_win ~= nil
  end)
  H.feed('/')
  H.feed('<Esc>')
  H.wait_for('the list focused again', function()
    return vim.api.nvim_get_current_win() == list_win
  end)
  H.eq(1, #H.floats(), 'the prompt is closed, the list stays')
  H.feed('q')
  H.wait_for('the list closed', function()
    return #H.floats() == 0
  end)
end)

H.finish()
