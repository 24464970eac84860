-- Recall over older (cold) sessions gives pointers: choosing one searches inside that session.
-- A result with more pages ends with a "next page" item.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

-- Only the newest session stays hot: the others answer with pointers.
vim.g.fabric = { settings = { memory = { hotSessions = 1 } }, recall = { scope = 'global' } }

local s03 = H.session_file('03-')
local s05 = H.session_file('05-')

H.check('choosing an older-session pointer searches inside that session', function()
  vim.cmd.enew()
  local pickers = {}
  vim.ui.select = function(items, opts, on_choice)
    local formatted = vim.tbl_map(opts.format_item, items)
    pickers[#pickers + 1] = { items = items, formatted = formatted }
    local choice
    if #pickers == 1 then
      for _, item in ipairs(items) do
        if item.kind == 'pointer' and (item.sessionFile == s03 or item.sessionFile == s05) then
          choice = item
          break
        end
      end
    else
      choice = items[1]
    end
    vim.schedule(function()
      on_choice(choice)
    end)
  end
  local done = H.fabric('Fabric recall rounding')
  H.eq(true, done.ok, 'ok: ' .. tostring(done.message))
  H.eq(2, #pickers, 'a second picker for the session')
  local pointer_line
  for i, item in ipairs(pickers[1].items) do
    if item.kind == 'pointer' then
      pointer_line = pickers[1].formatted[i]
    end
  end
  H.contains(H.truthy(pointer_line, 'a pointer item'), '[older session] matches: rounding')
  local entry = pickers[2].items[1]
  H.eq('entry', entry.kind, 'second picker lists entries')
  H.truthy(entry.sessionFile == s03 or entry.sessionFile == s05, 'inside the chosen session')
  -- Choosing the entry expanded it.
  H.eq(('fabric://expand/%s/%s'):format(entry.sessionId, entry.entryId), vim.api.nvim_buf_get_name(0), 'expanded')
  H.contains(H.lines(0), 'rounding')
end)

H.check('"next page" shows the following page', function()
  vim.g.fabric = { recall = { page_size = 1, scope = 'session:' .. s03 } }
  local pickers = {}
  vim.ui.select = function(items, opts, on_choice)
    pickers[#pickers + 1] = { items = items, formatted = vim.tbl_map(opts.format_item, items), prompt = opts.prompt }
    local last = items[#items]
    vim.schedule(function()
      if #pickers == 1 then
        on_choice(last) -- "next page"
      else
        on_choice(nil)
      end
    end)
  end
  local done = H.fabric('Fabric recall rounding')
  H.eq(true, done.ok, 'ok')
  H.eq(2, #pickers, 'two pages shown')
  H.eq('next', pickers[1].items[#pickers[1].items].kind, 'last item of page 1')
  H.eq('… next page (2)', pickers[1].formatted[#pickers[1].formatted], 'its label')
  H.truthy(pickers[2].items[1].entryId ~= pickers[1].items[1].entryId, 'page 2 shows another entry')
end)

H.finish()
