-- The old name of fabric/buffers.lua (session JSONL buffers and the reference under the
-- cursor), kept for configurations that call it (`require('fabric.refs').goto_definition`
-- was documented). New code: require('fabric.buffers'); the grammar: fabric.references.
return require('fabric.buffers')
