"""The cold term table's pending vocabularies (cold_index.py): a vocabulary added is
interned later, lowest slot first, and every answer meanwhile — the slots holding a term,
a slot's vocabulary and membership, the snapshot — is the one a table interning each
vocabulary as it is added gives (hypothesis, over sequences of adds, removals, partial
interning and queries). Views made while a slot was pending keep no list once it is
interned; the indexer leaves nothing pending after a pass."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from memory_kit import engine, header, user, write_session

from fabric_lsp.engine.memory import cold_index
from fabric_lsp.engine.memory.background import BackgroundIndexer
from fabric_lsp.engine.memory.cold_index import ColdTermTable
from tests.support.examples import profile_examples

CWD = "/home/user/pending"

_TERM = st.sampled_from(["a", "b", "c", "zz", "é", "x_1", "q", "a b"])
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(_TERM, max_size=6)),
        st.tuples(st.just("remove"), st.integers(0, 9)),
        st.tuples(st.just("settle"), st.integers(0, 8)),
        st.tuples(st.just("ask"), _TERM),
        st.tuples(st.just("view"), st.integers(0, 9)),
    ),
    max_size=40,
)


def _answers(table: ColdTermTable, slots: list[int], term: str) -> tuple:
    return (
        list(table.sessions_with(term)),
        [table.contains(s, term) for s in slots],
        [list(table.vocabulary(s)) for s in slots],
        len(table),
    )


@settings(max_examples=profile_examples(150), deadline=None)
@given(ops=_OPS, cap=st.sampled_from([10**9, 7]))
def test_pending_vocabularies_answer_as_if_interned_when_added(ops, cap):
    eager, lazy = ColdTermTable(pending_max_terms=0), ColdTermTable(pending_max_terms=cap)
    slots: list[int] = []
    views = []
    for op, arg in ops:
        if op == "add":
            slot = eager.add(list(arg))
            assert lazy.add(list(arg)) == slot
            slots.append(slot)
            assert not eager._pending
            if cap == 7:
                assert lazy._pending_terms <= 7
        elif op == "remove" and arg < len(slots):
            eager.remove(slots[arg])
            lazy.remove(slots[arg])
        elif op == "settle":
            lazy.settle(arg)
        elif op == "ask":
            assert _answers(lazy, slots, arg) == _answers(eager, slots, arg)
        elif op == "view" and arg < len(slots):
            views.append((lazy.vocabulary(slots[arg]), list(eager.vocabulary(slots[arg]))))
    for view, want in views:
        assert list(view) == want and len(view) == len(want) and bool(view) == bool(want)
        assert view[:] == want and (not want or view[-1] == want[-1])
    assert lazy.snapshot() == eager.snapshot()  # (interns what is pending: same ids, same bytes)
    assert not lazy._pending and lazy.names == eager.names and lazy.ids == eager.ids
    assert {k: list(v) for k, v in lazy.slots.items()} == {k: list(v) for k, v in eager.slots.items()}
    assert [list(p) for p in lazy.postings] == [list(p) for p in eager.postings]
    for view, want in views:  # interned now: each view reads the ids, holding no list
        assert view._ids is not None and list(view) == want


def test_a_view_of_a_pending_slot_keeps_its_terms_after_the_slot_is_removed():
    table = ColdTermTable()
    keep, gone = table.add(["a", "b"]), table.add(["b", "c"])
    view = table.vocabulary(gone)
    assert view._ids is None and list(view) == ["b", "c"]
    table.remove(gone)  # (interns first: the view gets the ids before the slot goes)
    assert list(view) == ["b", "c"] and list(table.vocabulary(keep)) == ["a", "b"]
    assert list(table.sessions_with("b")) == [keep, gone]  # postings name dead slots too
    assert not table.contains(gone, "b") and table.contains(keep, "b")


def test_a_view_dropped_before_interning_is_not_kept_alive():
    table = ColdTermTable()
    slot = table.add(["a"])
    table.vocabulary(slot)  # (made and dropped)
    gc.collect()
    assert table.settle() and table._views == {}


def test_a_table_asked_often_interns_what_is_pending(monkeypatch):
    table = ColdTermTable()
    slot = table.add(["a", "b"])
    for _ in range(cold_index._SCANNED_LOOKUPS):
        assert list(table.sessions_with("b")) == [slot]
    assert table._pending  # scanned so far
    assert list(table.sessions_with("b")) == [slot]
    assert not table._pending and table._slots[slot].tolist() == [table.ids["a"], table.ids["b"]]
    # the count starts again for what is added later
    later = table.add(["c"])
    assert list(table.sessions_with("c")) == [later] and table._pending


def test_a_pass_interns_what_it_left_pending_before_it_ends(tmp_path: Path):
    """Adopted cold vocabularies wait while the pass builds; the pass interns them before
    its `end` event (the answers after it find them interned), no snapshot needed."""
    agent = tmp_path / "agent"
    for i in range(12):
        rows = [header(f"s{i:03d}", CWD), user(f"u{i}", None, f"shared words session {i} only_{i:03d}", 1)]
        write_session(agent, CWD, f"s{i:03d}.jsonl", rows, 1_700_000_000 + i * 10)
    eng = engine(agent, hot_sessions=2)
    seen: list[tuple[str, int]] = []  # (event, pending slots then), from the indexer's thread

    def sink(event: object) -> None:
        seen.append((getattr(event, "phase", "progress"), len(eng.cold._pending)))

    indexer = BackgroundIndexer(eng, workers=1, sink=sink)
    summary = indexer.run_once(sink=sink, persist=False)
    assert summary["built"] == 12
    assert max(n for _, n in seen) > 0  # adopted, not interned, while the pass built
    assert seen[-1] == ("end", 0)
    table = eng.cold
    assert len(table) == 10 and table._pending_terms == 0 and indexer.snapshots_checked == 0
    assert list(table.sessions_with("shared")) == sorted(table._slots)


def test_waiting_for_no_call_ends_when_the_last_call_does(tmp_path: Path):
    eng = engine(tmp_path / "agent")
    assert eng.wait_no_call(0)
    released = threading.Event()
    with eng.call(), eng.call():
        assert not eng.wait_no_call(0)
        waiter = threading.Thread(target=lambda: eng.wait_no_call() and released.set())
        waiter.start()
    waiter.join(30)
    assert released.is_set()


def test_an_engine_answers_alike_with_vocabularies_pending_or_interned(tmp_path: Path):
    """Literal and regex recalls (a regex runs off the engine lock on interned views),
    through the engine, with the cold vocabularies a call adopted still pending or
    interned on arrival."""
    agent = tmp_path / "agent"
    for i in range(9):
        rows = [header(f"s{i:03d}", CWD), user(f"u{i}", None, f"alpha beta_{i % 3} gamma{i} délta", 1)]
        write_session(agent, CWD, f"s{i:03d}.jsonl", rows, 1_700_000_000 + i * 10)
    answers = []
    for eager in (False, True):
        eng = engine(agent, hot_sessions=2, index_dir=str(tmp_path / f"index-{eager}"))
        if eager:
            eng.cold._pending_max = 0
        got = [eng.recall({"query": "alpha", "scope": "global"}, cwd=CWD)]
        assert eng.cold.has_pending() is not eager
        got.append(eng.recall({"query": "beta_1 gamma4", "scope": "global"}, cwd=CWD))
        got.append(eng.recall({"query": "beta_[12]", "queryMode": "regex", "scope": "global"}, cwd=CWD))
        assert not eng.cold.has_pending()  # (the regex interned them before leaving the lock)
        got.append(eng.recall({"query": "délta", "scope": "global"}, cwd=CWD))
        answers.append(got)
    assert answers[0] == answers[1]
    assert answers[0][2]["items"]  # (the regex found cold sessions)
