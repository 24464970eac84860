-- An invalid setting never kills the server: it warns (window/showMessage), logs
-- (window/logMessage → :Fabric log) and keeps serving with the default.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

vim.g.fabric = { settings = { memory = { maxSessions = 'lots' } } }

local s01 = H.session_file('01-')
H.open_attached(s01)

H.check('the server warns about the invalid value', function()
  H.wait_for('a configuration warning in :messages', function()
    return vim.api.nvim_exec2('messages', { output = true }).output:find('maxSessions', 1, true) ~= nil
  end, 15000)
  local out = vim.api.nvim_exec2('messages', { output = true }).output
  H.contains(out, 'LSP[fabric][Warning]')
end)

H.check(':Fabric log shows the server log messages, with their level', function()
  H.wait_for('a log line about maxSessions', function()
    for _, l in ipairs(require('fabric.lsp').log_lines) do
      if l:find('maxSessions', 1, true) then
        return true
      end
    end
  end, 15000)
  H.eq(true, H.fabric('Fabric log').ok, 'log ok')
  local text = table.concat(H.lines(0), '\n')
  H.contains(text, 'maxSessions')
  H.truthy(text:find('%[WARN%]') or text:find('%[INFO%]') or text:find('%[ERROR%]'), 'a level tag:\n' .. text)
end)

H.check('the server keeps serving', function()
  vim.cmd.edit(vim.fn.fnameescape(s01))
  H.pick_with(function()
    return nil
  end)
  local done = H.fabric('Fabric recall calc')
  H.eq(true, done.ok, 'recall ok: ' .. tostring(done.message))
end)

H.finish()
