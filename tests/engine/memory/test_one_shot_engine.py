"""A one-shot engine (`MemoryEngine.one_shot`: the CLI computing one answer and exiting)
answers exactly as an engine that decodes everything (a server), over the same disk index.

* recall (terms, browse, regex, pages, scopes, both branch modes), sessions and file
  history are the same bytes; its hot shards loaded from the disk cache keep their records
  undecoded until read (`pending.PendingRecords`): a terms query decodes only what its page
  shows, a regex decodes them all;
* it skips the cache cleanup only when there is nothing to clean by name: a temporary file
  or a record of a session that is gone runs the cleanup as before, and the cleanup's
  budget is reported the same either way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fabric_lsp.engine.memory import disk_cache, pending
from fabric_lsp.engine.memory.api import MemoryConfig, MemoryEngine
from tests.support.agent import examples_agent
from tests.support.wire import WireMemoryEngine

REPO = Path(__file__).resolve().parents[3]
ORBIT = "/home/user/projects/orbit"
TLE = "/home/user/projects/orbit/orbit/tle.py"


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    return examples_agent(tmp_path / "agent")


def _engine(agent: Path, cfg: MemoryConfig, *, one_shot: bool) -> MemoryEngine:
    eng = WireMemoryEngine(cfg, agent_dir=str(agent), index_dir=str(agent.parent / "index"))
    eng.one_shot = one_shot
    return eng


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("recall", {"query": "orbit anomaly", "scope": "global"}),
    ("recall", {"query": "test", "scope": "global", "page": 2, "pageSize": 3}),
    ("recall", {"scope": "global", "pageSize": 7}),  # browse
    ("recall", {"query": "convert_anomaly", "scope": "project"}),
    ("recall", {"query": "ledger balance", "scope": "global", "branches": "all"}),
    ("recall", {"query": "zzzz_no_such_term", "scope": "global"}),
    ("sessions", {"scope": "global"}),
    ("sessions", {"scope": "global", "branches": "all"}),
    ("file_history", {"path": TLE, "scope": "global"}),
    ("recall", {"query": r"def [a-z_]+\(", "queryMode": "regex", "scope": "global"}),  # reads every text
]


def _answers(eng: MemoryEngine) -> list[str]:
    out = []
    for method, params in CALLS:
        out.append(json.dumps(getattr(eng, method)(dict(params), cwd=ORBIT), sort_keys=True))
    return out


def _pending(eng: MemoryEngine, branches: str = "active") -> list[pending.PendingRecords]:
    return [
        st.entries
        for st in eng.states.values()
        if isinstance(st.entries, pending.PendingRecords) and st.branches == branches
    ]


@pytest.mark.parametrize("hot", [2, 50])
def test_a_one_shot_engine_answers_as_a_server_does(agent, hot):
    cfg = MemoryConfig(hot_sessions=hot)
    built = _answers(_engine(agent, cfg, one_shot=False))  # builds the disk index
    assert _answers(_engine(agent, cfg, one_shot=False)) == built  # a server loading it
    eng = _engine(agent, cfg, one_shot=True)
    first = eng.recall({"query": "orbit anomaly", "scope": "global", "pageSize": 1}, cwd=ORBIT)
    assert first["items"]
    pending = _pending(eng)
    assert pending and any(p._pending is not None for p in pending)  # left undecoded by a terms query
    assert _answers(eng) == built
    assert all(p._pending is None for p in _pending(eng))  # the regex read every text (active branches)
    assert _answers(_engine(agent, cfg, one_shot=True)) == built  # each call first, in a new engine too


def test_a_one_shot_engine_cleans_what_is_gone(agent, monkeypatch):
    cfg = MemoryConfig()
    built = _answers(_engine(agent, cfg, one_shot=False))
    index_dir = agent.parent / "index"
    cleanups: list[int] = []
    real = disk_cache.cleanup
    monkeypatch.setattr(disk_cache, "cleanup", lambda *a: (cleanups.append(1), real(*a))[1])
    assert _answers(_engine(agent, cfg, one_shot=True)) == built
    assert cleanups == []  # nothing to clean: skipped
    temp = index_dir / ".tmp-0123456789ab.part"
    temp.write_bytes(b"left by a killed writer")
    _engine(agent, cfg, one_shot=True).recall({"query": "orbit", "scope": "global"}, cwd=ORBIT)
    assert cleanups == [1] and not temp.exists()
    gone = sorted(agent.glob("sessions/*/*.jsonl"))[0]
    orphans = [p for p in index_dir.iterdir() if p.name.startswith(disk_cache.cache_base(str(gone)))]
    assert orphans
    gone.unlink()
    _engine(agent, cfg, one_shot=True).recall({"query": "orbit", "scope": "global"}, cwd=ORBIT)
    assert cleanups == [1, 1] and not any(p.exists() for p in orphans)


@pytest.mark.parametrize("budget", [{"max_cache_cleanup_files": 3}, {"max_sync_source_bytes": 1 << 16}])
def test_the_cleanup_budget_is_reported_the_same(agent, budget):
    _answers(_engine(agent, MemoryConfig(), one_shot=False))
    cfg = MemoryConfig(**budget)
    server = _engine(agent, cfg, one_shot=False).recall({"query": "orbit", "scope": "global"}, cwd=ORBIT)
    assert "cache_cleanup_budget" in server["coverage"]["reasons"]
    assert _engine(agent, cfg, one_shot=True).recall({"query": "orbit", "scope": "global"}, cwd=ORBIT) == server
