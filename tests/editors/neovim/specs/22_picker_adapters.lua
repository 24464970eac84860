-- The recall picker adapters for snacks.picker, telescope and fzf-lua (option `picker`).
--
-- The real plugins are not available on the machines these tests run on (GitHub cannot be
-- reached and no package registry here carries them), so the adapters run against test
-- doubles (tests/editors/neovim/fake_pickers) that implement only the documented API the
-- adapters call, render the lines and highlights the way the plugin would, and let the spec
-- move, accept and cancel. The server, the recall and the expand requests are real.
-- Each adapter must get the same items as the float, highlight the matched terms at their
-- byte positions, preview exactly the expanded entry that <CR> then opens, and end the
-- recall "dismissed" when cancelled.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))
vim.opt.rtp:append(vim.fs.dirname(os.getenv('FABRIC_TEST_HARNESS')) .. '/fake_pickers')
local log = require('fake_pickers')
local picker = require('fabric.picker')

local QUERY = 'rounding'
local s03 = H.session_file('03-')
local header = H.read_jsonl(s03)[1]

H.open_attached(s03)

---Start `:Fabric recall QUERY` with picker `name` and wait until that picker opened.
local function open(name)
  log.reset()
  vim.g.fabric = { picker = name }
  vim.cmd.edit(vim.fn.fnameescape(s03))
  vim.cmd('Fabric recall ' .. QUERY)
  H.wait_for(name .. ' to open', function()
    return log.last[name] ~= nil
  end)
  return log.last[name]
end

---Wait for the FabricCommandDone that `fn` causes.
local function done_after(fn)
  local before = #H.done
  fn()
  H.wait_for('FabricCommandDone', function()
    return #H.done > before
  end)
  return H.done[before + 1]
end

---Wait until buffer `buf` (or the buffer `buf()` gives) shows the expanded entry of `line`
---(a picker line); its lines and the buffer.
local function preview_of(buf, line)
  local get = type(buf) == 'function' and buf or function()
    return buf
  end
  local heading = ('# pi-entry:%s/%s'):format(header.id, assert(line:match('^%x+/(%S+)'), line))
  H.wait_for('the preview of ' .. line, function()
    local b = get()
    return b ~= nil and vim.api.nvim_buf_is_valid(b) and H.lines(b)[1] == heading
  end)
  return H.lines(get()), get()
end

---Check a preview buffer against the expanded entry <CR> opens next: same text, and the
---matched terms highlighted in it.
local function check_preview(buf, lines)
  local want = H.occurrences(lines, QUERY)
  H.truthy(#want > 0, 'the entry text has the term: ' .. table.concat(lines, '\n'))
  H.eq(want, H.match_marks(buf), 'match highlights in the preview')
end

---The entry ids of picker lines ("<session8>/<entry>  …"), in order.
local function ids(lines)
  return vim.tbl_map(function(l)
    return assert(l:match('^%x+/(%S+)'), 'an entry line: ' .. l)
  end, lines)
end

local function check_opened(done, preview_lines)
  H.eq(true, done.ok, 'recall ok: ' .. tostring(done.message))
  H.eq('markdown', vim.bo.filetype, 'the expanded entry buffer')
  H.eq(preview_lines, H.lines(0), 'the preview is exactly the expanded entry')
end

-- The reference: the float's results for the same recall; the adapters' lines (all three
-- are given the same width) are compared with each other.
local float_lines, adapter_lines
H.check('the float (reference lines for the adapters)', function()
  vim.g.fabric = { picker = 'float' }
  vim.cmd('Fabric recall ' .. QUERY)
  H.wait_for('the float', function()
    return #H.floats() > 0
  end)
  float_lines = H.lines(vim.api.nvim_win_get_buf(H.floats()[1]))
  H.truthy(#float_lines >= 2, 'several results')
  H.eq('dismissed', done_after(function()
    H.feed('q')
  end).message, 'closed')
end)

H.check("auto picks an installed picker (snacks first); picker = 'select' still means vim.ui.select", function()
  H.eq('snacks', picker.resolve('auto'), 'auto')
  H.eq('telescope', picker.resolve('telescope'), 'telescope')
  H.eq('fzf-lua', picker.resolve('fzf-lua'), 'fzf-lua')
  H.eq('select', picker.resolve('select'), 'select')
end)

H.check('snacks: same items, FabricMatch chunks, preview = the expanded entry, <CR> opens it', function()
  local session = open('snacks')
  local opts = session.opts
  H.contains(opts.title, 'Fabric recall "' .. QUERY .. '"', 'title')
  local texts = vim.tbl_map(function(r)
    return r.text
  end, session.rendered)
  H.eq(ids(float_lines), ids(texts), 'the same results as the float')
  adapter_lines = texts
  for i, r in ipairs(session.rendered) do
    H.eq(texts[i], session.items[i].text, 'item text (what snacks matches on)')
    H.truthy(#H.occurrences({ r.text }, QUERY) > 0, 'the match is in the line: ' .. r.text)
    local want = vim.tbl_map(function(o)
      return { o[2], o[3], 'FabricMatch' }
    end, H.occurrences({ r.text }, QUERY))
    H.eq(want, r.highlights, 'highlighted chunks of line ' .. i)
  end
  preview_of(session.preview_buf, texts[1])
  session:move(2)
  local lines = preview_of(session.preview_buf, texts[2])
  -- Item 3's answer arrives after the cursor went back to item 2 (cached, shown at once):
  -- it must not replace item 2's preview.
  H.truthy(#texts >= 3, 'three results')
  session:move(3)
  session:move(2)
  H.eq(lines, H.lines(session.preview_buf), 'item 2 again, from the cache')
  H.settle()
  H.eq(lines, H.lines(session.preview_buf), "item 3's late answer did not replace it")
  check_preview(session.preview_buf, lines)
  H.eq({ ft = 'markdown' }, session.preview.highlighted, 'markdown highlighting asked for')
  H.eq(('pi-entry:%s/%s'):format(header.id, ids(texts)[2]), session.preview.title, 'title')
  check_opened(done_after(function()
    session:accept()
  end), lines)
  H.eq(true, session.closed, 'picker closed')
  local again = open('snacks')
  H.eq({ command = 'recall', ok = true, message = 'dismissed' }, done_after(function()
    again:cancel()
  end), 'cancel')
end)

H.check('telescope: same entries, display highlights, buffer previewer = the expanded entry, <CR> opens it', function()
  local session = open('telescope')
  H.contains(session.spec.prompt_title, 'Fabric recall "' .. QUERY .. '"', 'prompt title')
  -- a live source (30_live_pickers.lua): the server's results, the sorter only highlights
  H.eq(true, session.spec.sorter.fake_highlighter_only, 'the highlighter-only sorter')
  local texts = vim.tbl_map(function(r)
    return r.text
  end, session.rendered)
  H.eq(adapter_lines, texts, 'the same lines as snacks')
  for i, r in ipairs(session.rendered) do
    H.eq(texts[i], session.entries[i].ordinal, 'ordinal (what telescope sorts on)')
    H.eq(session.results[i], session.entries[i].value, 'entry value = the recall item')
    local want = vim.tbl_map(function(o)
      return { { o[2], o[3] }, 'FabricMatch' }
    end, H.occurrences({ r.text }, QUERY))
    H.eq(want, r.highlights, 'display highlights of line ' .. i)
  end
  local first = preview_of(session.preview_bufs[1], texts[1])
  check_preview(session.preview_bufs[1], first)
  H.eq('markdown', vim.bo[session.preview_bufs[1]].syntax, 'markdown syntax')
  session:move(2)
  local lines = preview_of(session.preview_bufs[2], texts[2])
  check_preview(session.preview_bufs[2], lines)
  check_opened(done_after(function()
    session:accept()
  end), lines)
  H.eq(true, session.closed, 'picker closed')
  local again = open('telescope')
  H.eq({ command = 'recall', ok = true, message = 'dismissed' }, done_after(function()
    again:cancel()
  end), 'cancel')
end)

---Highlighted byte spans {start, end} of an ANSI-coloured fzf line, in the line without the
---codes, and that line.
local function ansi_spans(line)
  local plain, spans, open_at, i = {}, {}, nil, 1
  local len = 0
  while i <= #line do
    local s, e, code = line:find('^\27%[([%d;]*)m', i)
    if s then
      if code == '0' then
        spans[#spans + 1] = { open_at, len }
        open_at = nil
      else
        open_at = len
      end
      i = e + 1
    else
      plain[#plain + 1] = line:sub(i, i)
      len = len + 1
      i = i + 1
    end
  end
  return spans, table.concat(plain)
end

H.check('fzf-lua: same lines (index hidden), ANSI-coloured matches, builtin previewer = the expanded entry, <CR> opens it', function()
  local session = open('fzf-lua')
  local opts = session.opts
  H.eq('\t', opts.fzf_opts['--delimiter'], 'delimiter')
  H.eq('2..', opts.fzf_opts['--with-nth'], 'the index is hidden')
  H.eq(true, opts.fzf_opts['--ansi'], 'ANSI colours')
  H.contains(opts.winopts.title, 'Fabric recall "' .. QUERY .. '"', 'title')
  for i, line in ipairs(session.contents) do
    local spans, plain = ansi_spans(line)
    local prefix = i .. '\t'
    H.eq(prefix .. adapter_lines[i], plain, 'line ' .. i .. ' (the same as snacks)')
    local want = vim.tbl_map(function(o)
      return { #prefix + o[2], #prefix + o[3] }
    end, H.occurrences({ adapter_lines[i] }, QUERY))
    H.eq(want, spans, 'coloured spans of line ' .. i)
  end
  local function shown()
    return session.previewer.preview_bufnr
  end
  local first, buf1 = preview_of(shown, adapter_lines[1])
  check_preview(buf1, first)
  session:move(2)
  local lines, buf2 = preview_of(shown, adapter_lines[2])
  H.truthy(buf2 ~= buf1, 'a new preview buffer (set_preview_buf)')
  check_preview(buf2, lines)
  H.contains(session.win.titles[#session.win.titles], ('pi-entry:%s/'):format(header.id), 'preview title')
  check_opened(done_after(function()
    session:accept()
  end), lines)
  local again = open('fzf-lua')
  H.eq({ command = 'recall', ok = true, message = 'dismissed' }, done_after(function()
    again:cancel()
  end), 'cancel')
end)

H.check('a picker that fails falls back to the float, with one warning', function()
  local pickers = require('telescope.pickers')
  local real_new = pickers.new
  pickers.new = function()
    error('API changed')
  end
  H.messages = {}
  vim.g.fabric = { picker = 'telescope' }
  vim.cmd.edit(vim.fn.fnameescape(s03))
  vim.cmd('Fabric recall ' .. QUERY)
  H.wait_for('the float instead', function()
    return #H.floats() > 0
  end)
  pickers.new = real_new
  H.truthy(H.notified('fabric: the telescope picker failed'), 'warning: ' .. vim.inspect(H.messages))
  H.eq(float_lines, H.lines(vim.api.nvim_win_get_buf(H.floats()[1])), 'the float lines')
  H.eq('dismissed', done_after(function()
    H.feed('q')
  end).message, 'closed')
end)

H.finish()
