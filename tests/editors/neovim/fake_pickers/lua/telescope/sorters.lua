-- Test double (see pickers.lua): sorters.highlighter_only(opts).
return {
  highlighter_only = function(opts)
    return { fake_highlighter_only = true, opts = opts }
  end,
}
