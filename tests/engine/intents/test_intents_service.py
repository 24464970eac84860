"""IntentsService end to end on real files with the real Fabric compaction engine."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import threading
import time

import pytest
from intents_kit import REAL_SESSIONS, SessionWriter, age, line

from fabric_lsp.engine.compaction.api import preview_compaction
from fabric_lsp.engine.intents.commit import append_line, compaction_entry, entry_line
from fabric_lsp.engine.intents.store import IntentStore
from fabric_lsp.engine.session import SessionTree, build_context_messages, estimate_tokens, read_session
from tests.support.wire import WireIntentsService

LEGACY_CUT = {"keep_recent_tokens": 100, "context_window": 0}


def copy_fixture(tmp_path, name: str):
    src = next(REAL_SESSIONS.glob(name + "*.jsonl"))
    dst = tmp_path / src.name
    shutil.copy(src, dst)
    age(dst)
    return dst


def service(tmp_path, options=LEGACY_CUT, **kw):
    got: list[tuple[str, dict]] = []
    svc = WireIntentsService(
        state_dir=tmp_path / "state",
        quiet_interval_s=kw.pop("quiet", 0.2),
        compaction_options_provider=(lambda _p: options) if options is not None else None,
        on_committed=lambda p, r: got.append((p, r)),
        **kw,
    )
    return svc, got


def compactions(path):
    return [r for r in read_session(path).records if r.type == "compaction"]


@pytest.mark.parametrize("name", ["02", "03", "04", "06"])
def test_commit_appends_one_pi_compaction_and_keeps_every_byte(tmp_path, name):
    path = copy_fixture(tmp_path, name)
    before = path.read_bytes()
    leaf = SessionTree.from_records(read_session(path).records).leaf_id
    expected = preview_compaction(
        before, session_path=str(path), instructions="Keep the calc fix", preserve=["tests/test_calc.py"], **LEGACY_CUT
    )
    svc, got = service(tmp_path)
    pending = svc.request(
        path, {"instructions": "Keep the calc fix", "preserve": ["tests/test_calc.py"], "reason": "task boundary"}
    )["pending"]
    assert pending["requestedBy"] == "user" and pending["reason"] == "task boundary"
    assert svc.status(path)["settled"] is True
    record = svc.maybe_commit(path)
    after = path.read_bytes()
    assert after.startswith(before) and after.count(b"\n") == before.count(b"\n") + 1
    new = json.loads(after[len(before) :])
    assert list(new) == [
        "type",
        "id",
        "parentId",
        "timestamp",
        "summary",
        "firstKeptEntryId",
        "tokensBefore",
        "details",
        "fromHook",
    ]
    assert new["type"] == "compaction" and new["parentId"] == leaf and new["fromHook"] is True
    assert len(new["id"]) == 8 and int(new["id"], 16) >= 0
    assert new["summary"] == expected["summary"] and new["firstKeptEntryId"] == expected["firstKeptEntryId"]
    assert new["tokensBefore"] == expected["tokensBefore"] and new["details"] == expected["details"]
    assert "tests/test_calc.py" in new["summary"]
    branch = [r.raw for r in SessionTree.from_records(read_session(path).records).branch().entries]
    assert record == {
        "at": record["at"],
        "requestedBy": "user",
        "status": "committed",
        "summary": new["summary"],
        "tokensBefore": new["tokensBefore"],
        "estimatedTokensAfter": sum(estimate_tokens(m) for m in build_context_messages(branch)),
        "entryId": new["id"],
    }
    assert new["timestamp"].endswith("Z") and len(new["timestamp"]) == 24
    assert got == [(str(path), record)]
    assert svc.status(path) == {"last": record, "settled": False}  # just written: not quiet


def test_nothing_to_compact_is_refused_at_request_time_and_clears_quietly_at_commit(tmp_path):
    from fabric_lsp.engine.intents.controller import CompactController
    from fabric_lsp.engine.intents.service import RequestRefused

    path = copy_fixture(tmp_path, "01")
    svc, got = service(tmp_path, options=None)  # Pi defaults: the session is too small
    with pytest.raises(RequestRefused, match=r"^Nothing to compact \(session too small\): Pi would keep all"):
        svc.request(path, {"instructions": "x"})
    assert svc.status(path) == {"settled": True} and svc.cleared(path) is None  # nothing was recorded
    # an intent recorded anyway (by an older fabric-lsp) is cleared quietly at the commit, with the reason
    CompactController(svc.store, str(path)).request(instructions="x")
    intent_id = svc.store.load(str(path)).pending_id
    assert svc.maybe_commit(path) is None
    assert svc.status(path) == {"settled": True} and got == []
    assert svc.cleared(path)["intentId"] == intent_id
    assert svc.cleared(path)["reason"] == "Nothing to compact (session too small)"
    assert not compactions(path) or path.read_bytes() == (REAL_SESSIONS / path.name).read_bytes()


def test_request_after_a_commit_waits_for_the_next_turn(tmp_path):
    path = copy_fixture(tmp_path, "04")
    base = len(compactions(path))
    svc, got = service(tmp_path)
    svc.request(path, {})
    first = svc.maybe_commit(path)
    age(path)
    newer = svc.request(path, {"instructions": "again"})["pending"]
    assert svc.maybe_commit(path) is None  # the leaf is our compaction: not a boundary
    assert svc.status(path) == {"pending": newer, "last": first, "settled": False} and len(got) == 1
    assert len(compactions(path)) == base + 1
    # Pi resumes: a new turn hangs off our compaction; then the newer intent commits.
    leaf = first["entryId"]
    with open(path, "ab") as fp:
        for eid, role, extra in (
            ("f0000001", "user", {"content": "go on " * 300}),
            ("f0000003", "assistant", {"content": [{"type": "text", "text": "step " * 300}], "stopReason": "stop"}),
            ("f0000004", "user", {"content": "and then " * 300}),
            ("f0000002", "assistant", {"content": [{"type": "text", "text": "ok " * 300}], "stopReason": "stop"}),
        ):
            fp.write(
                line(
                    {
                        "type": "message",
                        "id": eid,
                        "parentId": leaf,
                        "timestamp": "2026-11-30T05:00:00.000Z",
                        "message": {"role": role, "timestamp": 1, **extra},
                    }
                )
            )
            leaf = eid
    age(path)
    second = svc.maybe_commit(path)
    assert second is not None and second["status"] == "committed"
    assert compactions(path)[-1].parent_id == "f0000002" and len(compactions(path)) == base + 2


def test_pi_gate_already_compacted_maps_to_a_quiet_clear():
    from fabric_lsp.engine.intents.commit import _engine_failure

    assert (
        _engine_failure({"outcome": "skipped", "reason": "Pi would keep everything: Already compacted"}, None).message
        == "Already compacted"
    )
    assert (
        _engine_failure(
            {"outcome": "skipped", "reason": "Pi would keep everything: Nothing to compact (session too small)"}, None
        ).message
        == "Nothing to compact (session too small)"
    )
    assert (
        _engine_failure({"outcome": "cancelled", "reason": "fabric: nothing to compact"}, None).message
        == "Nothing to compact (session too small)"
    )
    assert (
        _engine_failure({"outcome": "skipped", "reason": 'compaction.engine is "pi"'}, None).message
        == 'Compaction not committed: compaction.engine is "pi"'
    )


def test_engine_cancel_records_failure_with_reason(tmp_path):
    path = copy_fixture(tmp_path, "06")
    before = path.read_bytes()
    svc, got = service(tmp_path, options={"keep_recent_tokens": 300})
    svc.request(path, {})
    record = svc.maybe_commit(path)
    assert record["status"] == "failed"
    assert (
        record["error"] == "Compaction cancelled: fabric: no deterministic summary fits the continuity context target"
    )
    assert got == [(str(path), record)] and path.read_bytes() == before
    assert "pending" not in svc.status(path)


def test_not_settled_waits_then_commits_at_the_boundary(tmp_path):
    s = SessionWriter(tmp_path / "s.jsonl")
    for k in range(6):
        s.turn(f"task {k}: " + "explain " * 40, "answer " * 60, tools=2)
    s.user("one more")
    s.assistant(stop="toolUse", calls=["open1"])
    age(s.path)
    svc, got = service(tmp_path)
    svc.request(s.path, {"instructions": "keep the tasks"})
    size = s.path.stat().st_size
    assert svc.maybe_commit(s.path) is None  # mid-turn: deferred, still pending
    assert s.path.stat().st_size == size and "pending" in svc.status(s.path)
    s.tool_result("open1")
    s.assistant("finished")
    age(s.path)
    record = svc.maybe_commit(s.path)
    assert record["status"] == "committed"
    assert compactions(s.path)[-1].parent_id == s.leaf


def test_not_quiet_waits(tmp_path):
    path = copy_fixture(tmp_path, "02")
    os.utime(path)  # written just now
    svc, _ = service(tmp_path, quiet=30.0)
    svc.request(path, {})
    assert svc.maybe_commit(path) is None and "pending" in svc.status(path)
    assert not compactions(path)


def test_background_thread_commits_and_notifies(tmp_path):
    path = copy_fixture(tmp_path, "03")
    base = len(compactions(path))
    done = threading.Event()
    records = []
    svc = WireIntentsService(
        state_dir=tmp_path / "state",
        quiet_interval_s=0.1,
        compaction_options_provider=lambda _p: LEGACY_CUT,
        on_committed=lambda p, r: (records.append(r), done.set()),
    )
    with svc:
        t0 = time.monotonic()
        svc.request(str(path), {"instructions": "bg"})
        assert done.wait(20)
        latency = time.monotonic() - t0
    assert records[0]["status"] == "committed" and len(compactions(path)) == base + 1
    assert latency < 10


def test_pending_intent_survives_a_restart(tmp_path):
    path = copy_fixture(tmp_path, "02")
    os.utime(path)  # busy: the first process cannot commit before it stops
    first, _ = service(tmp_path, quiet=30.0)
    with first:
        intent = first.request(path, {"instructions": "survive"})["pending"]
    mode = os.stat(IntentStore(tmp_path / "state").state_path(str(path))).st_mode & 0o777
    assert mode == 0o600
    age(path)
    done = threading.Event()
    got = []
    second = WireIntentsService(
        state_dir=tmp_path / "state",
        quiet_interval_s=0.1,
        compaction_options_provider=lambda _p: LEGACY_CUT,
        on_committed=lambda p, r: (got.append(r), done.set()),
    )
    assert second.status(path)["pending"] == intent
    with second:
        assert done.wait(20)
    assert got[0]["status"] == "committed" and got[0]["requestedBy"] == "user"
    assert compactions(path)[-1].raw["summary"] == got[0]["summary"]


def test_crash_between_append_and_state_write_is_recovered(tmp_path):
    path = copy_fixture(tmp_path, "02")
    svc, got = service(tmp_path)
    svc.request(path, {})
    store = IntentStore(tmp_path / "state")
    state = store.load(str(path))
    data = path.read_bytes()
    entry = compaction_entry(
        entry_id="deadbeef",
        parent_id="ac4ff210",
        timestamp="2026-11-30T04:00:00.000Z",
        summary="S",
        first_kept_entry_id="",
        tokens_before=1,
        details=None,
    )
    record = {
        "at": 1,
        "requestedBy": "user",
        "status": "committed",
        "summary": "S",
        "tokensBefore": 1,
        "entryId": "deadbeef",
    }
    state.committing = {"intentId": state.pending_id, "entryId": "deadbeef", "offset": len(data), "record": record}
    store.save(state)
    import hashlib

    append_line(str(path), entry_line(entry), expected_size=len(data), expected_sha256=hashlib.sha256(data).hexdigest())
    # "restart": the next look at the session finishes the commit instead of redoing it
    status = svc.status(path)
    assert status["last"] == record and "pending" not in status and got == [(str(path), record)]
    assert len(compactions(path)) == 1
    # a marker whose append never happened is dropped, the intent stays pending
    svc.request(path, {})
    state = store.load(str(path))
    state.committing = {
        "intentId": state.pending_id,
        "entryId": "0badf00d",
        "offset": path.stat().st_size,
        "record": record,
    }
    store.save(state)
    assert "pending" in svc.status(path) and store.load(str(path)).committing is None


def test_two_processes_commit_an_intent_once(tmp_path):
    path = copy_fixture(tmp_path, "04")
    base = len(compactions(path))
    a, got_a = service(tmp_path)
    b, got_b = service(tmp_path)  # same state dir: another server on the same agent dir
    a.request(path, {"instructions": "once"})
    results = []
    threads = [threading.Thread(target=lambda s=s: results.append(s.maybe_commit(path))) for s in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(compactions(path)) == base + 1  # exactly one of ours
    committed = [r for r in results if r is not None]
    assert committed and all(r["status"] == "committed" for r in committed)
    assert len({r["entryId"] for r in committed}) == 1
    assert "pending" not in a.status(path)


def test_deleted_session_records_failure(tmp_path):
    path = copy_fixture(tmp_path, "02")
    svc, got = service(tmp_path)
    svc.request(path, {})
    path.unlink()
    record = svc.maybe_commit(path)
    assert record["status"] == "failed" and record["error"].startswith("Session file not found")


def test_validation_errors_raise_value_error(tmp_path):
    path = copy_fixture(tmp_path, "02")
    svc, _ = service(tmp_path)
    with pytest.raises(ValueError, match="^Invalid compact.request arguments: typed compaction instructions exceed"):
        svc.request(path, {"instructions": "界" * 3000})
    with pytest.raises(ValueError, match="^typed compaction request exceeds 16384 encoded UTF-8 bytes$"):
        svc.request(path, {"preserve": ["x" * 1100] * 16})
    assert svc.status(path) == {"settled": True}
    assert svc.cancel(path) == {"cancelled": False}
    svc.request(path, {})
    assert svc.cancel(path) == {"cancelled": True}


@pytest.mark.slow
def test_commits_interleaved_with_a_live_writer_never_tear_lines(tmp_path):
    """A writer appends whole turns (one write per line, under the same flock a second
    fabric-lsp process would take) while intents are committed at every quiet gap."""
    s = SessionWriter(tmp_path / "s.jsonl")
    for k in range(4):
        s.turn(f"warm-up {k} " + "word " * 50, "reply " * 50, tools=1)
    prefix = s.path.read_bytes()
    stop = threading.Event()
    lock = threading.Lock()

    def locked_append(obj_line: bytes) -> None:
        fd = os.open(s.path, os.O_WRONLY | os.O_APPEND)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, obj_line)
        finally:
            os.close(fd)

    writer_ids: list[str] = []

    def writer() -> None:
        k = 0
        while not stop.is_set():
            with lock:
                leaf = read_session(s.path).records[-1].id  # the file's leaf, ours included
                for role_line in _turn_lines(k, leaf):
                    locked_append(role_line)
                    writer_ids.append(json.loads(role_line)["id"])
                    time.sleep(0.001)
            k += 1
            time.sleep(0.03 + (k % 5) * 0.01)

    svc, got = service(tmp_path, quiet=0.02)
    t = threading.Thread(target=writer)
    t.start()
    commits = attempts = 0
    try:
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            svc.request(s.path, {"instructions": f"round {attempts}"})
            attempts += 1
            record = svc.maybe_commit(s.path)
            if record is not None:
                assert record["status"] == "committed", record
                commits += 1
            time.sleep(0.005)
    finally:
        stop.set()
        t.join(10)
    data = s.path.read_bytes()
    assert data.startswith(prefix) and data.endswith(b"\n")
    objs = [json.loads(x) for x in data.split(b"\n")[:-1]]  # nothing torn or glued
    ids = [o["id"] for o in objs[1:]]
    assert len(ids) == len(set(ids))
    assert [i for i in ids if i in set(writer_ids)] == writer_ids
    for prev, obj in zip(objs, objs[1:]):
        if obj["type"] == "compaction":
            assert obj["parentId"] == prev["id"]  # parent = the leaf at the append
    print(f"attempts={attempts} commits={commits} lines={len(objs)}")
    assert commits >= 3


_N = [0]


def _turn_lines(k: int, leaf: str) -> list[bytes]:
    out = []
    parent = leaf
    for role, extra in (
        ("user", {"content": [{"type": "text", "text": f"live turn {k} " + "q " * 30}]}),
        (
            "assistant",
            {
                "content": [{"type": "text", "text": "a " * 40}],
                "stopReason": "stop",
                "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2},
            },
        ),
    ):
        _N[0] += 1
        eid = f"w{_N[0]:07x}"
        out.append(
            line(
                {
                    "type": "message",
                    "id": eid,
                    "parentId": parent,
                    "timestamp": "2026-11-30T00:00:02.000Z",
                    "message": {"role": role, "timestamp": 5, **extra},
                }
            )
        )
        parent = eid
    return out


def test_running_service_commits_an_intent_recorded_by_another_process(tmp_path):
    import subprocess
    import sys

    path = copy_fixture(tmp_path, "06")
    done = threading.Event()
    got = []
    svc = WireIntentsService(
        state_dir=tmp_path / "state",
        quiet_interval_s=0.1,
        compaction_options_provider=lambda _p: LEGACY_CUT,
        on_committed=lambda p, r: (got.append(r), done.set()),
    )
    with svc:
        env = dict(os.environ, PI_CODING_AGENT_DIR=str(tmp_path / "agent"), HOME=str(tmp_path / "home"))
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "fabric_lsp",
                "compact",
                str(path),
                "--state-dir",
                str(tmp_path / "state"),
                "--reason",
                "from the shell",
                "--keep-recent",
                "100",
                "--context-window",
                "0",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        assert done.wait(20)
    assert got[0]["status"] == "committed" and got[0]["requestedBy"] == "user"
    assert compactions(path)[-1].raw["summary"] == got[0]["summary"]


def test_closing_stops_a_computation_and_keeps_the_intent(tmp_path):
    path = copy_fixture(tmp_path, "02")
    svc, got = service(tmp_path)
    intent = svc.request(path, {})["pending"]
    svc.close()  # closed before the commit: the engine sees a cancelled token
    assert svc.maybe_commit(path) is None
    assert svc.status(path)["pending"] == intent and got == [] and not compactions(path)
    with svc:  # started again: a fresh token, and the committer thread commits it
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
    assert got and got[0][1]["status"] == "committed" and len(compactions(path)) == 1


def test_an_intent_another_process_cleared_quietly_is_not_committed_again(tmp_path):
    path = copy_fixture(tmp_path, "02")
    before = path.read_bytes()
    svc, got = service(tmp_path)
    svc.request(path, {})
    store = IntentStore(tmp_path / "state")
    state = store.load(str(path))
    from fabric_lsp.engine.intents.controller import finish_state

    # Another process captured the same intent earlier and cleared it quietly, after this
    # process had captured it too: simulate by marking it finished while it stays pending here.
    pending, pid = state.pending, state.pending_id
    finish_state(state, pid, None)
    state.pending, state.pending_id = pending, pid
    store.save(state)
    assert svc.maybe_commit(path) is None
    assert path.read_bytes() == before and got == []
