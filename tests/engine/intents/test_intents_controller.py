"""Controller semantics of seed 001 (reference suite E1–E18, plus persistence identity).

The commit function is the controller's own seam (the seed's `context.compact`); these
tests drive it directly. The commit path against real files is tested elsewhere.
"""

from __future__ import annotations

import os
import stat
import threading

import pytest

from fabric_lsp.engine.activity import CancelToken
from fabric_lsp.engine.intents.controller import (
    ABORTED_BEFORE_START,
    Committed,
    CompactController,
    Deferred,
    Failed,
    custom_instructions,
)
from fabric_lsp.engine.intents.limits import TYPED_REQUEST_PREFIX
from fabric_lsp.engine.intents.store import IntentStore

SESSION = "/tmp/does-not-matter/session.jsonl"


@pytest.fixture
def store(tmp_path):
    return IntentStore(tmp_path / "state")


def make(store, **kw):
    return CompactController(store, SESSION, **kw)


def ok(summary="S", tokens=1500, after=200, entry="abcd1234"):
    return lambda intent, iid: Committed(
        summary=summary, tokens_before=tokens, entry_id=entry, estimated_tokens_after=after
    )


def test_records_pending_intent_and_reports_it(store):
    c = make(store)
    intent = c.request(reason="r", instructions="keep x")
    assert c.status() == {"pending": intent}
    assert list(intent) == ["requestedBy", "requestedAt", "reason", "instructions"]
    assert intent["requestedBy"] == "model" and isinstance(intent["requestedAt"], int)


def test_defaults_requested_by_and_omits_empty_fields(store):
    c = make(store)
    intent = c.request(reason="", instructions="", requested_by="")
    assert intent == {"requestedBy": "model", "requestedAt": intent["requestedAt"]}
    assert make(store).request(default_requested_by="user")["requestedBy"] == "user"
    assert c.request(preserve=[])["preserve"] == []  # present even when empty


def test_new_request_replaces_pending_keeping_latest(store):
    c = make(store)
    c.request(instructions="first")
    second = c.request(instructions="second")
    assert c.status()["pending"] == second


def test_cancel_clears_pending_without_touching_last(store):
    c = make(store)
    c.request(instructions="a")
    c.maybe_commit(ok())
    last = c.status()["last"]
    c.request(instructions="b")
    assert c.cancel() is True
    assert c.status() == {"last": last}
    assert c.cancel() is False  # safe when nothing is pending


def test_maybe_commit_is_noop_without_pending(store):
    calls = []
    c = make(store)
    assert c.maybe_commit(lambda i, iid: calls.append(i)) is None
    assert calls == []


def test_reentrant_calls_share_the_inflight_commit_and_newer_intent_waits(store):
    c = make(store)
    c.request(instructions="first")
    started, release = threading.Event(), threading.Event()
    calls = []

    def slow(intent, iid):
        calls.append(intent["instructions"])
        started.set()
        release.wait(5)
        return Committed(summary="S1", tokens_before=10, entry_id="11111111")

    results = {}
    t1 = threading.Thread(target=lambda: results.setdefault("a", c.maybe_commit(slow)))
    t1.start()
    assert started.wait(5)
    newer = c.request(instructions="second")  # allowed while in flight
    t2 = threading.Thread(target=lambda: results.setdefault("b", c.maybe_commit(slow)))
    t2.start()
    release.set()
    t1.join(5)
    t2.join(5)
    assert calls == ["first"]  # the re-entrant call did not start a second compaction
    assert results["a"] is results["b"] and results["a"]["summary"] == "S1"
    assert c.status()["pending"] == newer  # cleared only its own intent
    c.maybe_commit(ok(summary="S2", entry="22222222"))
    assert c.status() == {"last": c.status()["last"]} and c.status()["last"]["summary"] == "S2"


def test_commit_records_last_and_forwards_custom_instructions(store):
    seen = []
    c = make(store)
    c.request(instructions="Keep the failing test name")

    def fn(intent, iid):
        seen.append(custom_instructions(intent))
        return Committed(summary="sum", tokens_before=1500, entry_id="abcd1234", estimated_tokens_after=200)

    record = c.maybe_commit(fn)
    assert seen == ["Keep the failing test name"]
    assert record == {
        "at": record["at"],
        "requestedBy": "model",
        "status": "committed",
        "summary": "sum",
        "tokensBefore": 1500,
        "estimatedTokensAfter": 200,
        "entryId": "abcd1234",
    }
    assert c.status() == {"last": record}


def test_typed_preserve_is_encoded_with_instructions(store):
    c = make(store)
    intent = c.request(instructions="keep", preserve=["Auth regression is still open", "tests/auth.test.ts"])
    encoded = custom_instructions(intent)
    assert encoded == TYPED_REQUEST_PREFIX + (
        '{"version":1,"instructions":"keep","preserve":["Auth regression is still open","tests/auth.test.ts"]}'
    )
    assert (
        custom_instructions(make(store).request(preserve=["x"]))
        == TYPED_REQUEST_PREFIX + '{"version":1,"preserve":["x"]}'
    )


def test_custom_instructions_only_when_provided(store):
    c = make(store)
    assert custom_instructions(c.request()) is None
    assert custom_instructions(c.request(instructions="x")) == "x"


@pytest.mark.parametrize(
    "message", ["Compaction cancelled", "Already compacted", "Nothing to compact (session too small)"]
)
def test_benign_outcomes_clear_quietly(store, message):
    fired = []
    c = make(store, on_commit=fired.append)
    c.request(instructions="x")
    assert c.maybe_commit(lambda i, iid: Failed(message)) is None
    assert c.status() == {}
    assert fired == []


def test_other_errors_record_failure_and_clear(store):
    fired = []
    c = make(store, on_commit=fired.append)
    c.request(instructions="x", requested_by="skill")
    record = c.maybe_commit(lambda i, iid: Failed("API quota exceeded"))
    assert record == {"at": record["at"], "requestedBy": "skill", "status": "failed", "error": "API quota exceeded"}
    assert c.status() == {"last": record}
    assert fired == [record]


def test_aborted_boundary_fails_without_calling_commit(store):
    calls = []
    c = make(store)
    c.request()
    token = CancelToken()
    token.cancel()
    record = c.maybe_commit(lambda i, iid: calls.append(1), abort=token)
    assert calls == [] and record["status"] == "failed" and record["error"] == ABORTED_BEFORE_START
    assert "pending" not in c.status()


def test_throwing_commit_records_failure(store):
    c = make(store)
    c.request()

    def boom(intent, iid):
        raise RuntimeError("engine exploded")

    record = c.maybe_commit(boom)
    assert record["status"] == "failed" and record["error"] == "engine exploded"
    c.request()
    record = c.maybe_commit(lambda i, iid: (_ for _ in ()).throw(RuntimeError()))
    assert record["error"] == "Compaction failed to start"


def test_on_request_fires(store):
    seen = []
    c = make(store, on_request=seen.append)
    intent = c.request(reason="why")
    assert seen == [intent]


def test_on_commit_fires_for_committed_and_failed(store):
    fired = []
    c = make(store, on_commit=fired.append)
    c.request()
    r1 = c.maybe_commit(ok())
    c.request()
    r2 = c.maybe_commit(lambda i, iid: Failed("boom"))
    assert fired == [r1, r2] and [r["status"] for r in fired] == ["committed", "failed"]


def test_inflight_resets_after_failure_so_new_intent_commits(store):
    c = make(store)
    c.request()
    c.maybe_commit(lambda i, iid: Failed("boom"))
    assert not c.in_flight
    c.request(instructions="again")
    assert c.maybe_commit(ok())["status"] == "committed"


def test_deferred_keeps_intent_pending_and_records_nothing(store):
    fired = []
    c = make(store, on_commit=fired.append)
    intent = c.request(instructions="x")
    assert c.maybe_commit(lambda i, iid: Deferred("not settled")) is None
    assert c.status() == {"pending": intent} and fired == [] and not c.in_flight


def test_cancel_during_commit_does_not_stop_the_captured_commit(store):
    c = make(store)
    c.request(instructions="x")

    def fn(intent, iid):
        assert c.cancel() is True
        return Committed(summary="S", tokens_before=1, entry_id="12345678")

    assert c.maybe_commit(fn)["status"] == "committed"
    assert "pending" not in c.status()


def test_state_is_durable_private_and_shared_between_controllers(store):
    a = make(store)
    intent = a.request(instructions="persist me")
    b = make(IntentStore(store.state_dir))  # a restarted process
    assert b.status() == {"pending": intent}
    path = store.state_path(SESSION)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(store.state_dir).st_mode) == 0o700
    record = b.maybe_commit(ok())
    assert a.status() == {"last": record}
    assert [p.name for p in store.state_dir.iterdir() if p.name.endswith(".tmp")] == []


def test_invalid_requests_record_nothing(store):
    c = make(store)
    for kwargs in (
        {"preserve": "x"},
        {"preserve": [1]},
        {"instructions": "界" * 3000},
        {"preserve": ["a"] * 17},
        {"preserve": ["x" * 2049]},
        {"instructions": "\ud800"},
    ):
        with pytest.raises(ValueError):
            c.request(**kwargs)
    assert c.status() == {}


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.support.examples import profile_examples

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("request"), st.sampled_from(["", "a", "b"]), st.sampled_from([None, [], ["p"]])),
        st.tuples(st.just("cancel")),
        st.tuples(st.just("commit"), st.sampled_from(["ok", "quiet", "fail", "defer", "raise"])),
    ),
    max_size=25,
)


@settings(max_examples=profile_examples(80), deadline=None)
@given(ops=OPS)
def test_controller_matches_a_model_of_seed_001(tmp_path_factory, ops):
    """Any sequence of request/cancel/commit leaves the same pending/last as a tiny model."""
    c = CompactController(IntentStore(tmp_path_factory.mktemp("state")), SESSION)
    model_pending = None
    model_last = None
    outcomes = {
        "ok": Committed(summary="S", tokens_before=3, entry_id="0000000a"),
        "quiet": Failed("Already compacted"),
        "fail": Failed("boom"),
        "defer": Deferred("busy"),
    }
    for op in ops:
        if op[0] == "request":
            kwargs = {"instructions": op[1]}
            if op[2] is not None:
                kwargs["preserve"] = op[2]
            intent = c.request(**kwargs)
            model_pending = {k: v for k, v in intent.items() if k != "requestedAt"}
        elif op[0] == "cancel":
            assert c.cancel() is (model_pending is not None)
            model_pending = None
        else:
            kind = op[1]

            def fn(intent, iid, kind=kind):
                if kind == "raise":
                    raise RuntimeError("threw")
                return outcomes[kind]

            record = c.maybe_commit(fn)
            if model_pending is None:
                assert record is None
            elif kind == "defer":
                assert record is None
            else:
                if kind == "ok":
                    model_last = ("committed", None)
                elif kind in ("fail", "raise"):
                    model_last = ("failed", "boom" if kind == "fail" else "threw")
                if kind == "quiet":
                    assert record is None
                else:
                    assert (record["status"], record.get("error")) == model_last
                model_pending = None
        status = c.status()
        got_pending = status.get("pending")
        assert (
            None if got_pending is None else {k: v for k, v in got_pending.items() if k != "requestedAt"}
        ) == model_pending
        got_last = status.get("last")
        assert (None if got_last is None else (got_last["status"], got_last.get("error"))) == model_last
