-- Test double of telescope.nvim (NOT the real plugin; see fake_pickers.lua): pickers.new(opts,
-- spec):find() with opts.default_text, spec.prompt_title / finder (finders.new_table, or
-- finders.new_dynamic: run again by picker:type(prompt)) / sorter / previewer
-- (previewers.new_buffer_previewer) / attach_mappings, shaped after developers.md. It makes
-- the entries with the finder's entry_maker, resolves each display the way telescope's
-- entry_display.resolve does (entry:display(picker) -> string, {{{start, end}, hl}, …}),
-- gives each previewed entry its own preview buffer (self.state.bufnr) and drives
-- actions.select_default / actions.close like telescope's <CR> / <Esc>.
local log = require('fake_pickers')

local M = {}

M.current = nil

function M.new(opts, spec)
  -- Like telescope's Picker:new, reset replaced / enhanced actions.
  require('telescope.actions')._clear()
  local picker = { opts = opts, spec = spec, entries = {}, rendered = {}, closed = false }

  ---The results for the prompt: a table finder's list, or a dynamic finder's fn(prompt).
  local function results(prompt)
    if spec.finder.dynamic then
      picker.prompts[#picker.prompts + 1] = prompt
      return spec.finder.fn(prompt)
    end
    return spec.finder.results
  end
  picker.prompts = {}

  local function make(list)
    picker.entries, picker.rendered, picker.results = {}, {}, list
    for i, result in ipairs(list) do
      local entry = spec.finder.entry_maker(result)
      assert(entry.value ~= nil and entry.ordinal ~= nil and entry.display ~= nil,
        'fake telescope: entries need value, ordinal and display')
      picker.entries[i] = entry
      local text, highlights = entry.display, {}
      if type(entry.display) == 'function' then
        text, highlights = entry:display(picker)
      end
      picker.rendered[i] = { text = text, highlights = highlights or {} }
    end
  end

  ---Type in the prompt: a dynamic finder runs again.
  function picker:type(prompt)
    assert(spec.finder.dynamic, 'fake telescope: typing re-runs only a dynamic finder')
    make(results(prompt))
    if #self.entries > 0 then
      self:move(1)
    end
  end

  function picker:find()
    make(results(opts.default_text or ''))
    self.prompt_bufnr = log.scratch()
    M.current = self
    if spec.attach_mappings then
      assert(spec.attach_mappings(self.prompt_bufnr, function() end) == true,
        'fake telescope: attach_mappings must return true to keep the default mappings')
    end
    log.last.telescope = self
    self:move(1)
  end

  ---Move the selection to entry `i`: its preview gets a new buffer, as telescope's do.
  function picker:move(i)
    self.selection = i
    local previewer = spec.previewer
    if previewer then
      previewer.state = { bufnr = log.scratch(), winid = nil }
      self.preview_bufs = self.preview_bufs or {}
      self.preview_bufs[i] = previewer.state.bufnr
      previewer.define_preview(previewer, self.entries[i], { picker = self })
    end
  end
  function picker:accept()
    require('telescope.actions').select_default(self.prompt_bufnr)
  end
  function picker:cancel()
    require('telescope.actions').close(self.prompt_bufnr)
  end
  return picker
end

return M
