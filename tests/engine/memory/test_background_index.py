"""Whole-history recall (issue 15): per-call budgets bound one call's synchronous work, not
what the index can hold; the background indexer indexes every session; answers meanwhile
are honest; the compact cold term table answers exactly like per-session sets.

No timing: every wait is for an explicit event (a sink event, `wait_idle`)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memory_kit import engine, header, user, write_session

from fabric_lsp.engine.activity import ActivityEvent, CancelToken, IndexingEvent, ProgressEvent
from fabric_lsp.engine.memory import background as background_mod
from fabric_lsp.engine.memory import index as index_mod
from fabric_lsp.engine.memory.background import BackgroundIndexer
from fabric_lsp.engine.memory.cold_index import (
    ColdTermTable,
    TermsSet,
    score_digests_inverted,
)
from fabric_lsp.engine.memory.search import DigestView, score_digests
from tests.support.examples import profile_examples

CWD = "/home/user/whole"


def _sessions(agent: Path, n: int, *, filler: int = 0) -> list[Path]:
    out = []
    for i in range(n):
        text = f"common words about session {i} unique_{i:03d}" + (" pad" * filler)
        if i == 0:
            text += " oldest_rare_fact"
        rows = [header(f"w{i:03d}", CWD), user(f"u{i}", None, text, 1)]
        out.append(write_session(agent, CWD, f"w{i:03d}.jsonl", rows, 1_700_000_000 + i * 10))
    return out


def _cov(out: dict) -> dict:
    return out["coverage"]


def test_budget_charges_only_builds_so_repeated_calls_reach_everything(tmp_path: Path):
    agent = tmp_path / "agent"
    _sessions(agent, 30)
    eng = engine(agent, max_sync_sessions=10, hot_sessions=3)
    first = eng.recall({"query": "oldest_rare_fact", "scope": "global"}, cwd=CWD)
    assert _cov(first)["indexedSessions"] == 10 and "max_sync_sessions" in _cov(first)["reasons"]
    assert not first["authoritative"] and first["text"].startswith("No indexed matches")
    second = eng.recall({"query": "oldest_rare_fact", "scope": "global"}, cwd=CWD)
    assert _cov(second)["indexedSessions"] == 20
    third = eng.recall({"query": "oldest_rare_fact", "scope": "global"}, cwd=CWD)
    assert _cov(third)["complete"] and _cov(third)["indexedSessions"] == 30
    assert [it["pointer"]["sessionId"] for it in third["items"]] == ["w000"]
    # a fresh engine (a restarted server, the CLI) reads the disk cache at no budget cost
    again = engine(agent, max_sync_sessions=10, hot_sessions=3)
    out = again.recall({"query": "oldest_rare_fact", "scope": "global"}, cwd=CWD)
    assert _cov(out)["complete"] and out["items"][0]["pointer"]["sessionId"] == "w000"


def test_background_indexer_indexes_everything_and_answers_stay_honest(tmp_path: Path):
    agent = tmp_path / "agent"
    _sessions(agent, 40)
    eng = engine(agent, max_sync_sessions=5, hot_sessions=4)
    eng.parallel_workers = 1
    indexer = BackgroundIndexer(eng, workers=1)
    eng.background = indexer  # attached, not yet running: what is over the budgets is left to it
    during = eng.recall({"query": "oldest_rare_fact", "scope": "global"}, cwd=CWD)
    cov = _cov(during)
    assert not cov["complete"] and not during["authoritative"]
    assert {"indexing_in_progress", "max_sync_sessions"} <= set(cov["reasons"])
    assert cov["indexedSessions"] == 5  # the per-call budget, built synchronously as the reference does
    assert not during["text"].startswith("No matches")
    events: list[ActivityEvent] = []
    summary = indexer.run_once(sink=events.append)
    assert summary["built"] == 35 and summary["indexed"] == 40
    assert [e.phase for e in events if isinstance(e, IndexingEvent)] == ["begin", "end"]
    progress = [e for e in events if isinstance(e, ProgressEvent)]
    assert progress and progress[-1].message == "Indexing 40/40 sessions"
    assert indexer.run_once()["built"] == 0  # nothing left: the verification pass
    indexer.pending = False
    out = eng.recall({"query": "oldest_rare_fact", "scope": "global"}, cwd=CWD)
    assert _cov(out)["complete"] and out["authoritative"]
    assert [it["pointer"]["sessionId"] for it in out["items"]] == ["w000"]


def test_indexing_resumes_after_restart_without_redoing_finished_sessions(tmp_path: Path):
    agent = tmp_path / "agent"
    _sessions(agent, 24)
    eng = engine(agent, hot_sessions=2)
    stop = CancelToken()
    seen: list[dict] = []

    def sink(event: ActivityEvent) -> None:
        seen.append(event)
        if isinstance(event, ProgressEvent) and event.message.startswith("Indexing 10/"):
            stop.cancel()  # stop part-way: a shutdown in the middle of a pass

    indexer = BackgroundIndexer(eng, workers=1)
    indexer._last_report = float("-inf")
    import fabric_lsp.engine.memory.background as bg

    old = bg.PROGRESS_INTERVAL_S
    bg.PROGRESS_INTERVAL_S = -1.0  # report every session (events, not time)
    try:
        try:
            indexer.run_once(sink=sink, cancel=stop)
        except Exception as err:  # Cancelled
            assert type(err).__name__ == "Cancelled"
    finally:
        bg.PROGRESS_INTERVAL_S = old
    assert [e.phase for e in seen if isinstance(e, IndexingEvent)] == ["begin", "end"]
    assert isinstance(seen[-1], IndexingEvent) and seen[-1].cancelled is True
    restarted = engine(agent, hot_sessions=2)
    summary = BackgroundIndexer(restarted, workers=1).run_once()
    assert summary["loaded"] == 10 and summary["built"] == 14 and summary["indexed"] == 24


def test_a_session_appended_during_indexing_ends_up_current(tmp_path: Path):
    agent = tmp_path / "agent"
    files = _sessions(agent, 12)
    eng = engine(agent, hot_sessions=2)
    target = files[0]  # the oldest: a cold session
    appended = threading.Event()

    def sink(event: ActivityEvent) -> None:
        if isinstance(event, ProgressEvent) and not appended.is_set():
            with target.open("a", encoding="utf-8") as fh:
                fh.write(
                    json.dumps(
                        {
                            "type": "message",
                            "id": "late1",
                            "parentId": "u0",
                            "timestamp": "2025-01-01T00:01:00.000Z",
                            "message": {"role": "user", "content": "appended_while_indexing"},
                        }
                    )
                    + "\n"
                )
            appended.set()

    indexer = BackgroundIndexer(eng, sink, workers=1)
    indexer.start()
    try:
        assert indexer.wait_idle(120)
    finally:
        indexer.stop()
    assert appended.is_set()
    out = eng.recall({"query": "appended_while_indexing", "scope": "global"}, cwd=CWD)
    assert _cov(out)["complete"]
    # appended last, it is now the newest session: hot, so a segment
    assert [it[it["kind"]]["sessionId"] for it in out["items"]] == ["w000"]
    state = eng.states[(str(target), "active")]
    from fabric_lsp.engine.memory.source import stat_key

    assert state.key == stat_key(str(target))


def test_cancelling_a_request_never_cancels_the_indexer(tmp_path: Path):
    agent = tmp_path / "agent"
    _sessions(agent, 15)
    eng = engine(agent, hot_sessions=2)
    indexer = BackgroundIndexer(eng, workers=1)
    eng.background = indexer
    token = CancelToken()
    token.cancel()
    try:
        eng.recall({"query": "common", "scope": "global"}, cwd=CWD, cancel=token)
    except Exception as err:
        assert type(err).__name__ == "Cancelled"
    summary = indexer.run_once()
    assert summary["indexed"] == 15 and not indexer._stop.cancelled


def test_cold_digests_live_in_one_term_table(tmp_path: Path):
    agent = tmp_path / "agent"
    _sessions(agent, 20)
    eng = engine(agent, hot_sessions=2)
    eng.recall({"query": "x", "scope": "global"}, cwd=CWD)
    cold = [s for s in eng.states.values() if s.tier == "cold"]
    assert len(cold) == 18 and all(s.cold_slot is not None for s in cold)
    assert all("vocabulary" not in s.digest and "addresses" not in s.digest and not s.persisted for s in cold)
    stats = eng._cold.stats()
    assert stats["sessions"] == 18
    # "common" is interned once, every cold session points at it
    assert len(eng._cold.sessions_with("common")) == 18
    out = eng.recall({"query": "^unique_00[0-9]$", "queryMode": "regex", "scope": "global"}, cwd=CWD)
    assert sorted(it["pointer"]["sessionId"] for it in out["items"]) == [f"w{i:03d}" for i in range(10)]


_terms = st.text(alphabet="abcde", min_size=1, max_size=3)


@settings(max_examples=profile_examples(60), deadline=None)
@given(
    vocabularies=st.lists(st.lists(_terms, unique=True, max_size=8), min_size=1, max_size=12),
    removed=st.sets(st.integers(0, 11)),
    query=st.lists(_terms, unique=True, min_size=1, max_size=4),
)
def test_inverted_scoring_equals_the_per_session_scan(vocabularies, removed, query):
    table = ColdTermTable()
    slots = [table.add(v) for v in vocabularies]
    for i in removed:
        if i < len(slots):
            table.remove(slots[i])
    kept = [(i, s) for i, s in enumerate(slots) if s in table.slots]
    views = [
        DigestView(
            f"s{i}",
            f"/f{i}",
            "h",
            "active",
            "fp",
            "",
            None,
            float(i),
            list(vocabularies[i]),
            frozenset(vocabularies[i]),
        )
        for i, _ in kept
    ]
    table_views = [
        DigestView(f"s{i}", f"/f{i}", "h", "active", "fp", "", None, float(i), table.vocabulary(s), TermsSet(table, s))
        for i, s in kept
    ]  # type: ignore[arg-type]
    want, wcap = score_digests(views, query)
    got, gcap = score_digests_inverted(table_views, [s for _, s in kept], query, table)
    assert [(h.view.session_id, h.score, h.matched_terms) for h in got] == [
        (h.view.session_id, h.score, h.matched_terms) for h in want
    ]
    assert gcap == wcap
    for (i, _s), v in zip(kept, table_views):
        assert list(v.vocabulary) == list(vocabularies[i])
        for t in query:
            assert (t in v.vocab_set) == (t in vocabularies[i])


@settings(max_examples=profile_examples(100), deadline=None)
@given(vocabularies=st.lists(st.lists(_terms, max_size=10), min_size=1, max_size=12))
def test_term_table_ids_and_postings_equal_a_plain_model(vocabularies):
    """ids in order of first appearance, each slot's ids in vocabulary order, each term's
    postings the ascending slots holding it (repeated terms included)."""
    table = ColdTermTable()
    model_ids: dict[str, int] = {}
    model_postings: dict[str, list[int]] = {}
    for vocab in vocabularies:
        slot = table.add(vocab)
        for term in vocab:
            model_ids.setdefault(term, len(model_ids))
            model_postings.setdefault(term, []).append(slot)
        assert list(table.slots[slot]) == [model_ids[t] for t in vocab]
    assert table.ids == model_ids and table.names == list(model_ids)
    for term, slots in model_postings.items():
        assert list(table.sessions_with(term)) == slots


class _WaitSeen:
    """`building_done` that says when the indexer first waits on it (an event, no timing)."""

    def __init__(self, cond: threading.Condition) -> None:
        self.cond = cond
        self.waiting = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.waiting.set()
        return self.cond.wait(timeout)

    def notify_all(self) -> None:
        self.cond.notify_all()


@pytest.mark.parametrize("workers", [1, 2])
def test_the_indexer_takes_a_session_a_call_is_building_instead_of_building_it_too(tmp_path: Path, workers: int):
    agent = tmp_path / "agent"
    files = _sessions(agent, 10)
    eng = engine(agent, hot_sessions=2)
    key = (str(files[4]), "active")  # a cold session
    eng.building.add(key)  # a call is building it
    seen = _WaitSeen(eng.building_done)
    eng.building_done = seen  # type: ignore[assignment]
    indexer = BackgroundIndexer(eng, workers=workers)
    result: dict = {}

    def run() -> None:
        try:
            result.update(indexer.run_once())
        finally:
            seen.waiting.set()  # (a pass that never waits ends the wait too, and fails below)

    worker = threading.Thread(target=run)
    worker.start()
    try:
        assert seen.waiting.wait(60)  # every other session is done; this one waits for the call
        assert worker.is_alive() and key not in eng.states
        from fabric_lsp.engine.memory.state_build import build_state

        with eng.lock:  # the call ends: it adopts its state and leaves the set
            state = build_state(key[0], "active", "cold", eng.config, ref_id="w004", ref_cwd=CWD)
            index_mod.adopt(eng, state)
            eng.building.discard(key)
            seen.notify_all()
    finally:
        worker.join(60)
    assert result["built"] == 9 and result["indexed"] == 10
    assert eng.states[key] is state


@pytest.mark.parametrize("workers", [1, 2])
def test_a_session_a_call_adopted_after_the_pass_looked_is_not_built_again(tmp_path: Path, workers: int):
    agent = tmp_path / "agent"
    files = _sessions(agent, 10)
    eng = engine(agent, hot_sessions=2)
    key = (str(files[4]), "active")
    adopted: list = []
    looked = background_mod.cached

    def cached(eng_, ref, branches, tier):
        if (ref.file, branches) == key and not adopted:
            # the pass sees no state; right after, a call builds and adopts it
            from fabric_lsp.engine.memory.state_build import build_state

            adopted.append(build_state(ref.file, branches, tier, eng.config, ref_id=ref.id, ref_cwd=ref.cwd))
            index_mod.adopt(eng, adopted[0])
            return None, False
        return looked(eng_, ref, branches, tier)

    background_mod.cached = cached  # what the indexer's pass looks through (index.cached)
    try:
        summary = BackgroundIndexer(eng, workers=workers).run_once()
    finally:
        background_mod.cached = looked
    assert summary["built"] == 9 and summary["indexed"] == 10
    assert eng.states[key] is adopted[0]


def test_a_call_names_the_sessions_it_builds_while_it_builds_them(tmp_path: Path):

    agent = tmp_path / "agent"
    files = _sessions(agent, 6)
    eng = engine(agent, hot_sessions=2)
    during: list[set] = []
    real = index_mod.build_many

    def build_many(eng_, todo, branches, cancel, progress, **kw):
        during.append(set(eng_.building))
        return real(eng_, todo, branches, cancel, progress, **kw)

    index_mod.build_many = build_many
    try:
        eng.recall({"query": "common", "scope": "global"}, cwd=CWD)
    finally:
        index_mod.build_many = real
    assert during == [{(str(f), "active") for f in files}]
    assert eng.building == set()  # and no longer once adopted


def test_a_call_waits_for_a_session_the_indexer_is_building_instead_of_building_it_too(tmp_path: Path):
    """Issue 36: the reverse of the test above. A session in flight in the indexer counts as
    the call's work: the call waits (releasing the engine lock) and takes the indexer's
    state; the answer is complete and nothing is built twice."""

    from fabric_lsp.engine.memory.state_build import build_state

    agent = tmp_path / "agent"
    files = _sessions(agent, 6)
    eng = engine(agent, hot_sessions=2)
    key = (str(files[0]), "active")  # the oldest: cold
    with eng.lock:
        eng.indexer_building.add(key)  # the indexer has it in flight
    built_by_call: list[str] = []
    real = index_mod.build_many

    def build_many(eng_, todo, branches, cancel, progress, **kw):
        built_by_call.extend(r.file for r, _ in todo)
        return real(eng_, todo, branches, cancel, progress, **kw)

    seen = _WaitSeen(eng.building_done)
    eng.building_done = seen  # type: ignore[assignment]
    out: dict = {}
    index_mod.build_many = build_many
    try:
        call = threading.Thread(
            target=lambda: out.update(eng.recall({"query": "oldest_rare_fact", "scope": "global"}, cwd=CWD))
        )
        call.start()
        assert seen.waiting.wait(60)  # the call waits for the indexer (with the lock released)
        with eng.lock:  # the indexer adopts its state and leaves the set
            state = build_state(key[0], "active", "cold", eng.config, ref_id="w000", ref_cwd=CWD)
            index_mod.adopt(eng, state)
            eng.indexer_building.discard(key)
            seen.notify_all()
        call.join(60)
    finally:
        index_mod.build_many = real
    assert key[0] not in built_by_call and len(built_by_call) == 5
    assert eng.states[key] is state
    assert _cov(out)["complete"] and [it["pointer"]["sessionId"] for it in out["items"]] == ["w000"]


@pytest.mark.parametrize("hot", [0, 2, 50])
def test_within_the_budgets_the_first_answer_with_an_indexer_attached_is_complete(tmp_path: Path, hot: int):
    """Issue 36: a pending background indexer no longer makes a call leave cold sessions
    out: within the budgets the first answer equals the answer once everything is indexed."""
    agent = tmp_path / "agent"
    _sessions(agent, 12)
    queries = [
        {"query": "oldest_rare_fact", "scope": "global"},
        {"query": "common words", "scope": "global"},
        {"query": "unique_007", "scope": "project"},
    ]
    eng = engine(agent, hot_sessions=hot)
    indexer = BackgroundIndexer(eng, workers=1)
    eng.background = indexer  # attached and pending, not yet running
    first = [eng.recall(q, cwd=CWD) for q in queries] + [eng.sessions({"scope": "global"})]
    indexer.run_once()
    indexer.pending = False
    after = [eng.recall(q, cwd=CWD) for q in queries] + [eng.sessions({"scope": "global"})]
    assert first == after
    assert all(a["coverage"]["complete"] for a in first)
