-- Issue 33: one option name per concept in every client. `compact.confirm` (VS Code
-- fabric.compact.confirm) and `recall.open_as` = 'expanded' | 'jsonl' (VS Code
-- fabric.recall.openAs); the old `confirm_compact` and `recall.open = 'expand'` still work,
-- with one warning that says what to write instead.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))
local config = require('fabric.config')

local function warnings(needle)
  local n = 0
  for _, m in ipairs(H.messages) do
    if m.level == vim.log.levels.WARN and m.msg:find(needle, 1, true) then
      n = n + 1
    end
  end
  return n
end

H.check('the new names, and their defaults', function()
  vim.g.fabric = nil
  H.eq(true, config.get().compact.confirm, 'compact.confirm default')
  H.eq('expanded', config.get().recall.open_as, 'recall.open_as default')
  H.messages = {}
  vim.g.fabric = { compact = { confirm = false }, recall = { open_as = 'jsonl' } }
  local opts = config.get()
  H.eq(false, opts.compact.confirm)
  H.eq('jsonl', opts.recall.open_as)
  H.eq(nil, opts.confirm_compact, 'no old key in the options')
  H.eq(nil, opts.recall.open, 'no old key in the options')
  H.eq({}, H.messages, 'no warning')
end)

H.check('confirm_compact still works and warns once, naming the new option', function()
  H.messages = {}
  vim.g.fabric = { confirm_compact = false }
  H.eq(false, config.get().compact.confirm)
  H.eq(false, config.get().compact.confirm)
  H.eq(1, warnings('fabric: `confirm_compact = false` is now `compact = { confirm = false }`'), vim.inspect(H.messages))
end)

H.check("recall.open = 'expand' still works and warns once", function()
  H.messages = {}
  vim.g.fabric = { recall = { open = 'expand' } }
  H.eq('expanded', config.get().recall.open_as)
  config.get()
  H.eq(1, warnings("fabric: `recall.open = 'expand'` is now `recall.open_as = 'expanded'`"), vim.inspect(H.messages))
  vim.g.fabric = { recall = { open = 'jsonl' } }
  H.eq('jsonl', config.get().recall.open_as)
end)

H.check('both names set: the new one wins, and the warning says so', function()
  H.messages = {}
  vim.g.fabric = { confirm_compact = false, compact = { confirm = true }, recall = { open = 'jsonl', open_as = 'expanded' } }
  local opts = config.get()
  H.eq(true, opts.compact.confirm)
  H.eq('expanded', opts.recall.open_as)
  H.eq(1, warnings('`compact.confirm` is set too and wins'), vim.inspect(H.messages))
  H.eq(1, warnings('`recall.open_as` is set too and wins'), vim.inspect(H.messages))
end)

H.check('a wrong value of the new name is named', function()
  H.messages = {}
  vim.g.fabric = { recall = { open_as = 'expand' } }
  H.eq('expanded', config.get().recall.open_as, 'the default applies')
  H.eq(1, warnings("vim.g.fabric.recall.open_as: expected one of 'expanded', 'jsonl', got \"expand\""), vim.inspect(H.messages))
  vim.g.fabric = nil
end)

H.finish()
