-- vim.g.fabric is validated (each message names the key; the default applies), the compaction
-- budget options reach fabric/compactionPreview, and :Fabric sessions lists the project of
-- the current session buffer (its header cwd), not Neovim's current directory.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))
local config = require('fabric.config')

H.check('invalid vim.g.fabric values are reported by key and replaced by defaults', function()
  H.messages = {}
  vim.g.fabric = {
    recall = { page_size = 500, scope = 'everywhere' },
    progress = 'loud',
    compaction = { targetContextRatio = 2, keepRecentTokens = -1 },
    timeout_ms = 'soon',
    colour = 'blue',
  }
  local opts = config.get()
  H.eq(25, opts.recall.page_size, 'page_size default')
  H.eq('auto', opts.recall.scope, 'scope default')
  H.eq('echo', opts.progress, 'progress default')
  H.eq(60000, opts.timeout_ms, 'timeout default')
  for _, needle in ipairs({
    'fabric: vim.g.fabric.recall.page_size: expected an integer from 1 to 100, got 500',
    'fabric: vim.g.fabric.recall.scope: expected one of',
    "fabric: vim.g.fabric.progress: expected one of 'echo', 'notify', 'none', got \"loud\"",
    'fabric: vim.g.fabric.compaction.targetContextRatio: expected a number from 0.25 to 0.85, got 2',
    'fabric: vim.g.fabric.compaction.keepRecentTokens: expected an integer >= 0, got -1',
    'fabric: vim.g.fabric.timeout_ms: expected a positive integer',
    'fabric: vim.g.fabric.colour: unknown option',
  }) do
    local m = H.truthy(H.notified(needle), 'message: ' .. needle .. '\n' .. vim.inspect(H.messages))
    H.eq(vim.log.levels.WARN, m.level, 'level of ' .. needle)
  end
  -- Reported once, not on every use.
  local n = #H.messages
  config.get()
  H.eq(n, #H.messages, 'no repeated messages')
end)

H.check('vim.g.fabric that is not a table says so', function()
  H.messages = {}
  vim.g.fabric = 'fast'
  H.eq({ 'fabric-lsp' }, config.get().cmd, 'defaults')
  H.truthy(H.notified('fabric: vim.g.fabric: expected a table, got "fast"'), vim.inspect(H.messages))
end)

H.check(':checkhealth fabric lists the problems', function()
  vim.g.fabric = { recall = { open_as = 'tab' } }
  vim.cmd('checkhealth fabric')
  H.contains(H.lines(0), 'vim.g.fabric.recall.open_as: expected one of')
  vim.cmd('bwipeout')
  vim.g.fabric = nil
end)

-- An orbit example session: Neovim's cwd is the test project, the header says orbit.
local orbit
for _, f in ipairs(H.example_sessions()) do
  if f:find('--home-user-projects-orbit--', 1, true) then
    orbit = f -- the largest: long enough to compact, so the preview shows its budget
    break
  end
end
local orbit_cwd = H.read_jsonl(assert(orbit, 'an orbit session'))[1].cwd

H.check(":Fabric sessions in a session buffer lists that session's project", function()
  H.open_attached(orbit)
  H.truthy(vim.fn.getcwd() ~= orbit_cwd, 'cwd differs from the session project')
  local rec = H.pick_with(function()
    return nil
  end)
  H.eq(true, H.fabric('Fabric sessions').ok, 'sessions ok')
  H.eq(4, #rec.items, 'the four orbit sessions')
  for _, item in ipairs(rec.items) do
    H.eq(orbit_cwd, item.cwd, 'orbit only')
  end
end)

H.check(':Fabric sessions elsewhere lists the current directory project', function()
  vim.cmd.enew()
  local rec = H.pick_with(function()
    return nil
  end)
  H.eq(true, H.fabric('Fabric sessions').ok, 'sessions ok')
  H.eq(3, #rec.items, 'the three test-project sessions')
end)

H.check('compaction options become the preview params', function()
  vim.g.fabric = { compaction = { contextWindow = 180000, keepRecentTokens = 12345, reserveTokens = 8000, targetContextRatio = 0.5 } }
  H.eq({ contextWindow = 180000, keepRecentTokens = 12345, reserveTokens = 8000, targetContextRatio = 0.5 },
    config.preview_params(), 'params')
  local done = H.fabric('Fabric preview ' .. orbit)
  H.eq(true, done.ok, 'preview ok: ' .. tostring(done.message))
  local lines = H.lines(0)
  H.contains(lines, 'Model context window: 180,000 tokens')
  H.contains(lines, '(up to keepRecentTokens = 12,345)')
  H.contains(lines, "Reserved for the model's reply: 8,000 tokens")
  H.contains(lines, '(50% of the window)')
  -- `preview` wins over `compaction`
  vim.g.fabric = { compaction = { keepRecentTokens = 12345 }, preview = { keepRecentTokens = 999 } }
  H.eq(999, config.preview_params().keepRecentTokens, 'preview wins')
  vim.g.fabric = nil
end)

H.finish()
