"""Streaming expand (bounded memory on huge sessions) selects exactly the records a full
build numbers, for every real-session fixture, both branch modes and tiny blocks (so
lines and records straddle block boundaries)."""

from __future__ import annotations

from pathlib import Path

import pytest
from memory_kit import REAL_SESSIONS

from fabric_lsp.engine.memory.api import MemoryConfig
from fabric_lsp.engine.memory.expand import ExpandConfig
from fabric_lsp.engine.memory.expand_stream import Selection, expand_streaming
from fabric_lsp.engine.memory.state_build import build_state

FILES = sorted(REAL_SESSIONS.glob("*.jsonl"))


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
@pytest.mark.parametrize("branches", ["active", "all"])
@pytest.mark.parametrize("block", [97, 4096, 8 << 20])
def test_streaming_expand_equals_the_full_build(path: Path, branches: str, block: int):
    full = build_state(
        str(path),
        branches,
        "hot",
        ExpandConfig(MemoryConfig()),
        ref_id=path.stem,
        ref_cwd="",
        encode=False,
        searchable=False,
    )
    entries = full.entries or []
    n = len(entries)
    got = expand_streaming(
        str(path),
        branches,
        path.stem,
        Selection(entry_range=(0, max(0, n - 1))) if n else Selection(),
        block_bytes=block,
    )
    assert got.entry_count == n
    assert got.source_hash == full.source_hash and got.lineage.fingerprint == full.lineage.fingerprint
    assert got.session_id == full.session_id
    assert got.selected == (entries if n else [])
    if n:
        some = Selection(indices={0, n - 1}, entry_ids={e["entryId"] for e in entries[:2] if e.get("entryId")})
        picked = expand_streaming(str(path), branches, path.stem, some, block_bytes=block)
        want = [e for e in entries if e["index"] in {0, n - 1} or e.get("entryId") in some.entry_ids]
        assert picked.selected == want
        for eid, count in picked.id_counts.items():
            assert count == sum(1 for e in entries if e.get("entryId") == eid)
