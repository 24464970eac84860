-- :Fabric sessions [project|global] (picker that opens the JSONL), :Fabric sessions! (quickfix).
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

local all = vim.fn.globpath(H.sessions, '*/*.jsonl', false, true)
local project_dir = '--' .. H.project:sub(2):gsub('[/\\:]', '-') .. '--'
local project = vim.fn.globpath(H.sessions .. '/' .. project_dir, '*.jsonl', false, true)
table.sort(project)
local s05 = H.session_file('05-')

H.check(':Fabric sessions lists the project sessions; choosing one opens its JSONL', function()
  vim.cmd.enew()
  local rec = H.pick_with(function(items)
    for i, item in ipairs(items) do
      if item.sessionFile == s05 then
        return i
      end
    end
  end)
  local done = H.fabric('Fabric sessions')
  H.eq(true, done.ok, 'ok: ' .. tostring(done.message))
  H.eq('fabric.session', rec.kind, 'kind')
  H.contains(rec.prompt, 'Fabric sessions (project): ' .. #project)
  local files = vim.tbl_map(function(i)
    return i.sessionFile
  end, rec.items)
  table.sort(files)
  H.eq(project, files, 'project session files')
  local h05 = H.read_jsonl(s05)[1]
  for i, item in ipairs(rec.items) do
    if item.sessionFile == s05 then
      H.contains(rec.formatted[i], h05.id)
      H.contains(rec.formatted[i], ' entries ')
      -- lastTs shown as ISO-8601 UTC.
      H.truthy(rec.formatted[i]:match('%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ'), 'ISO time: ' .. rec.formatted[i])
    end
  end
  H.eq(s05, vim.api.nvim_buf_get_name(0), 'opened')
  H.eq('jsonl', vim.bo.filetype, 'filetype')
  H.eq(1, vim.api.nvim_win_get_cursor(0)[1], 'first line')
end)

H.check(':Fabric sessions global lists the sessions of every project', function()
  local rec = H.pick_with(function()
    return nil
  end)
  local done = H.fabric('Fabric sessions global')
  H.eq(true, done.ok, 'ok')
  H.eq('dismissed', done.message, 'dismissed')
  H.eq(#all, #rec.items, 'all sessions')
  local cwds = {}
  for _, item in ipairs(rec.items) do
    cwds[item.cwd] = true
  end
  H.truthy(cwds[H.project] and cwds['/home/user/other'], 'several projects')
end)

H.check(':Fabric sessions! global fills the quickfix list', function()
  H.eq(true, H.fabric('Fabric sessions! global').ok, 'ok')
  local qf = vim.fn.getqflist({ title = 1, items = 1 })
  H.eq('Fabric sessions (global)', qf.title, 'title')
  H.eq(#all, #qf.items, 'items')
  vim.cmd('cclose')
end)

H.check(':Fabric sessions with a bad scope is an error', function()
  local done = H.fabric('Fabric sessions everywhere')
  H.eq(false, done.ok, 'ok')
  H.contains(done.message, 'unknown scope "everywhere"')
end)

H.check(':Fabric preview completes session ids seen in a listing', function()
  local h05 = H.read_jsonl(s05)[1]
  local got = vim.fn.getcompletion('Fabric preview ' .. h05.id:sub(1, 10), 'cmdline')
  H.truthy(vim.tbl_contains(got, h05.id), 'completion: ' .. vim.inspect(got))
end)

H.finish()
