"""A one-shot engine (the CLI computing one answer without a server) loads only what its
query needs (issue 36: "otherwise it starts fast by loading only what the query needs"):

* the file-operation tables stay unread by recall and sessions (`SessionState.defer_file_ops`)
  and are read by file history, with the same answers as a server's; a table missing or
  stale in the disk cache is built from the source (and written back), never answered
  from nothing;
* the restored cold term table is not split per term until something needs it whole: a
  lookup reads the restored postings as they are, with the same slots (cold_index.py);
* the regex worker's module is imported only when a regex query runs (core.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from fabric_lsp.engine.memory.api import MemoryConfig, MemoryEngine
from fabric_lsp.engine.memory.cold_index import ColdTermTable
from tests.support.agent import examples_agent
from tests.support.wire import WireMemoryEngine

REPO = Path(__file__).resolve().parents[3]
ORBIT = "/home/user/projects/orbit"
TLE = "/home/user/projects/orbit/orbit/tle.py"


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    return examples_agent(tmp_path / "agent")


def _engine(agent: Path, *, one_shot: bool, hot: int = 2) -> MemoryEngine:
    eng = WireMemoryEngine(MemoryConfig(hot_sessions=hot), agent_dir=str(agent), index_dir=str(agent.parent / "index"))
    eng.one_shot = one_shot
    return eng


def _bytes(result: Any) -> bytes:
    return msgspec.json.encode(result)  # (a dict or a result Struct: the wire bytes either way)


def _history(eng: MemoryEngine) -> bytes:
    return _bytes(eng.file_history({"path": TLE, "scope": "global"}, cwd=ORBIT))


def test_recall_and_sessions_leave_the_file_operation_tables_unread(agent):
    server = _engine(agent, one_shot=False)
    built = [
        _bytes(server.recall({"query": "orbit anomaly", "scope": "global"}, cwd=ORBIT)),
        _bytes(server.sessions({"scope": "global"}, cwd=ORBIT)),
    ]
    history = _history(server)
    eng = _engine(agent, one_shot=True)
    assert _bytes(eng.recall({"query": "orbit anomaly", "scope": "global"}, cwd=ORBIT)) == built[0]
    assert _bytes(eng.sessions({"scope": "global"}, cwd=ORBIT)) == built[1]
    states = list(eng.states.values())
    assert len(states) > 2 and all(st.file_ops_deferred() for st in states)  # hot and cold: none read
    assert _history(eng) == history  # file history reads them: the server's answer
    assert not any(st.file_ops_deferred() for st in eng.states.values())
    # a server reads every table as it loads a state
    again = _engine(agent, one_shot=False)
    again.recall({"query": "orbit anomaly", "scope": "global"}, cwd=ORBIT)
    assert not any(st.file_ops_deferred() for st in again.states.values())


@pytest.mark.parametrize("damage", ["missing", "stale"])
def test_a_missing_or_stale_table_is_built_from_the_source(agent, damage):
    server = _engine(agent, one_shot=False)
    history = _history(server)
    assert json.loads(history)["items"], "the example corpus has operations on the path"
    query = {"query": "orbit anomaly", "scope": "global"}
    served = _bytes(server.recall(query, cwd=ORBIT))
    index_dir = agent.parent / "index"
    tables = sorted(index_dir.glob("*.files.json"))  # (file_history.cache_name)
    assert tables
    saved = {p: p.read_bytes() for p in tables}
    for p in tables:
        if damage == "missing":
            p.unlink()
        else:  # another table's bytes: sealed, but for another source
            p.write_bytes(saved[tables[(tables.index(p) + 1) % len(tables)]])
    eng = _engine(agent, one_shot=True)
    assert _bytes(eng.recall(query, cwd=ORBIT)) == served  # recall does not read the tables
    assert _history(eng) == history
    assert {p: p.read_bytes() for p in tables} == saved  # each written again, as a server writes it
    assert _history(_engine(agent, one_shot=False)) == history


def test_a_restored_term_table_answers_lookups_without_splitting_its_postings():
    vocabularies = [sorted({f"t{(i * 7 + j * 3) % 50}" for j in range(i % 9 + 1)}) for i in range(40)]
    table = ColdTermTable()
    slots = [table.add(v) for v in vocabularies]
    table.remove(slots[5])
    terms = sorted(table.ids) + ["absent"]
    back = ColdTermTable()
    assert back.restore(table.snapshot())
    restored_slot = {tuple(back.vocabulary(s)): s for s in back.slots}
    renumber = {s: restored_slot[tuple(table.vocabulary(s))] for s in table.slots}
    # more lookups than are answered by scanning the names: both ways give the same slots
    for term in terms * 2:
        want = sorted(renumber[s] for s in table.sessions_with(term) if s in table.slots)
        assert list(back.sessions_with(term)) == want, term
        assert all(back.contains(s, term) == (term in table.vocabulary(o)) for o, s in renumber.items())
    assert back._postings is None  # never split: a one-shot process pays only for its lookups
    # a vocabulary added is answered from its list until interned; interning splits the
    # postings, and the table then holds exactly what one built by adding holds
    new = back.add(["t1", "fresh", "t49"])
    assert list(back.sessions_with("fresh")) == [new] and new in back.sessions_with("t1")
    assert back._postings is None and back.settle()
    assert back._postings is not None and back._packed is None
    assert list(back.sessions_with("fresh")) == [new] and new in back.sessions_with("t1")
    for term, tid in back.ids.items():
        assert list(back.postings[tid]) == sorted(s for s in back.slots if term in back.vocabulary(s))


def test_the_regex_worker_is_loaded_only_for_a_regex_query(agent):
    _engine(agent, one_shot=False).recall({"query": "orbit", "scope": "global"}, cwd=ORBIT)  # the disk index
    code = f"""
import json, sys
from fabric_lsp.engine.memory.api import MemoryConfig, MemoryEngine
eng = MemoryEngine(MemoryConfig(hot_sessions=2), agent_dir={str(agent)!r}, index_dir={str(agent.parent / "index")!r})
eng.one_shot = True
out = {{}}
literal = eng.recall({{"query": "orbit anomaly", "scope": "global"}}, cwd={ORBIT!r})
out["literal"] = "fabric_lsp.engine.memory.regex_worker" in sys.modules
regex = eng.recall({{"query": "orb[i]t", "queryMode": "regex", "scope": "global"}}, cwd={ORBIT!r})
out["regex"] = "fabric_lsp.engine.memory.regex_worker" in sys.modules
out["hits"] = regex.total_items
eng.close()
print(json.dumps(out))
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=str(REPO), env=dict(os.environ), timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["literal"] is False and out["regex"] is True and out["hits"] > 0, out


def _recall_once(agent: Path) -> bytes:
    return _bytes(_engine(agent, one_shot=True).recall({"query": "orbit anomaly", "scope": "global"}, cwd=ORBIT))


def test_a_one_shot_load_removes_only_listed_records_of_the_other_tier(agent, monkeypatch):
    from fabric_lsp.engine.memory import disk_cache

    server = _engine(agent, one_shot=False)  # 2 hot sessions (shards), the rest cold (digests)
    built = _bytes(server.recall({"query": "orbit anomaly", "scope": "global"}, cwd=ORBIT))
    cold = [st.file for st in server.states.values() if st.tier == "cold"]
    assert cold
    index_dir = agent.parent / "index"
    calls: list[str] = []
    real = disk_cache.remove
    monkeypatch.setattr(disk_cache, "remove", lambda d, name: (calls.append(name), real(d, name))[1])
    # a clean index: nothing of the other tier is listed, so nothing is removed
    assert _recall_once(agent) == built
    assert calls == []
    # a leftover shard of a cold session is listed: the load removes it, as a server's does
    stale = index_dir / disk_cache.cache_name(cold[0], "active", "shard")
    stale.write_bytes(b"a shard of another tier")
    assert _recall_once(agent) == built
    assert calls == [stale.name] and not stale.exists()
