-- env: FABRIC_LSP_BACKGROUND_INDEX=1
-- The server indexes every session in the background after `initialized`: Neovim shows
-- its `$/progress` ("Indexing N/M sessions") in require('fabric').status(), and the line is
-- idle once the pass ends.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

local seen = { titles = {}, ends = 0, during = nil }
vim.api.nvim_create_autocmd('LspProgress', {
  callback = function(ev)
    local c = vim.lsp.get_client_by_id(ev.data.client_id)
    if not (c and c.name == 'fabric') then
      return
    end
    local value = ev.data.params.value
    if value.kind == 'begin' then
      seen.titles[#seen.titles + 1] = value.title
    elseif value.kind == 'report' and not seen.during then
      seen.during = require('fabric').status()
    elseif value.kind == 'end' then
      seen.ends = seen.ends + 1
    end
  end,
})

H.open_attached(H.session_file('03-'))

H.check('the background index reports progress, then the status line is idle', function()
  H.wait_for('the background pass to end', function()
    return seen.ends >= 1
  end, 60000)
  H.truthy(#seen.titles >= 1, 'a progress began')
  local indexing = false
  for _, t in ipairs(seen.titles) do
    indexing = indexing or tostring(t):find('Index', 1, true) ~= nil
  end
  H.truthy(indexing, 'titled as indexing: ' .. table.concat(seen.titles, ', '))
  if seen.during then
    H.truthy(seen.during:find('Fabric: ', 1, true) ~= nil, 'status during the pass: ' .. seen.during)
  end
  H.wait_for('an idle status line', function()
    return require('fabric').status() == ''
  end, 10000)
end)

H.finish()
