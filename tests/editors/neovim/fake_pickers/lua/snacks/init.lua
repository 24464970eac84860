-- Test double of snacks.nvim (NOT the real plugin; see fake_pickers.lua). Only
-- Snacks.picker.pick(opts) with opts.items / title / format / preview / confirm / on_close,
-- and the preview context { item, picker, preview, buf } whose preview object has
-- reset / set_lines / set_title / highlight and `item` (the item being previewed), as
-- docs/picker.md and lua/snacks/picker/core/preview.lua describe them.
local log = require('fake_pickers')

local Snacks = { picker = {} }

function Snacks.picker.pick(opts)
  assert(type(opts) == 'table' and type(opts.items) == 'table', 'fake snacks: pick{items=…}')
  local session = { opts = opts, closed = false, rendered = {} }

  -- The list, as snacks renders format() chunks {text, hl_group?}.
  for i, item in ipairs(opts.items) do
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
    preview.item = opts.items[i]
    if opts.preview then
      opts.preview({ item = opts.items[i], picker = self, preview = preview, buf = buf })
    end
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
    opts.confirm(self, opts.items[self.cursor])
  end
  ---<Esc>.
  function session:cancel()
    self:close()
  end

  log.last.snacks = session
  session:move(1)
  return session
end

return Snacks
