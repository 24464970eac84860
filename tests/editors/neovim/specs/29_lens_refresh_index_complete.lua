-- env: FABRIC_LSP_BACKGROUND_INDEX=1
-- Issue 34, "views that stay true": when the background indexer reports the whole history
-- indexed (`fabric/activity` {type: "metrics", request: "fabric/backgroundIndex",
-- complete: true}), the file-history lenses of the attached buffers are fetched again.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

local refreshed, complete_seen = 0, false
vim.api.nvim_create_autocmd('User', {
  pattern = 'FabricViewRefreshed',
  callback = function(ev)
    if ev.data.kind == 'codelens' then
      refreshed = refreshed + 1
    end
  end,
})

-- Record the server's activity as it arrives (the plugin's handler, wrapped).
local lsp = require('fabric.lsp')
local original = lsp.handlers['fabric/activity']
lsp.handlers['fabric/activity'] = function(err, params, ctx)
  if type(params) == 'table' and params.complete == true and params.request == 'fabric/backgroundIndex' then
    complete_seen = true
  end
  return original(err, params, ctx)
end

H.check('the lenses are refreshed when the index is complete', function()
  local buf = H.open_attached(H.project .. '/calc/ops.py')
  H.wait_for('fabric/activity complete: true', function()
    return complete_seen
  end, 60000)
  H.wait_for('the lens refresh', function()
    return refreshed > 0
  end)
  H.wait_for('a resolved lens', function()
    local lenses = vim.lsp.codelens.get(buf)
    return #lenses > 0 and lenses[1].command ~= nil
  end)
  H.truthy(vim.lsp.codelens.get(buf)[1].command.title:match('^Pi: '), 'the lens')
end)

H.finish()
