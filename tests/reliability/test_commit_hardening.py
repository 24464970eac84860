"""Issue 16 (hardening), the commit path: disk full, the check → write race, symlinks.

The real commit path (`IntentsService.maybe_commit` → `attempt_commit` → `append_line`) on
copies of the real Pi sessions in tests/fixtures/real-sessions, with the real Fabric
engine. Faults are injected here only, by wrapping `os.write` / the state store / the
final check inside the test: nothing in production code knows about them.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from fabric_lsp.engine.intents import commit as commit_mod
from fabric_lsp.engine.intents.commit import recover_marker
from fabric_lsp.engine.intents.service import IntentsService
from fabric_lsp.engine.intents.store import IntentStore
from fabric_lsp.engine.session import SessionTree, read_session
from tests.support.wire import WireIntentsService

REAL_SESSIONS = Path(__file__).resolve().parents[1] / "fixtures" / "real-sessions"
LEGACY_CUT = {"keep_recent_tokens": 100, "context_window": 0}


def _session(tmp_path: Path, name: str = "04") -> Path:
    src = next(REAL_SESSIONS.glob(name + "*.jsonl"))
    dst = tmp_path / "sessions" / src.name
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dst)
    _age(dst)
    return dst


def _age(path: Path, seconds: float = 60.0) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def _service(tmp_path: Path) -> tuple[IntentsService, list]:
    got: list = []
    svc = WireIntentsService(
        state_dir=tmp_path / "state",
        quiet_interval_s=0.2,
        compaction_options_provider=lambda _p: LEGACY_CUT,
        on_committed=lambda p, r: got.append((p, r)),
    )
    return svc, got


def _compactions(path: Path) -> list:
    return [r for r in read_session(path).records if r.type == "compaction"]


def _pi_line(parent: str, eid: str = "feed0001") -> bytes:
    obj = {
        "type": "message",
        "id": eid,
        "parentId": parent,
        "timestamp": "2026-11-30T05:00:00.000Z",
        "message": {"role": "user", "content": "Pi wrote this while we were committing", "timestamp": 1},
    }
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


def _is_session_fd(fd: int, ino: int) -> bool:
    try:
        return os.fstat(fd).st_ino == ino
    except OSError:
        return False


# --------------------------------------------------------------------------- disk full


@pytest.mark.parametrize("fault", ["short", "enospc", "fsync"])
def test_disk_full_never_tears_the_session(tmp_path, monkeypatch, fault):
    """A short write (2,864 of N bytes, as measured on a full disk), a write that fails
    with ENOSPC, or an fsync that fails after a full write: the file is byte-identical to
    before, the failure is recorded, no marker is left, and nothing was half-committed."""
    path = _session(tmp_path)
    before = path.read_bytes()
    ino = os.stat(path).st_ino
    svc, got = _service(tmp_path)
    svc.request(path, {"instructions": "keep the file map"})
    real_write, real_fsync = os.write, os.fsync
    hits = []

    def fake_write(fd: int, data: bytes) -> int:
        if _is_session_fd(fd, ino):
            hits.append(len(data))
            if fault == "short":
                return real_write(fd, data[:2864])
            if fault == "enospc":
                raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    def fake_fsync(fd: int) -> None:
        if fault == "fsync" and _is_session_fd(fd, ino) and os.fstat(fd).st_size > len(before):
            raise OSError(errno.EIO, "Input/output error")
        return real_fsync(fd)

    monkeypatch.setattr(os, "write", fake_write)
    monkeypatch.setattr(os, "fsync", fake_fsync)
    record = svc.maybe_commit(path)
    monkeypatch.undo()

    assert hits and hits[0] > 2864  # the injected fault really hit the commit's append
    assert path.read_bytes() == before  # byte-identical: no torn line, no stray newline
    assert record is not None and record["status"] == "failed"
    assert "Cannot append the compaction" in record["error"]
    status = svc.status(path)
    assert status["last"] == record and "pending" not in status  # failed, as docs/intents.md says
    state = json.loads(next((tmp_path / "state").glob("*.json")).read_bytes())
    assert "committing" not in state  # the marker did not outlive the attempt
    assert got == [(str(path), record)]
    # the disk has room again: a new request commits normally
    _age(path)
    svc.request(path, {})
    again = svc.maybe_commit(path)
    assert again is not None and again["status"] == "committed"
    assert (
        path.read_bytes().startswith(before)
        and len(_compactions(path))
        == len([r for r in read_session(REAL_SESSIONS / path.name).records if r.type == "compaction"]) + 1
    )


# ------------------------------------------------------------- the check → write race


def test_a_writer_in_the_marker_fsyncs_wins(tmp_path, monkeypatch):
    """The old order saved the commit marker (two fsyncs) between the hash check and the
    write; Pi appended in that gap and its entry ended up off the active branch. Now the
    marker is saved first and the check follows: the writer wins, nothing is written,
    the marker is dropped and the intent stays pending."""
    path = _session(tmp_path)
    before = path.read_bytes()
    leaf = SessionTree.from_records(read_session(path).records).leaf_id
    svc, _ = _service(tmp_path)
    svc.request(path, {})
    real_save = IntentStore.save
    raced = []

    def save_and_race(self, state):  # the marker save is the slow step of the gap
        real_save(self, state)
        if state.committing is not None and not raced:
            with open(path, "ab") as fh:  # Pi's way: O_APPEND, one write, no lock
                fh.write(_pi_line(leaf))
            raced.append(state.committing["offset"])

    monkeypatch.setattr(IntentStore, "save", save_and_race)
    record = svc.maybe_commit(path)
    monkeypatch.undo()

    assert raced == [len(before)]  # the marker named the planned offset
    assert record is None  # deferred
    assert path.read_bytes() == before + _pi_line(leaf)  # no compaction after Pi's line
    tree = SessionTree.from_records(read_session(path).records)
    assert tree.leaf_id == "feed0001"  # Pi's entry is the active leaf
    status = svc.status(path)
    assert "pending" in status and "last" not in status
    state = json.loads(next((tmp_path / "state").glob("*.json")).read_bytes())
    assert "committing" not in state


def test_a_writer_in_the_last_syscalls_is_recorded_where_the_line_really_is(tmp_path, monkeypatch):
    """The remaining window (between the last fstat of the check and the write) cannot be
    closed against a writer that takes no lock. If a writer does slip in there,
    the marker is rewritten with the offset the line really has, so recovery after a
    crash finds it (it never commits twice)."""
    path = _session(tmp_path)
    before = path.read_bytes()
    leaf = SessionTree.from_records(read_session(path).records).leaf_id
    svc, _ = _service(tmp_path)
    svc.request(path, {})
    inside = []
    offsets = []
    real_append = commit_mod.append_line

    def append_spy(*a, **kw):
        inner = kw["after_write"]

        def after_write(actual):
            offsets.append(actual)
            inner(actual)
            raise SystemExit("die between the append and the final state write")

        kw["after_write"] = after_write
        inside.append(True)
        return real_append(*a, **kw)

    real_lstat, real_fstat = os.lstat, os.fstat

    def lstat_spy(p, *a, **kw):  # the final check's lstat: only the fstat of the size follows
        if inside and str(p) == str(path) and len(inside) == 1:
            inside.append(True)
        return real_lstat(p, *a, **kw)

    def fstat_and_race(fd):  # a writer lands right after the last check, before write()
        st = real_fstat(fd)
        if len(inside) == 2:
            inside.append(True)
            with open(path, "ab") as fh:
                fh.write(_pi_line(leaf))
        return st

    monkeypatch.setattr(commit_mod.os, "lstat", lstat_spy)
    monkeypatch.setattr(commit_mod.os, "fstat", fstat_and_race)
    monkeypatch.setattr(commit_mod, "append_line", append_spy)
    with pytest.raises(SystemExit):
        svc.maybe_commit(path)
    monkeypatch.undo()

    data = path.read_bytes()
    assert data.startswith(before + _pi_line(leaf))
    assert offsets == [len(before) + len(_pi_line(leaf))]
    store = IntentStore(tmp_path / "state")
    marker = store.load(str(path)).committing
    assert marker is not None and marker["offset"] == offsets[0]
    # a fresh process recovers the commit from the marker: recorded once, never twice
    record = recover_marker(store, str(path))
    assert record is not None and record["status"] == "committed"
    svc2, _ = _service(tmp_path)
    assert (
        svc2.status(path)["last"] == record
        and len(_compactions(path))
        == len([r for r in read_session(REAL_SESSIONS / path.name).records if r.type == "compaction"]) + 1
    )


def test_recovery_finds_the_entry_after_the_planned_offset(tmp_path):
    """A marker written with the planned offset, a line that landed later (a writer
    slipped in), the process died before rewriting the marker: recovery still finds it."""
    path = _session(tmp_path)
    before = path.read_bytes()
    leaf = SessionTree.from_records(read_session(path).records).leaf_id
    entry = {
        "type": "compaction",
        "id": "c0ffee01",
        "parentId": leaf,
        "timestamp": "2026-11-30T05:00:00.000Z",
        "summary": "s" * 70000,
        "firstKeptEntryId": leaf,
        "tokensBefore": 1,
        "fromHook": True,
    }
    with open(path, "ab") as fh:
        fh.write(_pi_line(leaf) + (json.dumps(entry, separators=(",", ":")) + "\n").encode())
    store = IntentStore(tmp_path / "state")
    with store.locked(str(path)):
        state = store.load(str(path))
        state.pending, state.pending_id = {"requestedBy": "user"}, "intent-1"
        state.committing = {
            "intentId": "intent-1",
            "entryId": "c0ffee01",
            "offset": len(before),
            "record": {"at": 1, "requestedBy": "user", "status": "committed", "entryId": "c0ffee01"},
        }
        store.save(state)
    record = recover_marker(store, str(path))
    assert record is not None and record["entryId"] == "c0ffee01"  # a 70 KB line: found whole
    state = store.load(str(path))
    assert state.committing is None and state.pending is None and state.last == record


# ------------------------------------------------------------------------- symlinks


def test_a_symlink_swapped_in_after_the_check_is_refused(tmp_path, monkeypatch):
    """While the compaction is computed, the session path becomes a symlink to another
    file with the same bytes: nothing is written anywhere, nothing is recorded committed."""
    path = _session(tmp_path)
    before = path.read_bytes()
    elsewhere = tmp_path / "elsewhere.jsonl"
    svc, _ = _service(tmp_path)
    svc.request(path, {})
    real_compute = svc._compute_for

    def compute_for(p):
        inner = real_compute(p)

        def compute(data, session_path, intent):
            out = inner(data, session_path, intent)
            shutil.copy(path, elsewhere)
            os.replace(path, tmp_path / "moved-away.jsonl")
            os.symlink(elsewhere, path)
            return out

        return compute

    monkeypatch.setattr(svc, "_compute_for", compute_for)
    record = svc.maybe_commit(path)
    assert record is None or record["status"] != "committed"
    assert elsewhere.read_bytes() == before and (tmp_path / "moved-away.jsonl").read_bytes() == before


def test_a_symlink_swapped_in_during_the_final_check_is_refused(tmp_path, monkeypatch):
    """The swap comes after the descriptor was opened (O_NOFOLLOW no longer helps): the
    device/inode comparison right before the write refuses it."""
    path = _session(tmp_path)
    before = path.read_bytes()
    elsewhere = tmp_path / "elsewhere.jsonl"
    svc, _ = _service(tmp_path)
    svc.request(path, {})
    real_read_all = commit_mod._read_all

    def read_and_swap(fd, size):
        out = real_read_all(fd, size)
        shutil.copy(path, elsewhere)
        os.replace(path, tmp_path / "moved-away.jsonl")
        os.symlink(elsewhere, path)
        return out

    monkeypatch.setattr(commit_mod, "_read_all", read_and_swap)
    record = svc.maybe_commit(path)
    monkeypatch.undo()
    assert record is None  # deferred: the file changed
    assert elsewhere.read_bytes() == before and (tmp_path / "moved-away.jsonl").read_bytes() == before
    state = json.loads(next((tmp_path / "state").glob("*.json")).read_bytes())
    assert "committing" not in state and "pending" in state
