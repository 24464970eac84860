"""Intents committed by a live Pi: claims are exclusive, a dead claimant's claim is void,
the outcome is recorded as seed 001 says, and a server hears about a record another
process wrote (fabric/compactionCommitted) within a second."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from fabric_lsp.engine.intents.bridge import claim_intent, finish_claim
from fabric_lsp.engine.intents.controller import CompactController
from fabric_lsp.engine.intents.store import IntentStore
from fabric_lsp.engine.session.lease import LeaseBook
from tests.support.wire import WireIntentsService

HEADER = {
    "type": "session",
    "version": 3,
    "id": "01aaaaaa-0000-7000-8000-000000000001",
    "timestamp": "2026-01-01T00:00:00.000Z",
    "cwd": "/tmp",
}


def session(tmp: Path) -> str:
    path = tmp / "s.jsonl"
    path.write_text(json.dumps(HEADER) + "\n")
    return str(path)


def ask(store: IntentStore, path: str, **fields) -> dict:
    """Record an intent as the service does, without its request-time check (this header-only
    session has nothing to compact: the service would refuse the request)."""
    return CompactController(store, path).request(default_requested_by="user", **fields)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_one_claim_at_a_time_and_a_dead_claimant_frees_the_intent(tmp_path):
    store = IntentStore(tmp_path / "state")
    path = session(tmp_path)
    ask(store, path, instructions="keep the plan", preserve=["a fact"])
    me = os.getpid()
    first = claim_intent(store, path, pid=me)
    assert first is not None and first["customInstructions"].startswith("__pi_fabric_compact_request_v1__:")
    assert claim_intent(store, path, pid=me) == first  # the same process asks again
    other = os.getppid()  # alive, not us
    assert claim_intent(store, path, pid=other) is None
    # a claim of a process that is gone is void
    state = store.load(path)
    state.claim = dict(state.claim, pid=dead_pid(), startTime=None)
    store.save(state)
    assert claim_intent(store, path, pid=other)["intentId"] == first["intentId"]


def test_finish_records_committed_failed_and_quiet_outcomes(tmp_path):
    store = IntentStore(tmp_path / "state")
    path = session(tmp_path)
    svc = WireIntentsService(state_dir=tmp_path / "state")
    for error, expected in (
        ("Nothing to compact (session too small)", None),
        ("Already compacted", None),
        ("Compaction cancelled", None),
        ("Fabric compaction failed: boom", "failed"),
    ):
        ask(store, path)
        claim = claim_intent(store, path, pid=os.getpid())
        record = finish_claim(store, path, intent_id=claim["intentId"], error=error)
        assert (record or {}).get("status") == expected, error
        assert "pending" not in svc.status(path)
        if expected is None:  # a quiet clear says why, for a requester that waits
            assert svc.cleared(path) == {"intentId": claim["intentId"], "reason": error, "at": svc.cleared(path)["at"]}
    ask(store, path, requested_by="editor")
    claim = claim_intent(store, path, pid=os.getpid())
    record = finish_claim(
        store, path, intent_id=claim["intentId"], committed={"entryId": "abcd1234", "summary": "S", "tokensBefore": 900}
    )
    assert record == {
        **record,
        "status": "committed",
        "entryId": "abcd1234",
        "requestedBy": "editor",
        "tokensBefore": 900,
    }
    assert svc.status(path)["last"] == record
    # a stale finish (another intent is pending now) changes nothing
    ask(store, path)
    assert finish_claim(store, path, intent_id=claim["intentId"], error="late") is None
    assert "pending" in svc.status(path)


def test_a_record_written_by_another_process_is_announced_within_a_second(tmp_path):
    path = session(tmp_path)
    heard: list[tuple[str, dict]] = []
    got = threading.Event()

    def on_committed(p: str, record: dict) -> None:
        heard.append((p, record))
        got.set()

    server = WireIntentsService(
        state_dir=tmp_path / "state",
        quiet_interval_s=0.1,
        on_committed=on_committed,
        leases=LeaseBook(tmp_path / "agent"),
    )
    server.start()
    try:
        LeaseBook(tmp_path / "agent").hold(path, pid=os.getpid(), leaf_id="e1")
        server.request(path, {})
        assert server.maybe_commit(path) is None  # held: the live Pi commits, not us
        assert server.status(path)["heldBy"]["pid"] == os.getpid()
        store = IntentStore(tmp_path / "state")  # "the Pi extension's process"
        claim = claim_intent(store, path, pid=os.getpid())
        finish_claim(
            store,
            path,
            intent_id=claim["intentId"],
            committed={"entryId": "beef0001", "summary": "S", "tokensBefore": 10},
        )
        assert got.wait(1.5), "no fabric/compactionCommitted for a record written elsewhere"
        assert heard == [(os.path.realpath(path), server.status(path)["last"])]
    finally:
        server.close()
