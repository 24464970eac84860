-- telescope.nvim for fabric.picker specs: one entry per item whose display function returns
-- the line and its FabricMatch highlights, a buffer previewer showing the expanded entry
-- (fetched from the server, then its matches highlighted), <CR> chooses.
-- Written against telescope's documented API (developers.md: pickers.new, finders.new_table
-- with an entry_maker, config.values.generic_sorter, previewers.new_buffer_previewer with
-- define_preview and self.state.bufnr, attach_mappings with actions.select_default:replace,
-- actions.close and actions.state.get_selected_entry).
local match = require('fabric.match')

local M = {}

local function modules()
  local names = {
    pickers = 'telescope.pickers',
    finders = 'telescope.finders',
    previewers = 'telescope.previewers',
    config = 'telescope.config',
    actions = 'telescope.actions',
    state = 'telescope.actions.state',
  }
  local mods = {}
  for key, name in pairs(names) do
    local ok, mod = pcall(require, name)
    if not ok or type(mod) ~= 'table' then
      return nil
    end
    mods[key] = mod
  end
  return mods
end

function M.available()
  local ok, mod = pcall(require, 'telescope.pickers')
  return ok and type(mod) == 'table' and type(mod.new) == 'function'
end

---Telescope display highlights {{start, end}, hl_group} for byte spans {start, end}.
---@param spans integer[][]
---@return table[]
function M.highlights(spans)
  local out = {}
  for _, s in ipairs(spans or {}) do
    out[#out + 1] = { { s[1], s[2] }, 'FabricMatch' }
  end
  return out
end

---@param spec table fabric.picker spec
function M.pick(spec)
  local t = assert(modules(), 'telescope is not installed')
  local opts = {}
  local chosen = false

  local previewer = spec.preview
    and t.previewers.new_buffer_previewer({
      title = 'Expanded entry',
      define_preview = function(self, entry)
        local buf = self.state.bufnr
        vim.api.nvim_buf_set_lines(buf, 0, -1, false, { 'Loading the expanded entry…' })
        spec.preview(entry.value, function(lines, spans)
          -- Telescope gives each entry its own preview buffer: fill it if it still exists.
          if not vim.api.nvim_buf_is_valid(buf) then
            return
          end
          vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
          vim.bo[buf].syntax = 'markdown'
          match.apply(buf, spans)
        end)
      end,
    })
    or nil

  local function entry_maker(item)
    local line, spans = spec.display(item, require('fabric.picker').list_width())
    return {
      value = item,
      ordinal = line,
      display = function()
        return line, M.highlights(spans)
      end,
    }
  end
  local finder, sorter
  if spec.live then
    -- Live: the prompt re-queries the server (finders.new_dynamic calls `fn` with the
    -- prompt on every change); the results are the server's, so the sorter only
    -- highlights. The initial prompt is the query the recall started with.
    local cache = { [spec.live.query] = spec.items }
    opts.default_text = spec.live.query
    finder = t.finders.new_dynamic({
      fn = function(prompt)
        prompt = prompt or ''
        if not cache[prompt] then
          local found
          spec.live.search(prompt, function(list)
            found = list
          end)
          vim.wait(require('fabric.config').get().timeout_ms, function()
            return found ~= nil
          end, 10)
          cache[prompt] = found or {}
        end
        return cache[prompt]
      end,
      entry_maker = entry_maker,
    })
    local ok, sorters = pcall(require, 'telescope.sorters')
    sorter = ok and type(sorters.highlighter_only) == 'function' and sorters.highlighter_only(opts)
      or t.config.values.generic_sorter(opts)
  else
    finder = t.finders.new_table({ results = spec.items, entry_maker = entry_maker })
    sorter = t.config.values.generic_sorter(opts)
  end

  t.pickers
    .new(opts, {
      prompt_title = spec.prompt,
      finder = finder,
      sorter = sorter,
      previewer = previewer,
      attach_mappings = function(prompt_bufnr)
        t.actions.select_default:replace(function()
          local entry = t.state.get_selected_entry()
          chosen = true
          t.actions.close(prompt_bufnr)
          vim.schedule(function()
            spec.on_choice(entry and entry.value or nil)
          end)
        end)
        t.actions.close:enhance({
          post = function()
            if not chosen then
              vim.schedule(function()
                spec.on_choice(nil)
              end)
            end
          end,
        })
        return true
      end,
    })
    :find()
end

return M
