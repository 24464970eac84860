-- Test double (see pickers.lua): config.values.generic_sorter(opts).
return {
  values = {
    generic_sorter = function(opts)
      return { fake_generic_sorter = true, opts = opts }
    end,
  },
}
