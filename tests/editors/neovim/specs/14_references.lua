-- The Lua reference parser (lua/fabric/references.lua) against the shared table of cases
-- (tests/fixtures/references.json), which the Python and TypeScript parsers check too.
local H = dofile(os.getenv('FABRIC_TEST_HARNESS'))
local R = require('fabric.references')

local fixture = vim.fs.joinpath(vim.fs.dirname(os.getenv('FABRIC_TEST_HARNESS')), '..', '..', 'fixtures', 'references.json')
local cases = vim.json.decode(table.concat(vim.fn.readfile(fixture), '\n'))

local function val(v)
  if v == vim.NIL then
    return nil
  end
  return v
end

H.check('the table has cases', function()
  H.truthy(#cases.parse >= 20, 'parse cases')
  H.truthy(#cases.find >= 5, 'find cases')
end)

for _, c in ipairs(cases.parse) do
  H.check('parse ' .. vim.inspect(c.text), function()
    local ref, err = R.parse(c.text)
    if c.error then
      H.eq(nil, ref, 'no reference')
      H.contains(err, 'pi-entry:', 'message names the forms')
    else
      H.truthy(ref, 'parsed: ' .. tostring(err))
      H.eq({ val(c.session), c.entry, val(c.operation) }, { ref.session, ref.entry, ref.operation }, 'parts')
    end
  end)
end

for _, c in ipairs(cases.find) do
  H.check('find ' .. vim.inspect(c.text), function()
    local got = vim.tbl_map(function(r)
      return { r.session_id, r.entry_id, r.first_col - 1, r.last_col }
    end, R.find(c.text))
    H.eq(c.refs, got, 'references')
  end)
end

H.check('the old module name fabric.refs is fabric.buffers', function()
  H.eq(require('fabric.buffers'), require('fabric.refs'), 'fabric.refs')
end)

H.finish()
