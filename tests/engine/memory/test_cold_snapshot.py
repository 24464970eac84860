"""The cold term table's snapshot (cold_index.py): what a restarted engine restores instead
of decoding, checking and interning every digest's vocabulary again.

Round trips are checked against the table they came from (hypothesis); damaged snapshots
are refused; an engine over a restored snapshot answers exactly like one without it, claims
a restored slot only for the very same vocabulary bytes, and drops what nobody claimed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from memory_kit import engine, header, user, write_session

from fabric_lsp.engine.memory import disk_cache, seal
from fabric_lsp.engine.memory.background import BackgroundIndexer
from fabric_lsp.engine.memory.cold_index import ColdTermTable
from fabric_lsp.engine.memory.cold_snapshot import SNAPSHOT_NAME
from fabric_lsp.engine.memory.disk_cache import vocabulary_key
from fabric_lsp.engine.memory.index import persist_terms
from fabric_lsp.engine.memory.tokenize import sort_lexical
from tests.support.examples import profile_examples

CWD = "/home/user/snap"

_TERM = st.text(alphabet=st.sampled_from("abcxyz_019éß"), min_size=1, max_size=6)
_VOCABS = st.lists(st.lists(_TERM, max_size=12, unique=True).map(sort_lexical), max_size=8)


def _by_slot(table: ColdTermTable) -> list[tuple[list[str], set[str]]]:
    """Every held slot's vocabulary, in slot order, with the terms whose postings name it."""
    out = []
    for slot in sorted(table.slots):
        vocab = list(table.vocabulary(slot))
        posted = {t for t in table.names if slot in set(table.sessions_with(t)) and t in vocab}
        out.append((vocab, posted))
    return out


@settings(max_examples=profile_examples(80), deadline=None)
@given(vocabs=_VOCABS, removed=st.sets(st.integers(0, 7)))
def test_a_snapshot_restores_every_held_slot_with_its_postings_and_key(vocabs, removed):
    table = ColdTermTable()
    slots = [table.add(v) for v in vocabs]
    for i in removed:
        if i < len(slots):
            table.remove(slots[i])
    kept = [v for i, v in enumerate(vocabs) if i not in removed]
    back = ColdTermTable()
    assert back.restore(table.snapshot())
    assert [v for v, _ in _by_slot(back)] == kept
    assert all(set(v) == posted for v, posted in _by_slot(back))
    # postings hold exactly the slots whose vocabulary has the term, ascending
    for term, tid in back.ids.items():
        plist = list(back.postings[tid])
        assert plist == sorted(plist) and plist == [s for s in sorted(back.slots) if term in list(back.vocabulary(s))]
    # each restored slot is claimable by the key of its vocabulary's JSON bytes, once per slot
    for vocab in kept:
        slot = back.claim(vocabulary_key(disk_cache.encoder.encode(vocab)))
        assert slot is not None and list(back.vocabulary(slot)) == vocab
    assert not back.claimable
    # nothing else changed: a second snapshot restores the same again
    again = ColdTermTable()
    assert again.restore(back.snapshot()) and [v for v, _ in _by_slot(again)] == kept


def test_a_damaged_or_foreign_snapshot_is_refused_and_changes_nothing():
    table = ColdTermTable()
    table.add(["alpha", "beta"])
    table.add(["beta", "gamma"])
    good = table.snapshot()
    damaged = [good[:-1], good[:40], b"", good[:30] + bytes([good[30] ^ 1]) + good[31:], b"x" + good[1:]]
    for data in damaged:
        fresh = ColdTermTable()
        assert not fresh.restore(data)
        assert not fresh.slots and not fresh.names and not fresh.claimable
    assert not table.restore(good)  # only into an empty table
    fresh = ColdTermTable()
    assert fresh.restore(good) and len(fresh.slots) == 2


def _sessions(agent: Path, n: int) -> list[Path]:
    out = []
    for i in range(n):
        rows = [header(f"s{i:03d}", CWD), user(f"u{i}", None, f"shared words session {i} only_{i:03d}", 1)]
        out.append(write_session(agent, CWD, f"s{i:03d}.jsonl", rows, 1_700_000_000 + i * 10))
    return out


def _index(agent: Path, **cfg) -> object:
    eng = engine(agent, **cfg)
    BackgroundIndexer(eng).run_once()
    return eng


QUERIES = [{"query": q, "scope": "global"} for q in ("shared words", "only_003", "only_011 session", "nothing_here")]


def test_a_restarted_engine_claims_the_snapshot_and_answers_as_without_it(tmp_path: Path):
    agent = tmp_path / "agent"
    _sessions(agent, 12)
    first = _index(agent, hot_sessions=2)
    index_dir = Path(first.index_dir)
    assert (index_dir / SNAPSHOT_NAME).is_file()
    plain = tmp_path / "plain-index"
    shutil.copytree(index_dir, plain)
    os.unlink(plain / SNAPSHOT_NAME)

    restored = engine(agent, hot_sessions=2)
    without = engine(agent, hot_sessions=2, index_dir=str(plain))
    answers = [restored.recall(q) for q in QUERIES]
    assert answers == [without.recall(q) for q in QUERIES]
    assert answers[1]["items"][0]["pointer"]["sessionId"] == "s003"
    # every cold digest claimed its restored slot: nothing was interned again
    table = restored.cold
    assert not table.claimable and len(table.slots) == 10
    assert table.version == restored.terms_persisted  # no slot was added since the restore
    # ... and the snapshot is not written again when nothing changed
    mtime = (index_dir / SNAPSHOT_NAME).stat().st_mtime_ns
    assert persist_terms(restored, whole_pass=True) is False
    assert (index_dir / SNAPSHOT_NAME).stat().st_mtime_ns == mtime


def test_a_changed_session_never_claims_its_old_slot_and_the_old_slot_is_dropped(tmp_path: Path):
    agent = tmp_path / "agent"
    paths = _sessions(agent, 8)
    _index(agent, hot_sessions=1)
    # the oldest session (cold) changes: its digest is rebuilt with new words
    old = paths[0]
    rows = [header("s000", CWD), user("u0", None, "rewritten entirely brand_new_word", 1)]
    write_session(agent, CWD, old.name, rows, 1_700_000_000)
    eng = engine(agent, hot_sessions=1)
    indexer = BackgroundIndexer(eng)
    indexer.run_once()
    out = eng.recall({"query": "brand_new_word", "scope": "global"})
    assert [it["pointer"]["sessionId"] for it in out["items"]] == ["s000"]
    assert eng.recall({"query": "only_000", "scope": "global"})["items"] == []
    table = eng.cold
    assert not table.claimable  # the old slot was never claimed, and the whole pass dropped it
    assert len(table.slots) == 7
    assert table.sessions_with("only_000").tolist() == [] or all(
        s not in table.slots for s in table.sessions_with("only_000")
    )
    # the snapshot written after that pass restores the current vocabularies only
    again = engine(agent, hot_sessions=1)
    assert [again.recall(q) for q in QUERIES] == [eng.recall(q) for q in QUERIES]
    assert not again.cold.claimable and again.cold.version == again.terms_persisted


def test_a_damaged_snapshot_on_disk_is_removed_and_costs_only_time(tmp_path: Path):
    agent = tmp_path / "agent"
    _sessions(agent, 6)
    first = _index(agent, hot_sessions=1)
    snap = Path(first.index_dir) / SNAPSHOT_NAME
    data = bytearray(snap.read_bytes())
    data[len(data) // 2] ^= 0xFF
    snap.write_bytes(bytes(data))
    eng = engine(agent, hot_sessions=1)
    assert [eng.recall(q) for q in QUERIES] == [first.recall(q) for q in QUERIES]
    assert not snap.exists()  # removed when it did not restore
    assert len(eng.cold.slots) == 5


def test_a_sealed_record_with_a_vocabulary_out_of_order_is_still_refused(tmp_path: Path):
    """The vocabulary is left undecoded only when the restored table knows its bytes; any
    other is checked as before: sorted, unique strings."""
    agent = tmp_path / "agent"
    _sessions(agent, 6)
    first = _index(agent, hot_sessions=1)
    index_dir = Path(first.index_dir)
    os.unlink(index_dir / SNAPSHOT_NAME)
    name = disk_cache.cache_name(str(agent / "sessions" / "--home-user-snap--" / "s000.jsonl"), "active", "digest")
    rec = disk_cache.decode_record((index_dir / name).read_bytes())
    assert rec is not None and len(rec["vocabulary"]) > 2
    rec["vocabulary"] = list(reversed(rec["vocabulary"]))
    tampered = seal.apply_cache_metrics_slow(rec, rec["size"])
    (index_dir / name).write_bytes(tampered)
    eng = engine(agent, hot_sessions=1)
    out = eng.recall({"query": "only_000", "scope": "global"})
    assert [it["pointer"]["sessionId"] for it in out["items"]] == ["s000"]
    assert (index_dir / name).read_bytes() != tampered  # refused, rebuilt from source and rewritten


def test_a_builders_vocabulary_key_files_only_the_vocabulary_it_was_made_for(tmp_path: Path):
    """A builder sends the key of the vocabulary it built; the state table uses it once.
    A later vocabulary of the same state (an append re-derives it) is keyed afresh from its
    own bytes when a snapshot is written, never under the old key."""
    from fabric_lsp.engine.memory.cold_index import StateTable
    from fabric_lsp.engine.memory.config import MemoryConfig
    from fabric_lsp.engine.memory.state_build import build_detached

    agent = tmp_path / "agent"
    path = _sessions(agent, 1)[0]
    state = build_detached(str(path), "active", "cold", MemoryConfig(), ref_id="s000", ref_cwd=CWD)
    vocab = list(state.digest["vocabulary"])
    assert state.vocab_key == vocabulary_key(disk_cache.encoder.encode(vocab))
    table = StateTable(ColdTermTable())
    table[(str(path), "active")] = state
    first = state.cold_slot
    assert table.table.keys[first] == vocabulary_key(disk_cache.encoder.encode(vocab)) and state.vocab_key is None
    state.digest = dict(state.digest, vocabulary=vocab + ["zz_appended"])  # what an append re-derives
    table[(str(path), "active")] = state
    assert state.cold_slot != first and state.cold_slot not in table.table.keys
    back = ColdTermTable()
    assert back.restore(table.table.snapshot())
    assert back.claim(vocabulary_key(disk_cache.encoder.encode(vocab + ["zz_appended"]))) is not None
    assert back.claim(vocabulary_key(disk_cache.encoder.encode(vocab))) is None


def test_the_indexer_thread_writes_the_snapshot_only_once_no_call_is_running(tmp_path: Path):
    """The snapshot costs about a second at 1 GB: the indexer's thread writes it when the
    engine has been idle for a while, never while a call runs (and at stop otherwise)."""
    agent = tmp_path / "agent"
    _sessions(agent, 12)
    eng = engine(agent, hot_sessions=2)
    snapshot = Path(eng.index_dir) / SNAPSHOT_NAME
    indexer = BackgroundIndexer(eng, workers=1)
    indexer.snapshot_idle_s = 0.2
    # (each vocabulary interned as it comes: a pass interns what is pending only once no
    # call runs, and the call below runs the whole time)
    eng.cold._pending_max = 0
    try:
        with eng.call():  # a call runs the whole time the indexer works
            indexer.start()
            assert indexer.wait_idle(120)
            assert eng.idle_seconds() == 0.0
            assert not indexer.wait_snapshot(1, timeout=0.5)
            assert not snapshot.exists()
        assert indexer.wait_snapshot(1, timeout=30)
        assert eng.idle_seconds() >= 0.2
        assert snapshot.is_file()
    finally:
        indexer.stop()


def test_stopping_the_indexer_writes_the_snapshot_it_had_not_written(tmp_path: Path):
    agent = tmp_path / "agent"
    _sessions(agent, 12)
    eng = engine(agent, hot_sessions=2)
    snapshot = Path(eng.index_dir) / SNAPSHOT_NAME
    indexer = BackgroundIndexer(eng, workers=1)
    indexer.snapshot_idle_s = 3600.0  # never idle long enough
    indexer.start()
    assert indexer.wait_idle(120)
    assert not snapshot.exists()
    indexer.stop()
    assert snapshot.is_file()
    restored = engine(agent, hot_sessions=2)
    restored.recall({"query": "shared", "scope": "global"}, cwd=CWD)
    # every cold digest claimed a slot restored from the stop-time snapshot
    assert not restored.cold.claimable and len(restored.cold.slots) == 10
    assert restored.cold.version == restored.terms_persisted


def test_keys_a_snapshot_computed_are_kept_only_for_slots_that_still_hold_that_vocabulary():
    from fabric_lsp.engine.memory.cold_snapshot import encode_snapshot

    table = ColdTermTable()
    kept = table.add(["alpha", "beta"])  # interned without a key (built in the server)
    gone = table.add(["gamma"])
    capture = table.capture()
    data = encode_snapshot(capture)
    table.remove(gone)  # changed while the snapshot was encoded
    table.remember_keys(capture)
    assert table.keys == {kept: vocabulary_key(disk_cache.encoder.encode(["alpha", "beta"]))}
    # the next snapshot uses the kept key and gives the same bytes for the same slots
    again = ColdTermTable()
    again.add(["alpha", "beta"])
    assert table.snapshot() == again.snapshot()
    assert ColdTermTable().restore(data)
