-- Test double of snacks.nvim (NOT the real plugin; see fake_pickers.lua). Only
-- Snacks.picker.pick(opts) with opts.items / title / format / preview / confirm / on_close,
-- or a live source (opts.live, opts.search, opts.finder(opts, ctx) returning items or a
-- function(emit), ctx.filter.search and ctx.async:suspend() / :resume()),
-- and the preview context { item, picker, preview, buf } whose preview object has
-- reset / set_lines / set_title / highlight and `item` (the item being previewed), as
-- docs/picker.md and lua/snacks/picker/core/preview.lua describe them.
local log = require('fake_pickers')

local Snacks = { picker = {} }

function Snacks.picker.pick(opts)
  assert(type(opts) == 'table', 'fake snacks: pick{…}')
  assert(type(opts.items) == 'table' or (opts.live and type(opts.finder) == 'function'),
    'fake snacks: pick{items=…} or pick{live=true, finder=…}')
  local session = { opts = opts, closed = false, rendered = {}, items = opts.items or {}, searches = {} }

  -- The list, as snacks renders format() chunks {text, hl_group?}.
  local function render()
    session.rendered = {}
    for i, item in ipairs(session.items) do
      assert(type(item.text) == 'string', 'fake snacks: items need a text field (the matcher uses it)')
      local text, highlights = '', {}
      for _, chunk in ipairs(opts.format(item, session)) do
        if chunk[2] then
          highlights[#highlights + 1] = { #text, #text + #chunk[1], chunk[2] }
        end
        text = text .. chunk[1]
      end
      session.rendered[i] = { text = text, highlights = highlights }
    end
  end

  ---A live source: run the finder for the search text the way snacks does, in a coroutine
  ---whose ctx.async can suspend (until resume) while it waits; a newer search aborts the
  ---older one (its items are dropped). `session.searching` is false once the list is in.
  local generation = 0
  local function find(search)
    generation = generation + 1
    local mine, found = generation, {}
    session.searching = true
    session.searches[#session.searches + 1] = search
    local co
    local async = {}
    function async:suspend()
      coroutine.yield()
    end
    function async:resume()
      if coroutine.status(co) == 'suspended' then
        assert(coroutine.resume(co))
      end
    end
    local ctx = { filter = { search = search }, async = async, picker = session }
    co = coroutine.create(function()
      local produce = opts.finder(opts, ctx)
      if type(produce) == 'function' then
        produce(function(item)
          found[#found + 1] = item
        end)
      else
        found = produce
      end
      if mine == generation and not session.closed then
        session.items = found
        render()
        session.searching = false
        if #found > 0 then
          session:move(1)
        end
      end
    end)
    assert(coroutine.resume(co))
  end

  -- The preview window's buffer and object.
  local buf = log.scratch()
  local preview = {}
  function preview:reset()
    vim.bo[buf].modifiable = true
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, {})
    self.title, self.highlighted = nil, nil
  end
  function preview:set_lines(lines)
    vim.bo[buf].modifiable = true
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    vim.bo[buf].modifiable = false
  end
  function preview:set_title(title)
    self.title = title
  end
  function preview:highlight(o)
    self.highlighted = o
  end
  session.preview, session.preview_buf = preview, buf

  ---Move the list cursor to item `i` (snacks shows its preview).
  function session:move(i)
    self.cursor = i
    preview.item = self.items[i]
    if opts.preview and self.items[i] then
      opts.preview({ item = self.items[i], picker = self, preview = preview, buf = buf })
    end
  end
  ---Type in the input: a live source searches again.
  function session:type(text)
    assert(opts.live, 'fake snacks: typing re-searches only a live source')
    find(text)
  end
  function session:close()
    if self.closed then
      return
    end
    self.closed = true
    if opts.on_close then
      opts.on_close(self)
    end
  end
  ---<CR> on the current item.
  function session:accept()
    opts.confirm(self, self.items[self.cursor])
  end
  ---<Esc>.
  function session:cancel()
    self:close()
  end

  log.last.snacks = session
  if opts.live then
    find(opts.search or '')
  else
    render()
    session:move(1)
  end
  return session
end

return Snacks
