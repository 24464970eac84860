"""A hot shard's BM25 index persisted beside it (memory/hot_cache.py).

* The index loaded from `<base>.terms.json` equals the one built from the records — the
  same postings in the same forms, document lengths, segments and total — for the real
  Pi sessions, the bundled examples and any record texts (property test).
* A restarted engine answers exactly as before without tokenizing a record again.
* A sidecar that is not exactly this shard's (tampered bytes, an older shard after an
  append, another engine format) is never used: the index is rebuilt from the records,
  the answer is the same, and a good sidecar is written in its place.
* Cleanup keeps a sidecar of a live session and removes one whose session is gone.
* A digest loaded without its `addresses` (what the server does) is the full record
  minus them, and a record whose `addresses` is not a list is still refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from memory_kit import REAL_SESSIONS

from fabric_lsp.engine.memory import disk_cache, hot_cache, persist, seal, state, state_build
from fabric_lsp.engine.memory.api import MemoryConfig, MemoryEngine
from fabric_lsp.engine.memory.hot_index import HotIndex, postings_of
from fabric_lsp.engine.memory.records import HotRecords
from fabric_lsp.engine.memory.source import stat_key
from tests.support.agent import EXAMPLES_AGENT, examples_agent
from tests.support.examples import profile_examples
from tests.support.wire import WireMemoryEngine

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = EXAMPLES_AGENT
CFG = MemoryConfig()


def shape(index: HotIndex) -> dict[str, Any]:
    """Everything an index holds, with each posting list's form (int, list or array)."""
    return {
        "doc_len": list(index.doc_len),
        "seg_starts": list(index.seg_starts),
        "seg_of": list(index.seg_of),
        "total_len": index.total_len,
        "postings": [(t, type(p).__name__, list(postings_of(p))) for t, p in index.postings.items()],
    }


def hot_state(file: Path) -> state.SessionState:
    return state_build.build_state(str(file), "active", "hot", CFG, ref_id="r", ref_cwd="/")


def roundtrip(state: state.SessionState) -> HotIndex | None:
    data = hot_cache.encode_record(state)
    assert data is not None and disk_cache.sealed(data)
    shard = persist.shard_bytes(state)
    record = disk_cache.load_record(shard, "shard", len(shard))
    assert record is not None
    return hot_cache.load_record(data, record, state.file, state.branches, state.key)


def test_loaded_index_equals_the_built_one_for_real_and_example_sessions():
    files = sorted(REAL_SESSIONS.glob("*.jsonl")) + sorted(EXAMPLES.glob("sessions/*/*.jsonl"))
    assert len(files) >= 10
    for file in files:
        state = hot_state(file)
        assert state.hot_index is not None and state.entries is not None
        loaded = roundtrip(state)
        assert loaded is not None, file.name
        assert shape(loaded) == shape(state.hot_index), file.name
        assert shape(loaded) == shape(HotIndex.build(list(state.entries))), file.name


texts = st.lists(
    st.one_of(st.text(max_size=60), st.sampled_from(["the parser", "parse epoch", "é ǅ ß", ""])),
    min_size=0,
    max_size=40,
)
roles = st.sampled_from([None, "user", "assistant", "toolResult", "bashExecution", "compaction"])


@settings(max_examples=profile_examples(60), deadline=None)
@given(st.lists(st.tuples(texts.map(" ".join), roles), max_size=30), st.integers(min_value=0, max_value=200))
def test_roundtrip_of_any_records(recs, repeat):
    entries = HotRecords()
    for i, (text, role) in enumerate(recs):
        entries.append(
            {
                "sessionFile": "/s/a.jsonl",
                "sessionId": "s",
                "index": i,
                "entryId": f"{i:08x}",
                "parentId": None,
                "type": "message",
                "role": role,
                "toolName": None,
                "text": (text + " common") * (1 + (i * repeat) % 3),
                "timestamp": None,
                "isError": False,
                "truncated": False,
                "line": i + 1,
            }
        )
    built = HotIndex.build(list(entries))
    state = hot_state(sorted(REAL_SESSIONS.glob("*.jsonl"))[0])
    state.entries, state.hot_index = entries, built
    state.entries_json, state.entries_encoded, state.entries_bytes = b"", 0, 0
    persist._encode_entries(state)
    loaded = roundtrip(state)
    assert loaded is not None and shape(loaded) == shape(built)


def _agent(tmp_path: Path) -> Path:
    return examples_agent(tmp_path / "agent")


def _recall(eng: MemoryEngine, query: str = "the test parse") -> str:
    result = eng.recall({"query": query, "scope": "global", "pageSize": 100})
    assert result["items"], query  # an answer worth comparing
    return json.dumps(result, sort_keys=True)


def _terms_files(index_dir: Path) -> list[Path]:
    return sorted(index_dir.glob("*.terms.json"))


def test_restart_answers_the_same_without_tokenizing_again(tmp_path, monkeypatch):
    agent, index_dir = _agent(tmp_path), tmp_path / "index"
    first = _recall(WireMemoryEngine(CFG, agent_dir=str(agent), index_dir=str(index_dir)))
    sidecars = _terms_files(index_dir)
    shards = list(index_dir.glob("*.jsonl.json"))
    assert sidecars and len(sidecars) == len(shards)
    added: list[int] = []
    real_add = HotIndex.add
    monkeypatch.setattr(HotIndex, "add", lambda self, rec: (added.append(1), real_add(self, rec))[1])
    assert _recall(WireMemoryEngine(CFG, agent_dir=str(agent), index_dir=str(index_dir))) == first
    assert added == []  # every hot index came from its sidecar


def test_a_sidecar_that_is_not_this_shards_is_rebuilt(tmp_path, monkeypatch):
    agent, index_dir = _agent(tmp_path), tmp_path / "index"
    first = _recall(WireMemoryEngine(CFG, agent_dir=str(agent), index_dir=str(index_dir)))
    victim = _terms_files(index_dir)[0]
    good = victim.read_bytes()
    added: list[int] = []
    real_add = HotIndex.add
    monkeypatch.setattr(HotIndex, "add", lambda self, rec: (added.append(1), real_add(self, rec))[1])
    # a flipped byte breaks the seal
    at = good.index(b'"postings":"') + 14
    victim.write_bytes(good[:at] + (b"B" if good[at : at + 1] != b"B" else b"C") + good[at + 1 :])
    assert _recall(WireMemoryEngine(CFG, agent_dir=str(agent), index_dir=str(index_dir))) == first
    assert added and victim.read_bytes() == good  # rebuilt, and the good sidecar written again
    # a sealed sidecar of another engine format
    added.clear()
    rec = disk_cache.decode_record(good)
    assert rec is not None
    rec["engine"] = "someone-else/1"
    del rec["recordHash"]
    victim.write_bytes(seal.apply_cache_metrics(rec, 0))
    assert _recall(WireMemoryEngine(CFG, agent_dir=str(agent), index_dir=str(index_dir))) == first
    assert added and victim.read_bytes() == good


def test_an_append_rewrites_the_sidecar_with_the_shard(tmp_path):
    agent, index_dir = _agent(tmp_path), tmp_path / "index"
    eng = WireMemoryEngine(CFG, agent_dir=str(agent), index_dir=str(index_dir))
    _recall(eng)
    session = sorted(agent.glob("sessions/*/*.jsonl"))[-1]
    lines = session.read_bytes().splitlines(keepends=True)
    last = json.loads(lines[-1])
    extra = {
        "type": "message",
        "id": "feedf00d",
        "parentId": last["id"],
        "timestamp": last["timestamp"],
        "message": {"role": "user", "content": "zanzibar quokka appended", "timestamp": 1_700_000_000_000},
    }
    with open(session, "ab") as fh:
        fh.write((json.dumps(extra) + "\n").encode())
    warm = _recall(eng, "zanzibar quokka")
    assert "feedf00d" in warm
    name = hot_cache.cache_name(str(session), "active")
    data = (index_dir / name).read_bytes()
    shard = (index_dir / disk_cache.cache_name(str(session), "active", "shard")).read_bytes()
    record = disk_cache.load_record(shard, "shard", len(shard))
    assert record is not None
    key = stat_key(str(session))
    assert key is not None
    loaded = hot_cache.load_record(data, record, str(session), "active", key)
    assert loaded is not None and shape(loaded) == shape(hot_state(session).hot_index or HotIndex())
    assert _recall(WireMemoryEngine(CFG, agent_dir=str(agent), index_dir=str(index_dir)), "zanzibar quokka") == warm


def test_cleanup_keeps_live_sidecars_and_removes_orphans(tmp_path):
    agent, index_dir = _agent(tmp_path), tmp_path / "index"
    _recall(WireMemoryEngine(CFG, agent_dir=str(agent), index_dir=str(index_dir)))
    before = _terms_files(index_dir)
    gone = sorted(agent.glob("sessions/*/*.jsonl"))[0]
    orphan = index_dir / hot_cache.cache_name(str(gone), "active")
    assert orphan in before
    gone.unlink()
    assert disk_cache.cleanup(str(index_dir), 10_000, 1 << 30)
    assert _terms_files(index_dir) == [p for p in before if p != orphan]


def test_digest_without_addresses_is_the_record_minus_them(tmp_path):
    file = sorted(REAL_SESSIONS.glob("*.jsonl"))[2]
    state = state_build.build_state(str(file), "active", "cold", CFG, ref_id="r", ref_cwd="/")
    data = state.persisted
    assert data
    full = disk_cache.load_record(data, "digest", len(data))
    lean = disk_cache.load_record(data, "digest", len(data), addresses=False)
    assert full is not None and lean is not None and full["addresses"]
    assert lean == {k: v for k, v in full.items() if k != "addresses"}
    for bad in ({"not": "a list"}, "nope", None):
        rec = dict(full)
        rec["addresses"] = bad
        del rec["recordHash"]
        sealed = seal.apply_cache_metrics(rec, state.size)
        assert disk_cache.load_record(sealed, "digest", len(sealed), addresses=False) is None
        assert disk_cache.load_record(sealed, "digest", len(sealed)) is None
