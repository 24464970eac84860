-- Issue 34, finding 15 (the smaller Neovim items): :checkhealth lists CodeLens and every
-- command; branchsummary and reload subcommands; <Plug> mappings.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

local s03 = H.session_file('03-')
H.open_attached(s03)

H.check(':checkhealth fabric lists CodeLens and every command the server offers', function()
  vim.cmd('checkhealth fabric')
  local text = table.concat(H.lines(0), '\n')
  H.contains(text, 'CodeLens (file history)')
  local commands = H.client().server_capabilities.executeCommandProvider.commands
  H.truthy(vim.tbl_contains(commands, 'fabric.fileHistory'), 'the server offers fabric.fileHistory')
  for _, c in ipairs({ 'fabric.fileHistory', 'fabric.branchSummaryPreview', unpack(commands) }) do
    H.contains(text, c)
  end
  vim.cmd('bwipeout')
end)

H.check(':Fabric branchsummary previews the summary of moving to the entry on the cursor line', function()
  vim.cmd.edit(vim.fn.fnameescape(s03))
  -- the first user message of the session: moving there abandons the rest of the branch
  local target
  for _, obj in ipairs(H.read_jsonl(s03)) do
    if not target and obj.type == 'message' and obj.message.role == 'user' then
      target = obj
    end
  end
  vim.api.nvim_win_set_cursor(0, { target._lnum, 0 })
  local expected, answered, failure
  require('fabric.lsp').request('fabric/branchSummaryPreview', { session = s03, targetId = target.id }, function(err, r)
    expected, failure, answered = r, err, true
  end)
  H.wait_for('the server answer', function()
    return answered
  end)
  H.truthy(expected, 'answer: ' .. tostring(failure))
  local done = H.fabric('Fabric branchsummary')
  H.eq(true, done.ok, 'ok: ' .. tostring(done.message))
  local lines = H.lines(0)
  H.contains(vim.api.nvim_buf_get_name(0), 'fabric://branch-summary/')
  H.contains(lines, '- outcome: ' .. expected.outcome)
  H.contains(lines, '- entries summarized: ' .. expected.entriesSummarized)
  if type(expected.summary) == 'string' then
    H.contains(lines, vim.split(expected.summary, '\n')[1])
  end
end)

H.check(':Fabric branchsummary outside a session says what to do', function()
  vim.cmd.enew()
  local done = H.fabric('Fabric branchsummary')
  H.eq(false, done.ok, 'fails')
  H.contains(done.message, 'session JSONL buffer')
end)

H.check(':Fabric reload shows the effective settings', function()
  vim.cmd.edit(vim.fn.fnameescape(s03))
  H.messages = {}
  local done = H.fabric('Fabric reload')
  H.eq(true, done.ok, 'ok: ' .. tostring(done.message))
  H.eq('fabric://settings', vim.api.nvim_buf_get_name(0), 'buffer')
  local decoded = vim.json.decode(table.concat(H.lines(0), '\n'))
  H.eq(H.agent, decoded.agentDir, 'agentDir in the settings')
  H.truthy(H.notified('configuration re-read'), 'notified')
end)

H.check('<Plug> mappings exist for recall, expand, preview, compact, history, sessions and CodeLens', function()
  for _, name in ipairs({ 'recall', 'recall-word', 'expand', 'preview', 'compact', 'history', 'sessions', 'codelens' }) do
    local m = vim.fn.maparg('<Plug>(fabric-' .. name .. ')', 'n', false, true)
    H.truthy(m.lhs, '<Plug>(fabric-' .. name .. ')')
    H.truthy(m.desc and m.desc:find('^Fabric: '), 'desc of ' .. name)
  end
  -- one of them, driven as a user key would: the history of a project file
  vim.cmd.edit(vim.fn.fnameescape(H.project .. '/calc/ops.py'))
  local rec = H.pick_with(function()
    return nil
  end)
  vim.keymap.set('n', '<F7>', '<Plug>(fabric-history)', { remap = true })
  local before = #H.done
  H.feed('<F7>')
  H.wait_for('history done', function()
    return #H.done > before
  end)
  H.eq('history', H.done[#H.done].command, 'the command run')
  H.eq('fabric.file_operation', rec.kind, 'the history picker')
end)

H.check('a 7-character session prefix is "too short", not "not found"', function()
  local id = H.read_jsonl(s03)[1].id
  local done = H.fabric('Fabric expand ' .. id:sub(1, 7) .. '/abc12345')
  H.eq(false, done.ok, 'fails')
  H.contains(done.message, 'too short')
  H.contains(done.message, 'at least 8 characters')
  done = H.fabric('Fabric preview ' .. id:sub(1, 7))
  H.eq(false, done.ok, 'preview fails')
  H.contains(done.message, 'too short')
end)

H.check(':Fabric preview of a file that is not a Pi session says so', function()
  local other = vim.fn.tempname() .. '.jsonl'
  vim.fn.writefile({ '{"hello":"world"}' }, other)
  local done = H.fabric('Fabric preview ' .. other)
  H.eq(false, done.ok, 'fails')
  H.contains(done.message, 'is not a Pi session')
  local md = H.project .. '/README.md'
  vim.fn.writefile({ '# notes' }, md)
  done = H.fabric('Fabric preview ' .. md)
  H.eq(false, done.ok, 'fails on markdown')
  H.contains(done.message, 'is not a Pi session')
end)

H.check(':Fabric sessions uses the picker option and shows session names', function()
  vim.g.fabric = { picker = 'float' }
  local rec = H.pick_with(function()
    error('picker = float must not use vim.ui.select')
  end)
  vim.cmd.cd(vim.fn.fnameescape(H.project))
  local before = #H.done
  vim.cmd('Fabric sessions')
  H.wait_for('the float', function()
    return #H.floats() > 0
  end)
  local buf = vim.api.nvim_win_get_buf(H.floats()[1])
  local text = table.concat(H.lines(buf), '\n')
  local name
  for _, obj in ipairs(H.read_jsonl(s03)) do
    if obj.type == 'session_info' and type(obj.name) == 'string' then
      name = obj.name
    end
  end
  H.contains(text, assert(name, 'the fixture 03 has a name'))
  H.eq(nil, rec.items, 'no vim.ui.select')
  H.feed('q')
  H.wait_for('dismissed', function()
    return #H.done > before
  end)
  vim.g.fabric = nil
end)

H.check("the server's progress reaches vim.lsp.status() (what fidget and statuslines read)", function()
  vim.cmd.edit(vim.fn.fnameescape(s03))
  local seen = {}
  local id = vim.api.nvim_create_autocmd('LspProgress', {
    callback = function(ev)
      local c = vim.lsp.get_client_by_id(ev.data.client_id)
      if c and c.name == 'fabric' and ev.data.params.value.kind ~= 'end' then
        seen[#seen + 1] = vim.lsp.status()
      end
    end,
  })
  local rec = H.pick_with(function()
    return nil
  end)
  H.fabric('Fabric recall scope=global rounding')
  vim.api.nvim_del_autocmd(id)
  H.truthy(rec.items, 'the recall ran')
  H.truthy(#seen > 0, 'progress events')
  H.truthy(vim.iter(seen):any(function(s) return s:find('recall', 1, true) ~= nil end),
    'vim.lsp.status() had the recall progress: ' .. vim.inspect(seen))
end)

H.finish()
