"""A session leaving the hot tier gets its digest derived from its hot state (only
truncated lines are decoded again); the digest, its cache record and every result must
equal a rebuild from source."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memory_kit import REAL_SESSIONS, assistant, bash, header, tool_result, user, write_session
from test_memory_fabric_records import _rows as fabric_rows

from fabric_lsp.engine.memory.api import MemoryConfig
from fabric_lsp.engine.memory.state_build import build_state, digest_from_hot
from tests.support.examples import profile_examples
from tests.support.wire import WireMemoryEngine

CWD = "/home/user/swap"


def _assert_same(path: Path, cfg: MemoryConfig, branches: str = "active") -> bool:
    hot = build_state(str(path), branches, "hot", cfg, ref_id="ref", ref_cwd=CWD)
    cold = build_state(str(path), branches, "cold", cfg, ref_id="ref", ref_cwd=CWD)
    derived = digest_from_hot(hot, cfg)
    if derived is None:
        return False
    assert derived.persisted == cold.persisted
    assert derived.digest == cold.digest
    assert derived.coverage == cold.coverage
    assert (derived.entry_count, derived.first_ts, derived.last_ts) == (cold.entry_count, cold.first_ts, cold.last_ts)
    return True


@pytest.mark.parametrize("name", sorted(p.name for p in REAL_SESSIONS.glob("*.jsonl")))
@pytest.mark.parametrize("limit", [100, 2000])
def test_real_sessions_derive_like_a_rebuild(tmp_path: Path, name: str, limit: int):
    path = tmp_path / name
    shutil.copy(REAL_SESSIONS / name, path)
    for branches in ("active", "all"):
        assert _assert_same(path, MemoryConfig(max_entry_chars=limit), branches)
    assert _assert_same(path, MemoryConfig(max_entry_chars=limit, index_thinking=True, index_tool_output=False))


def test_fabric_records_derive_like_a_rebuild(tmp_path: Path):
    long = "ΩMEGA word " * 40
    rows = fabric_rows(extra=[user("u9", "bs1", long, 9), user("u9", "u9", long + " dup id", 10)])
    path = write_session(tmp_path, CWD, "fab.jsonl", rows)
    assert _assert_same(path, MemoryConfig(max_entry_chars=100))


pieces = st.sampled_from(["auth ", "lo", "gin ", "Σ", "ς ", "ﬁ", "x" * 90, "ΩMEGA ", "é", "\u0301", "İ", "_1 ", "\n"])


@settings(max_examples=profile_examples(60), deadline=None)
@given(st.lists(st.lists(pieces, max_size=30).map("".join), min_size=1, max_size=8), st.sampled_from([100, 150]))
def test_truncation_cut_anywhere_derives_like_a_rebuild(tmp_path_factory, texts, limit):
    root = tmp_path_factory.mktemp("swap")
    rows = [header("s", CWD)]
    parent = None
    for i, text in enumerate(texts):
        eid = f"e{i}"
        if i % 3 == 0:
            rows.append(user(eid, parent, text, i))
        elif i % 3 == 1:
            rows.append(bash(eid, parent, "run", text, 0, i))
        else:
            rows.append(tool_result(eid, parent, "c", "read", text, i))
        parent = eid
    path = write_session(root, CWD, "s.jsonl", rows)
    assert _assert_same(path, MemoryConfig(max_entry_chars=limit))


def test_vocabulary_over_budget_rebuilds(tmp_path: Path):
    rows = [header("s", CWD), user("u1", None, " ".join(f"w{i}" for i in range(400)), 1)]
    path = write_session(tmp_path, CWD, "s.jsonl", rows)
    cfg = MemoryConfig(max_cold_vocabulary_bytes=100)
    hot = build_state(str(path), "active", "hot", cfg, ref_id="ref", ref_cwd=CWD)
    assert digest_from_hot(hot, cfg) is None


@pytest.mark.parametrize("restart", [False, True])
def test_engine_tier_swap_gives_rebuild_results_and_cache(tmp_path: Path, monkeypatch, restart: bool):
    """Appending to a cold session promotes it and demotes the oldest hot one; results
    and cache records equal those of a fresh engine over an empty index."""
    import fabric_lsp.engine.memory.index as index

    derived = []

    def spy(state, cfg):
        out = digest_from_hot(state, cfg)
        derived.append(out is not None)
        return out

    monkeypatch.setattr(index, "digest_from_hot", spy)
    agent = tmp_path / "agent"
    for n in range(4):
        rows = [
            header(f"s{n}", CWD),
            user("u1", None, f"topic{n} " + "long words " * 300, 1),
            assistant("a1", "u1", [{"type": "text", "text": f"reply {n} zebra"}], 2),
        ]
        write_session(agent, CWD, f"s{n}.jsonl", rows, mtime_s=1_700_000_000 + n)
    cfg = dict(hot_sessions=2, max_entry_chars=200)
    eng = WireMemoryEngine(MemoryConfig(**cfg), agent_dir=str(agent), index_dir=str(tmp_path / "idx1"))
    eng.recall({"query": "zebra", "scope": "global"})
    if restart:  # hot states loaded from the disk cache
        eng.close()
        eng = WireMemoryEngine(MemoryConfig(**cfg), agent_dir=str(agent), index_dir=str(tmp_path / "idx1"))
        eng.recall({"query": "zebra", "scope": "global"})
        assert all(st.scan is None for st in eng._states.values())
    oldest = agent / "sessions" / os.listdir(agent / "sessions")[0] / "s0.jsonl"
    with oldest.open("a") as fh:
        fh.write(
            json.dumps(
                {
                    "type": "message",
                    "id": "u2",
                    "parentId": "a1",
                    "timestamp": "2025-01-02T00:00:00.000Z",
                    "message": {"role": "user", "content": "appended zebra"},
                }
            )
            + "\n"
        )
    os.utime(oldest, (1_700_000_100, 1_700_000_100))
    queries = [
        {"query": q, "scope": "global", "branches": b}
        for q in ("zebra", "topic2 long", "appended")
        for b in ("active", "all")
    ]
    swapped = [eng.recall(q) for q in queries]
    assert derived and all(derived)  # the demoted session was derived, not rebuilt
    fresh = WireMemoryEngine(MemoryConfig(**cfg), agent_dir=str(agent), index_dir=str(tmp_path / "idx2"))
    assert swapped == [fresh.recall(q) for q in queries]
    one = {n: (tmp_path / "idx1" / n).read_bytes() for n in os.listdir(tmp_path / "idx1")}
    two = {n: (tmp_path / "idx2" / n).read_bytes() for n in os.listdir(tmp_path / "idx2")}
    assert one == two
    eng.close()
    fresh.close()
