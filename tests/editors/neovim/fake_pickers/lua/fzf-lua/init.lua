-- Test double of fzf-lua (NOT the real plugin; see fake_pickers.lua): fzf_exec(contents, opts)
-- with a list of lines (ANSI colours allowed with --ansi), opts.prompt / fzf_opts / actions
-- (the 'default' action gets the selected lines) / winopts.on_close / previewer (a class
-- extending fzf-lua.previewer.builtin's base, instantiated by calling it, as fzf-lua's class
-- library does). Like fzf-lua, accepting closes the window (on_close) and then runs the
-- action; the selected lines are the original lines with the ANSI codes removed.
local log = require('fake_pickers')

local M = {}

---`line` without ANSI colour codes (what fzf --ansi prints for a selected line).
function M.strip_ansi(line)
  return (line:gsub('\27%[[%d;]*m', ''))
end

function M.fzf_exec(contents, opts)
  assert(type(contents) == 'table', 'fake fzf-lua: contents must be a list of lines here')
  opts = opts or {}
  local session = { contents = contents, opts = opts, closed = false }
  -- The preview window of fzf-lua's builtin previewer.
  local win = { titles = {} }
  function win:validate_preview()
    return not session.closed
  end
  function win:update_preview_title(title)
    self.titles[#self.titles + 1] = title
  end
  session.win = win
  if opts.previewer then
    session.previewer = opts.previewer({}, opts, win)
  end
  local function close()
    session.closed = true
    if opts.winopts and opts.winopts.on_close then
      opts.winopts.on_close()
    end
  end
  ---Move the fzf cursor to line `i`: the builtin previewer gets that line.
  function session:move(i)
    self.cursor = i
    if self.previewer then
      self.previewer:populate_preview_buf(M.strip_ansi(self.contents[i]))
    end
  end
  function session:accept()
    close()
    local action = opts.actions and opts.actions.default
    if type(action) == 'table' then
      action = action.fn or action[1]
    end
    action({ M.strip_ansi(self.contents[self.cursor]) }, opts)
  end
  function session:cancel()
    close()
  end
  log.last['fzf-lua'] = session
  if #contents > 0 then
    session:move(1)
  end
  return session
end

---fzf_live(contents, opts): `contents(args)` (args[1] = the query) runs for opts.query and
---again for every query typed (session:type); it answers a list of lines or a
---function(cb) that calls cb(line) per line and cb(nil) at the end, maybe later.
---`session.loading` is false once the lines of the latest query are in.
function M.fzf_live(contents, opts)
  assert(type(contents) == 'function', 'fake fzf-lua: fzf_live contents must be a function here')
  opts = opts or {}
  local session
  local generation = 0
  local function run(query)
    generation = generation + 1
    local mine, lines = generation, {}
    session.loading = true
    session.queries[#session.queries + 1] = query
    local function done()
      if mine ~= generation or session.closed then
        return
      end
      session.contents = lines
      session.loading = false
      if #lines > 0 then
        session:move(1)
      end
    end
    local out = contents({ query })
    if type(out) == 'table' then
      lines = out
      return done()
    end
    out(function(line)
      if line == nil then
        return done()
      end
      lines[#lines + 1] = line
    end)
  end
  -- the window, previewer and actions of fzf_exec, over the live lines
  session = M.fzf_exec({}, vim.tbl_extend('force', opts, { __live = true }))
  session.queries = {}
  function session:type(query)
    run(query)
  end
  local move = session.move
  function session:move(i)
    if self.contents[i] then
      move(self, i)
    end
  end
  run(opts.query or '')
  return session
end

return M
