"""The commit: compute the Fabric compaction of a settled session and append it safely.

Safety invariants (the only code in the project that writes a session file):

* existing bytes are never rewritten or truncated: the file is opened `O_WRONLY|O_APPEND`
  (never created) and receives exactly one `os.write` holding one complete line (with a
  leading ``\\n`` when the file did not end with one);
* the append happens under an exclusive `flock` on the session file, after re-checking
  that the file still has the size and SHA-256 the compaction was computed from; when it
  changed, nothing is written and the intent waits for the next boundary;
* the entry is Pi's `compaction` entry in Pi's key order, `parentId` = the current leaf,
  a new 8-hex id unique in the file, `fromHook: true`.

Two processes of ours serialize on the flock; Pi itself does not lock, so the quiet
interval plus the hash check keep the window against a live Pi writer to the time of
one re-read (docs/intents.md, "When a commit happens").
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Optional, Union

from fabric_lsp.engine.activity import CancelToken, Cancelled
from fabric_lsp.engine.intents.boundary import finished_turn, tail_verdict
from fabric_lsp.engine.intents.controller import Adopted, Committed, CommitOutcome, Deferred, Failed, finish_state
from fabric_lsp.engine.intents.store import IntentStore
from fabric_lsp.engine.session import (
    SessionTree,
    build_context_messages,
    estimate_tokens,
    js_stringify,
    parse_session_bytes,
)

log = logging.getLogger(__name__)

NOTHING_TO_COMPACT = "Nothing to compact (session too small)"
ALREADY_COMPACTED = "Already compacted"

# compute(data, session_path, intent) -> the fabric/compactionPreview result dict
ComputeFn = Callable[[bytes, str, dict[str, Any]], dict[str, Any]]


def iso_timestamp(at_ms: int) -> str:
    """ISO-8601 UTC with milliseconds and `Z`, as JavaScript's toISOString writes it."""
    dt = datetime.fromtimestamp(at_ms / 1000.0, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at_ms % 1000:03d}Z"


def new_entry_id(taken: set[str]) -> str:
    """A fresh 8-lowercase-hex id not in `taken` (Pi's id shape)."""
    while True:
        candidate = secrets.token_hex(4)
        if candidate not in taken:
            return candidate


def compaction_entry(
    *,
    entry_id: str,
    parent_id: Optional[str],
    timestamp: str,
    summary: str,
    first_kept_entry_id: str,
    tokens_before: int,
    details: Any,
) -> dict[str, Any]:
    """Pi's compaction entry, keys in Pi's order; `details` is dropped when None."""
    entry: dict[str, Any] = {
        "type": "compaction",
        "id": entry_id,
        "parentId": parent_id,
        "timestamp": timestamp,
        "summary": summary,
        "firstKeptEntryId": first_kept_entry_id,
        "tokensBefore": tokens_before,
    }
    if details is not None:
        entry["details"] = details
    entry["fromHook"] = True
    return entry


def entry_line(entry: dict[str, Any]) -> bytes:
    """One JSONL line as Pi writes it: JSON.stringify, raw UTF-8, trailing LF."""
    text = js_stringify(entry)
    if text is None:
        raise ValueError("compaction entry is not JSON-serializable")
    return (text + "\n").encode("utf-8")


@dataclass(frozen=True)
class Appended:
    offset: int  # where the new line (after any separator newline) starts
    length: int  # bytes written, separator included


@dataclass(frozen=True)
class Changed:
    why: str


AppendResult = Union[Appended, Changed, CommitOutcome]


def _read_all(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    pos = 0
    while pos < size:
        chunk = os.pread(fd, min(1 << 20, size - pos), pos)
        if not chunk:
            break
        chunks.append(chunk)
        pos += len(chunk)
    return b"".join(chunks)


def append_line(
    session_path: str,
    line: bytes,
    *,
    expected_size: int,
    expected_sha256: str,
    before_write: Optional[Callable[[int], Optional[CommitOutcome]]] = None,
) -> AppendResult:
    """Append `line` (one complete JSONL line) if the file is byte-for-byte what we read.

    Under an exclusive flock on the file: re-check size and SHA-256, add a separating
    LF when the file does not end with one, call `before_write(offset)` (it may veto by
    returning an outcome), then one `os.write` on an O_APPEND descriptor and fsync.
    """
    if not line.endswith(b"\n") or b"\n" in line[:-1]:
        raise ValueError("append_line needs exactly one complete line")
    fd = os.open(session_path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        rfd = os.open(session_path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if os.fstat(rfd).st_ino != os.fstat(fd).st_ino:
                return Changed("the session file was replaced")
            size = os.fstat(rfd).st_size
            if size != expected_size:
                return Changed(f"size changed from {expected_size} to {size}")
            current = _read_all(rfd, size)
        finally:
            os.close(rfd)
        if len(current) != expected_size or hashlib.sha256(current).hexdigest() != expected_sha256:
            return Changed("content changed")
        payload = line
        offset = expected_size
        if current and not current.endswith(b"\n"):
            payload = b"\n" + line  # never glue our entry onto an unterminated line
            offset += 1
        if before_write is not None:
            veto = before_write(offset)
            if veto is not None:
                return veto
        written = os.write(fd, payload)
        if written != len(payload):
            # A short write on a regular file means the disk is full: terminate the torn
            # line so the next writer does not glue onto it, and report the failure.
            with contextlib.suppress(OSError):
                os.write(fd, b"\n")
            raise OSError(errno.ENOSPC, f"short write appending the compaction ({written} of {len(payload)} bytes)")
        os.fsync(fd)
        return Appended(offset=offset, length=len(payload))
    finally:
        os.close(fd)  # releases the flock


def default_compute(options: Optional[dict[str, Any]] = None, cancel: Optional[CancelToken] = None) -> ComputeFn:
    """The Fabric compaction engine (fabric_lsp.engine.compaction.api.preview_compaction).

    `cancel` stops a long computation (the service is closing); the commit is then
    deferred, never recorded as a failure."""

    def compute(data: bytes, session_path: str, intent: dict[str, Any]) -> dict[str, Any]:
        from fabric_lsp.engine.compaction.api import preview_compaction

        return preview_compaction(
            data,
            session_path=session_path,
            instructions=intent.get("instructions"),
            preserve=intent.get("preserve"),
            reason="manual",
            cancel=cancel,
            **(options or {}),
        )

    return compute


def _engine_failure(result: dict[str, Any], leaf_type: Optional[str]) -> Failed:
    """Map a preview that did not compact to the controller's outcome.

    Pi's gate ("Already compacted", "Nothing to compact") and the engine's own
    "nothing to compact" clear quietly, as the seed's host does. Any other cancel (a
    typed-instruction decode error, no summary fits) is recorded with the engine's
    reason, where the seed's host only saw Pi's bare "Compaction cancelled".
    """
    outcome = result.get("outcome")
    reason = str(result.get("reason") or "")
    low = reason.lower()
    if outcome == "skipped":
        if leaf_type == "compaction" or ALREADY_COMPACTED.lower() in low:
            return Failed(ALREADY_COMPACTED)
        if "nothing to compact" in low or not reason:
            return Failed(NOTHING_TO_COMPACT)
        return Failed(f"Compaction not committed: {reason}")
    if outcome == "cancelled":
        if "nothing to compact" in low:
            return Failed(NOTHING_TO_COMPACT)
        return Failed(f"Compaction cancelled: {reason}" if reason else "Compaction cancelled by the engine")
    return Failed(f"Compaction engine returned outcome {outcome!r}")


def attempt_commit(
    session_path: str,
    intent: dict[str, Any],
    intent_id: str,
    *,
    store: IntentStore,
    compute: ComputeFn,
    quiet_interval_s: float,
    clock: Callable[[], float] = time.time,
) -> CommitOutcome:
    """One commit attempt of `intent` at the current state of `session_path`."""
    try:
        with open(session_path, "rb") as fp:
            st = os.fstat(fp.fileno())
            age = clock() - st.st_mtime
            if age < quiet_interval_s:
                return Deferred(f"written {age:.3f}s ago")
            # Cheap pre-check on the tail of a big file: mid-turn needs no full parse.
            early = tail_verdict(fp.fileno(), st.st_size, quiet_interval_s)
            if early is not None and not early.finished:
                return Deferred(early.why, until_change=True)
            if early is not None and age < early.min_quiet_s:
                return Deferred(f"{early.why}: quiet for {age:.1f}s of {early.min_quiet_s:.0f}s")
            data = fp.read()
    except FileNotFoundError:
        return Failed(f"Session file not found: {session_path}")
    except OSError as err:
        return Failed(f"Cannot read session file {session_path}: {err.strerror or err}")
    log_ = parse_session_bytes(data, session_path)
    if not log_.is_session:
        return Failed("Session file is not a valid pi session")
    verdict = finished_turn(log_, quiet_interval_s)
    if not verdict.finished:
        return Deferred(verdict.why, until_change=True)
    if age < verdict.min_quiet_s:
        return Deferred(f"{verdict.why}: quiet for {age:.1f}s of {verdict.min_quiet_s:.0f}s")
    sha = hashlib.sha256(data).hexdigest()
    tree = SessionTree.from_records(log_.records)
    leaf = tree.by_id.get(tree.leaf_id) if tree.leaf_id else None

    try:
        result = compute(data, session_path, intent)
    except Cancelled:
        return Deferred("the commit was stopped (service closing)")
    if result.get("outcome") != "compacted":
        return _engine_failure(result, leaf.type if leaf is not None else None)
    if result.get("leafId") not in (None, tree.leaf_id):
        return Deferred("the engine saw another leaf")
    summary = result.get("summary")
    first_kept = result.get("firstKeptEntryId")
    tokens_before = result.get("tokensBefore")
    if not isinstance(summary, str) or not isinstance(first_kept, str) or not isinstance(tokens_before, int):
        return Failed("Compaction engine returned an incomplete result")

    at_ms = int(clock() * 1000)
    entry_id = new_entry_id({r.id for r in log_.records if r.id is not None})
    entry = compaction_entry(
        entry_id=entry_id,
        parent_id=tree.leaf_id,
        timestamp=iso_timestamp(at_ms),
        summary=summary,
        first_kept_entry_id=first_kept,
        tokens_before=tokens_before,
        details=result.get("details"),
    )
    line = entry_line(entry)
    branch = tree.branch()
    after = build_context_messages([r.raw for r in branch.entries] + [entry])
    estimated_after = sum(estimate_tokens(m) for m in after)
    committed = Committed(
        summary=summary,
        tokens_before=tokens_before,
        entry_id=entry_id,
        estimated_tokens_after=estimated_after,
        at=at_ms,
    )
    requested_by = intent.get("requestedBy", "model")

    def before_write(offset: int) -> Optional[CommitOutcome]:
        # Under the session flock: has another process of ours committed this intent?
        with store.locked(session_path):
            state = store.load(session_path)
            if state.last_intent_id == intent_id:
                # Another process finished this intent; adopt its record, if it made one.
                return Adopted(state.last if state.last_record_intent_id == intent_id else None)
            state.committing = {
                "intentId": intent_id,
                "entryId": entry_id,
                "offset": offset,
                "record": committed.record(requested_by),
            }
            store.save(state)
        return None

    try:
        appended = append_line(session_path, line, expected_size=len(data), expected_sha256=sha,
                               before_write=before_write)
    except FileNotFoundError:
        return Failed(f"Session file not found: {session_path}")
    if isinstance(appended, Changed):
        return Deferred(f"the session changed while the compaction was computed ({appended.why})")
    if isinstance(appended, Appended):
        return committed
    return appended


def recover_marker(store: IntentStore, session_path: str) -> Optional[dict[str, Any]]:
    """Finish a commit whose process died between its append and its final state write.

    Under the session flock (so no live append of ours is half-way): when the marked
    entry is in the file at the marked offset, apply the marked record (returned, for a
    late notification); otherwise drop the marker. Idempotent.
    """
    state = store.load(session_path)
    marker = state.committing
    if marker is None:
        return None
    try:
        fd = os.open(session_path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        fd = -1
    found = False
    try:
        if fd >= 0:
            fcntl.flock(fd, fcntl.LOCK_EX)
            offset = marker.get("offset")
            if isinstance(offset, int) and offset >= 0:
                head = os.pread(fd, 1 << 16, offset)
                first = head.split(b"\n", 1)[0]
                try:
                    obj = json.loads(first)
                except ValueError:
                    obj = None
                found = isinstance(obj, dict) and obj.get("type") == "compaction" and obj.get("id") == marker.get("entryId")
        with store.locked(session_path):
            state = store.load(session_path)
            if state.committing is None or state.committing.get("intentId") != marker.get("intentId"):
                return None
            record = marker.get("record") if found else None
            if found and isinstance(marker.get("intentId"), str):
                finish_state(state, marker["intentId"], record)
            else:
                state.committing = None
            store.save(state)
            return record if isinstance(record, dict) else None
    finally:
        if fd >= 0:
            os.close(fd)
