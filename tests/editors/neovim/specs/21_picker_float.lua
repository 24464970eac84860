-- The recall picker (option `picker`): with Neovim's stock vim.ui.select, :Fabric recall shows
-- the plugin's float, one line per result with the matched terms highlighted by extmarks;
-- <CR> opens the expanded entry, j/k move, q/<Esc> close. A replaced vim.ui.select is used
-- as it is; `picker` is validated.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))
local match = require('fabric.match')
local picker = require('fabric.picker')

local s03 = H.session_file('03-')
local header = H.read_jsonl(s03)[1]
local stock_select = vim.ui.select

---Run `:Fabric recall {query}` and wait for the float; returns its window and buffer.
local function open_float(query)
  H.close_floats()
  vim.cmd.edit(vim.fn.fnameescape(s03))
  vim.cmd('Fabric recall ' .. query)
  local win
  H.wait_for('the recall float', function()
    for _, w in ipairs(H.floats()) do
      if vim.b[vim.api.nvim_win_get_buf(w)].fabric_picker == 'fabric.recall' then
        win = w
        return true
      end
    end
  end)
  return win, vim.api.nvim_win_get_buf(win)
end

H.open_attached(s03)

H.check("picker = 'nonsense' is reported with its key and the default 'auto' is used", function()
  H.messages = {}
  vim.g.fabric = { picker = 'nonsense' }
  local opts = require('fabric.config').get()
  vim.g.fabric = nil
  H.eq('auto', opts.picker, 'picker after the invalid value')
  H.truthy(H.notified(
    "vim.g.fabric.picker: expected one of 'auto', 'select', 'float', 'snacks', 'telescope', 'fzf-lua', got \"nonsense\"; using the default"
  ), 'validation message: ' .. vim.inspect(H.messages))
end)

H.check('auto: the stock vim.ui.select gives the float, a replaced one is kept, absent pickers fall back silently', function()
  H.eq(true, picker.is_stock_select(vim.ui.select), 'the stock vim.ui.select is recognised')
  H.eq('float', picker.resolve('auto'), 'auto with the stock vim.ui.select')
  H.messages = {}
  for _, name in ipairs({ 'snacks', 'telescope', 'fzf-lua' }) do
    H.eq('float', picker.resolve(name), name .. ' (not installed here)')
  end
  H.eq(0, #H.messages, 'no message for an absent picker: ' .. vim.inspect(H.messages))
  vim.cmd('checkhealth fabric')
  H.contains(H.lines(0), "recall picker: the plugin's float (vim.ui.select is Neovim's own, which cannot highlight) (picker = \"auto\")", 'checkhealth')
  vim.cmd('bwipeout')
  vim.ui.select = function() end
  H.eq(false, picker.is_stock_select(vim.ui.select), 'a replacement is not the stock one')
  H.eq('select', picker.resolve('auto'), 'auto with a replaced vim.ui.select')
  H.eq('select', picker.resolve('telescope'), 'an absent picker with a replaced vim.ui.select')
  H.eq('float', picker.resolve('float'), 'float is float')
  vim.ui.select = stock_select
end)

H.check('the float lists every result with the matched terms highlighted at their byte positions', function()
  local win, buf = open_float('rounding')
  H.eq(win, vim.api.nvim_get_current_win(), 'the float has the focus')
  local cfg = vim.api.nvim_win_get_config(win)
  H.eq('editor', cfg.relative, 'a float')
  local title = type(cfg.title) == 'table' and table.concat(vim.tbl_map(function(c)
    return c[1]
  end, cfg.title)) or tostring(cfg.title)
  H.contains(title, 'Fabric recall "rounding": ', 'title')
  local lines = H.lines(buf)
  -- the title counts the rows it shows (issue 34, finding 12)
  H.contains(title, (': %d row%s from '):format(#lines, #lines == 1 and '' or 's'), 'rows in the title')
  H.truthy(#lines >= 2, 'several results: ' .. vim.inspect(lines))
  for _, line in ipairs(lines) do
    H.truthy(vim.startswith(line, header.id:sub(1, 8) .. '/'), 'an entry of the session: ' .. line)
    H.truthy(line:lower():find('rounding', 1, true), 'the snippet shows the match: ' .. line)
    H.truthy(vim.fn.strdisplaywidth(line) <= vim.api.nvim_win_get_width(win), 'the line fits the float: ' .. line)
  end
  local want = H.occurrences(lines, 'rounding')
  H.truthy(#want >= #lines, 'a match on every line')
  H.eq(want, H.match_marks(buf), 'extmarks = the occurrences of the term')
  for _, m in ipairs(want) do
    H.eq('rounding', lines[m[1] + 1]:sub(m[2] + 1, m[3]):lower(), 'highlighted text')
  end
  H.eq({ 1, 0 }, vim.api.nvim_win_get_cursor(win), 'cursor on the first result')
  H.eq(false, vim.bo[buf].modifiable, 'read-only')
  H.feed('q')
end)

H.check('j/k move (wrapping around) and <CR> opens the expanded entry of the line', function()
  local win, buf = open_float('rounding')
  local n = vim.api.nvim_buf_line_count(buf)
  H.feed('j')
  H.eq(2, vim.api.nvim_win_get_cursor(win)[1], 'j moves down')
  H.feed('k')
  H.eq(1, vim.api.nvim_win_get_cursor(win)[1], 'k moves up')
  H.feed('k')
  H.eq(n, vim.api.nvim_win_get_cursor(win)[1], 'k on the first line wraps to the last')
  H.feed('j')
  H.eq(1, vim.api.nvim_win_get_cursor(win)[1], 'j on the last line wraps to the first')
  H.feed('j')
  local line = H.lines(buf)[2]
  local entry_id = line:match('^%x+/(%S+)')
  H.truthy(entry_id, 'entry id on the line: ' .. line)
  local before = #H.done
  H.feed('<CR>')
  H.wait_for('FabricCommandDone after <CR>', function()
    return #H.done > before
  end)
  local done = H.done[before + 1]
  H.eq(true, done.ok, 'recall ok: ' .. tostring(done.message))
  H.eq(false, vim.api.nvim_win_is_valid(win), 'the float is closed')
  H.eq(('fabric://expand/%s/%s'):format(header.id, entry_id), vim.api.nvim_buf_get_name(0), 'the expanded entry')
  H.eq(('# pi-entry:%s/%s'):format(header.id, entry_id), H.lines(0)[1], 'its heading')
  H.truthy(#vim.api.nvim_buf_get_extmarks(0, match.ns, 0, -1, {}) > 0, 'the match is highlighted there too')
end)

H.check('q and <Esc> close the float: the recall ends "dismissed"', function()
  for _, key in ipairs({ 'q', '<Esc>' }) do
    vim.cmd.edit(vim.fn.fnameescape(s03))
    local win = open_float('rounding')
    local before = #H.done
    H.feed(key)
    H.wait_for('FabricCommandDone after ' .. key, function()
      return #H.done > before
    end)
    H.eq({ command = 'recall', ok = true, message = 'dismissed' }, H.done[before + 1], key)
    H.eq(false, vim.api.nvim_win_is_valid(win), key .. ' closed the float')
    H.eq(s03, vim.api.nvim_buf_get_name(0), key .. ': back in the session buffer')
  end
end)

H.check("a replaced vim.ui.select is used; picker = 'float' shows the float anyway", function()
  vim.cmd.edit(vim.fn.fnameescape(s03))
  local rec = H.pick_with(function()
    return nil
  end)
  local done = H.fabric('Fabric recall rounding')
  H.eq('dismissed', done.message, 'dismissed')
  H.truthy(rec.items and #rec.items > 0, 'vim.ui.select got the results')
  H.eq(0, #H.floats(), 'no float')
  vim.g.fabric = { picker = 'float' }
  local win = open_float('rounding')
  H.truthy(win, 'the float, although vim.ui.select is replaced')
  local float_ids = vim.tbl_map(function(l)
    return l:match('^%x+/(%S+)')
  end, H.lines(vim.api.nvim_win_get_buf(win)))
  H.eq(vim.tbl_map(function(item)
    return item.entryId
  end, rec.items), float_ids, 'the same results as vim.ui.select got')
  local before = #H.done
  H.feed('q')
  H.wait_for('dismissed', function()
    return #H.done > before
  end)
  vim.g.fabric = nil
  vim.ui.select = stock_select
end)

H.finish()
