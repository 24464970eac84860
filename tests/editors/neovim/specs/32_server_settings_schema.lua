-- Issue 33: the plugin checks `settings` against the server's own schema (the generated
-- lua/fabric/server_settings.lua, from fabric_lsp/settings_schema.py) in :checkhealth.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))

H.check('the generated table states the schema the server enforces', function()
  local schema = require('fabric.server_settings')
  H.eq('int', schema['memory.maxSessions'].kind)
  H.eq(1, schema['memory.maxSessions'].min)
  H.eq(100000, schema['memory.maxSessions'].max)
  H.eq(true, vim.tbl_contains(schema['compaction.piRules'].choices, '1.x'))
  H.eq(true, schema['team.url'].user_only)
end)

H.check('bad server settings are named with what is expected', function()
  local problems = require('fabric.config').settings_problems({
    memory = { maxSessions = 0, hotSessions = 10, bogus = 1 },
    compaction = { engine = 'x', targetContextRatio = 0.5, thresholds = { ['a/b'] = 0.5 } },
    codeLens = 'yes',
    team = { projects = { '/home/*' } },
  })
  local text = table.concat(problems, '\n')
  H.eq(4, #problems, text)
  H.contains(text, 'vim.g.fabric.settings.memory.maxSessions: expected an integer from 1 to 100000, got 0')
  H.contains(text, 'vim.g.fabric.settings.memory.bogus: unknown server setting')
  H.contains(text, "vim.g.fabric.settings.compaction.engine: expected one of 'fabric', 'pi', got \"x\"")
  H.contains(text, 'vim.g.fabric.settings.codeLens: expected true or false')
  H.eq(0, #require('fabric.config').settings_problems({ memory = { hotSessions = 0 } }))
end)

H.check(':checkhealth fabric lists them', function()
  vim.g.fabric = { settings = { memory = { maxSessions = 0 } } }
  vim.cmd('checkhealth fabric')
  local text = table.concat(H.lines(0), '\n')
  H.contains(text, 'vim.g.fabric.settings.memory.maxSessions: expected an integer from 1 to 100000, got 0')
  vim.cmd('bwipeout')
  vim.g.fabric = nil
end)

H.finish()
