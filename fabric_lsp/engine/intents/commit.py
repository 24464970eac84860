"""The commit: compute the Fabric compaction of a settled session and append it safely.

Safety invariants (the only code in the project that writes a session file):

* existing bytes are never rewritten or truncated: the file is opened `O_RDWR|O_APPEND`
  with `O_NOFOLLOW` (never created) and receives exactly one `os.write` holding one
  complete line (with a leading ``\\n`` when the file did not end with one); only a
  failed or short write of ours is cut off again (back to the checked size, so the file
  never ends mid-line);
* the append happens under an exclusive `flock` on the session file, after re-checking
  that the file still has the size and SHA-256 the compaction was computed from and that
  the path still names that file; when it changed, nothing is written and the intent
  waits for the next boundary. The commit marker is written before that check, so the
  check → write gap holds no I/O;
* the entry is Pi's `compaction` entry in Pi's key order, `parentId` = the current leaf,
  a new 8-hex id unique in the file, `fromHook: true`.

Two processes of ours serialize on the flock; Pi itself does not lock, so the quiet
interval plus the final check keep the window against a live Pi writer to two system
calls (docs/intents.md, "When a commit happens").
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
import secrets
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, cast

from fabric_lsp.engine import session as _session
from fabric_lsp.engine.activity import Cancelled, CancelToken
from fabric_lsp.engine.intents.boundary import finished_turn, tail_verdict
from fabric_lsp.engine.intents.controller import Adopted, CommitOutcome, Committed, Deferred, Failed, finish_state
from fabric_lsp.engine.intents.store import IntentStore
from fabric_lsp.engine.jsstr import is_json_object
from fabric_lsp.engine.session import (
    DEFAULT_MAX_LINE_BYTES,
    EntryRecord,
    SessionTree,
    js_stringify,
    parse_session_bytes,
)

log = logging.getLogger(__name__)


class _CompactionApi(Protocol):
    """`fabric_lsp.engine.compaction.api` as the committer calls it."""

    def preview_compaction(self, source: bytes, /, **options: Any) -> dict[str, Any]: ...


def _compaction_api() -> _CompactionApi:
    from fabric_lsp.engine.compaction import api  # imported on first use

    return api


class _Entry(Protocol):
    """A session entry record (`session.EntryRecord`) as read here: its raw JSON object."""

    @property
    def raw(self) -> dict[str, Any]: ...


def _raw(rec: _Entry) -> dict[str, Any]:
    return rec.raw


NOTHING_TO_COMPACT = "Nothing to compact (session too small)"
ALREADY_COMPACTED = "Already compacted"

# compute(data, session_path, intent) -> the fabric/compactionPreview result dict
ComputeFn = Callable[[bytes, str, dict[str, Any]], dict[str, Any]]


def iso_timestamp(at_ms: int) -> str:
    """ISO-8601 UTC with milliseconds and `Z`, as JavaScript's toISOString writes it."""
    dt = datetime.fromtimestamp(at_ms / 1000.0, tz=UTC)
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
    parent_id: str | None,
    timestamp: str,
    summary: str,
    first_kept_entry_id: str,
    tokens_before: int,
    details: Any,
    system_message: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Pi's compaction entry, keys in Pi's order; `details` is dropped when None.
    `system_message` is Pi 1.x's checkpoint of the system state (projection.py
    `compaction_checkpoint`), last as Pi 1.6.0 writes it; None on 0.80.6 sessions."""
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
    if system_message is not None:
        entry["systemMessage"] = system_message
    return entry


def projected_after(result: dict[str, Any]) -> int | None:
    """The preview's own "after" figure (`details.budget.projectedTokensAfter`): the commit
    reports the number the preview showed for the same summary and cut."""
    details: Any = result.get("details")
    budget: Any = cast("dict[str, Any]", details).get("budget") if isinstance(details, dict) else None
    value: Any = cast("dict[str, Any]", budget).get("projectedTokensAfter") if isinstance(budget, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def entry_line(entry: dict[str, Any]) -> bytes:
    """One JSONL line as Pi writes it: JSON.stringify, raw UTF-8, trailing LF."""
    return (js_stringify(entry) + "\n").encode("utf-8")


@dataclass(frozen=True)
class Appended:
    offset: int  # where the new line (after any separator newline) starts
    length: int  # bytes written, separator included


@dataclass(frozen=True)
class Changed:
    why: str


AppendResult = Appended | Changed | CommitOutcome


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


# An unterminated last line younger than this may be a write in progress (append_line).
TORN_TAIL_QUIET_S = 2.0


def append_line(
    session_path: str,
    line: bytes,
    *,
    expected_size: int,
    expected_sha256: str,
    before_write: Callable[[int], CommitOutcome | None] | None = None,
    after_abort: Callable[[], None] | None = None,
    after_write: Callable[[int], None] | None = None,
) -> AppendResult:
    """Append `line` (one complete JSONL line) if the file is byte-for-byte what we read.

    Order, all under an exclusive flock on the file (our other processes wait; Pi does
    not lock, so the check → write gap must hold no I/O):

    1. open `session_path` with O_NOFOLLOW (a symlink swapped in is refused) and check
       its size (a cheap early no);
    2. `before_write(offset)`: every slow step (the commit marker, its fsyncs) happens
       here, before the final check; it may veto by returning an outcome;
    3. the final check: size and SHA-256 read through the same descriptor, and the
       path still names that descriptor's file (device and inode);
    4. one `os.write` on the O_APPEND descriptor, then fsync.

    When anything changed at 3, nothing is written and `after_abort()` undoes step 2: a
    writer that appended after our read always wins. A short or failed write is undone
    under the lock: the file is truncated back to the checked size and fsynced, so it
    never ends mid-line, `after_abort()` runs and the error (OSError) propagates. When the
    line landed elsewhere than planned (a writer slipped into the syscall-wide gap),
    `after_write(actual_offset)` is told the offset it really has.
    """
    if not line.endswith(b"\n") or b"\n" in line[:-1]:
        raise ValueError("append_line needs exactly one complete line")
    try:
        fd = os.open(session_path, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as err:
        if err.errno == errno.ELOOP:
            return Changed("the session path became a symbolic link")
        raise
    armed = False  # before_write ran: after_abort must undo it unless the line lands
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return Changed("the session path is not a regular file")
        if st.st_size != expected_size:
            return Changed(f"size changed from {expected_size} to {st.st_size}")
        last = os.pread(fd, 1, expected_size - 1) if expected_size else b"\n"
        payload = line
        offset = expected_size
        if last != b"\n":
            # An unterminated last line is either torn for good (a writer died) or a
            # writer's line being copied in right now: Linux lets a reader see part of a
            # write, and the rest lands before our own write. Only a tail that has been
            # quiet for TORN_TAIL_QUIET_S is taken as torn and gets a separator (never glue
            # our entry onto it); a fresh one waits for the next boundary.
            age_s = (time.time_ns() - st.st_mtime_ns) / 1e9
            if age_s < TORN_TAIL_QUIET_S:
                return Changed(
                    f"the file ends mid-line and was written {max(0.0, age_s):.2f} s ago (a writer may be mid-line)"
                )
            payload = b"\n" + line  # never glue our entry onto an unterminated line
            offset += 1
        if before_write is not None:
            veto = before_write(offset)
            if veto is not None:
                return veto
            armed = True
        # The final check. From here to the write: one fstat and one lstat, no I/O.
        current = _read_all(fd, expected_size)
        if len(current) != expected_size or hashlib.sha256(current).hexdigest() != expected_sha256:
            return Changed("content changed")
        ident = (st.st_dev, st.st_ino)
        try:
            named = os.lstat(session_path)
        except FileNotFoundError:
            return Changed("the session file was removed")
        if (named.st_dev, named.st_ino) != ident:
            return Changed("the session file was replaced")
        size = os.fstat(fd).st_size
        if size != expected_size:
            return Changed(f"size changed from {expected_size} to {size}")
        try:
            written = os.write(fd, payload)
            if written != len(payload):
                raise OSError(errno.ENOSPC, f"short write appending the compaction ({written} of {len(payload)} bytes)")
            os.fsync(fd)
        except OSError:
            _undo_append(fd, session_path, expected_size, len(payload))
            raise
        armed = False
        actual = os.lseek(fd, 0, os.SEEK_CUR) - len(line)  # O_APPEND: the offset is our end
        if actual != offset:
            log.warning(
                "%s: a writer slipped in before our append; the compaction is at %d, not %d",
                session_path,
                actual,
                offset,
            )
            if after_write is not None:
                after_write(actual)
        return Appended(offset=actual, length=len(payload))
    finally:
        try:
            if armed and after_abort is not None:
                after_abort()
        finally:
            os.close(fd)  # releases the flock


def _undo_append(fd: int, session_path: str, checked_size: int, payload_len: int) -> None:
    """Remove what a failed append left (a torn line), still under the flock.

    Only our own bytes are removed: when the file is longer than the checked size plus
    our payload, another writer appended too and nothing is truncated (logged)."""
    try:
        size = os.fstat(fd).st_size
        if checked_size <= size <= checked_size + payload_len:
            if size != checked_size:
                os.ftruncate(fd, checked_size)
            os.fsync(fd)
        else:
            log.error(
                "%s: failed append not undone: the file is %d bytes, expected at most %d",
                session_path,
                size,
                checked_size + payload_len,
            )
    except OSError as err:
        log.error("%s: could not undo a failed append: %s", session_path, err)


def default_compute(options: dict[str, Any] | None = None, cancel: CancelToken | None = None) -> ComputeFn:
    """The Fabric compaction engine (fabric_lsp.engine.compaction.api.preview_compaction).

    `cancel` stops a long computation (the service is closing); the commit is then
    deferred, never recorded as a failure."""

    def compute(data: bytes, session_path: str, intent: dict[str, Any]) -> dict[str, Any]:
        return _compaction_api().preview_compaction(
            data,
            session_path=session_path,
            instructions=intent.get("instructions"),
            preserve=intent.get("preserve"),
            reason="manual",
            cancel=cancel,
            **(options or {}),
        )

    return compute


def _engine_failure(result: dict[str, Any], leaf_type: str | None) -> Failed:
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
    held: Callable[[], bool] | None = None,
) -> CommitOutcome:
    """One commit attempt of `intent` at the current state of `session_path`.

    `held()` says whether a live Pi holds the file (engine/session/lease.py): then
    nothing is appended and the intent waits for that Pi to commit it. It is asked
    before the work and again just before the append."""
    if held is not None and held():
        return Deferred("a live Pi holds the session: it commits at its next settled boundary")
    read = _read_settled(session_path, quiet_interval_s, clock)
    if not isinstance(read, tuple):
        return read
    data, age = read
    log_ = parse_session_bytes(data, session_path)
    refused = _refusal(log_, quiet_interval_s, age)
    if refused is not None:
        return refused
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
    prepared = _prepare(result, log_, tree, int(clock() * 1000))
    if not isinstance(prepared, tuple):
        return prepared
    line, committed = prepared

    if held is not None and held():  # a Pi took the session while we computed
        return Deferred("a live Pi holds the session: it commits at its next settled boundary")
    marker = _Marker(
        store, session_path, intent_id, committed.entry_id, committed.record(intent.get("requestedBy", "model"))
    )
    try:
        appended = append_line(
            session_path,
            line,
            expected_size=len(data),
            expected_sha256=sha,
            before_write=marker.before_write,
            after_abort=marker.after_abort,
            after_write=marker.after_write,
        )
    except FileNotFoundError:
        return Failed(f"Session file not found: {session_path}")
    except OSError as err:
        # e.g. ENOSPC: the append was undone (the file is byte-identical to before)
        return Failed(f"Cannot append the compaction to {session_path}: {err.strerror or err}")
    if isinstance(appended, Changed):
        return Deferred(f"the session changed while the compaction was computed ({appended.why})")
    if isinstance(appended, Appended):
        return committed
    return appended


def _read_settled(
    session_path: str, quiet_interval_s: float, clock: Callable[[], float]
) -> tuple[bytes, float] | CommitOutcome:
    """(the file's bytes, seconds since its last write), or why not now: written too
    recently, mid-turn by its tail, unreadable."""
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
            return fp.read(), age
    except FileNotFoundError:
        return Failed(f"Session file not found: {session_path}")
    except OSError as err:
        return Failed(f"Cannot read session file {session_path}: {err.strerror or err}")


def _refusal(log_: Any, quiet_interval_s: float, age: float) -> CommitOutcome | None:
    """Why the parsed session cannot be committed to now (not a session, a line we do
    not parse, a turn not finished or not quiet long enough), else None."""
    if not log_.is_session:
        return Failed("Session file is not a valid pi session")
    if log_.stats.oversize:
        # Such a line is never parsed here: its entry (maybe the leaf) is unknown, so the
        # compaction's parent and cut could be wrong. Pi itself can still compact it.
        return Failed(
            f"the session has {log_.stats.oversize} line(s) over the {DEFAULT_MAX_LINE_BYTES // (1 << 20)} MiB "
            "line limit, which fabric-lsp does not parse: it cannot know the branch it would append to. "
            "Compact it in Pi (/compact)"
        )
    verdict = finished_turn(log_, quiet_interval_s)
    if not verdict.finished:
        return Deferred(verdict.why, until_change=True)
    if age < verdict.min_quiet_s:
        return Deferred(f"{verdict.why}: quiet for {age:.1f}s of {verdict.min_quiet_s:.0f}s")
    return None


def _prepare(result: dict[str, Any], log_: Any, tree: SessionTree, at_ms: int) -> tuple[bytes, Committed] | Failed:
    """The line to append (Pi's compaction entry for the engine's result, on the file's
    leaf) and the outcome it becomes once appended."""
    summary = result.get("summary")
    first_kept = result.get("firstKeptEntryId")
    tokens_before = result.get("tokensBefore")
    if not isinstance(summary, str) or not isinstance(first_kept, str) or not isinstance(tokens_before, int):
        return Failed("Compaction engine returned an incomplete result")
    entry_id = new_entry_id({r.id for r in log_.records if r.id is not None})
    path = [_raw(r) for r in tree.branch().entries]
    pi1x = result.get("piRules") == _session.RULES_1X
    entry = compaction_entry(
        entry_id=entry_id,
        parent_id=tree.leaf_id,
        timestamp=iso_timestamp(at_ms),
        summary=summary,
        first_kept_entry_id=first_kept,
        tokens_before=tokens_before,
        details=result.get("details"),
        # Pi 1.x checkpoints the system state in every compaction it appends; without it
        # Pi 1.x would re-append its system message after this one.
        system_message=_session.compaction_checkpoint(path, at_ms) if pi1x else None,
    )
    if pi1x:
        estimated_after = sum(_session.estimate_tokens_1x(m) for m in _session.projected_messages(path + [entry]))
    else:
        after = _session.build_context_messages(path + [entry])
        estimated_after = sum(_session.estimate_tokens(m) for m in after)
    committed = Committed(
        summary=summary,
        tokens_before=tokens_before,
        entry_id=entry_id,
        estimated_tokens_after=estimated_after,
        projected_tokens_after=projected_after(result),
        at=at_ms,
    )
    return entry_line(entry), committed


@dataclass
class _Marker:
    """The commit marker in the intent state, around the append (`append_line`'s hooks)."""

    store: IntentStore
    session_path: str
    intent_id: str
    entry_id: str
    record: dict[str, Any]

    def before_write(self, offset: int) -> CommitOutcome | None:
        # Under the session flock: has another process of ours committed this intent?
        with self.store.locked(self.session_path):
            state = self.store.load(self.session_path)
            if state.last_intent_id == self.intent_id:
                # Another process finished this intent; adopt its record, if it made one.
                return Adopted(state.last if state.last_record_intent_id == self.intent_id else None)
            state.committing = {
                "intentId": self.intent_id,
                "entryId": self.entry_id,
                "offset": offset,
                "record": self.record,
            }
            self.store.save(state)
        return None

    def _update(self, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> None:
        with self.store.locked(self.session_path):
            state = self.store.load(self.session_path)
            if state.committing is not None and state.committing.get("intentId") == self.intent_id:
                state.committing = change(state.committing)
                self.store.save(state)

    def after_abort(self) -> None:
        # Nothing was appended (the file changed after our read, or the write failed
        # and was undone): the marker must not outlive the attempt.
        self._update(lambda marker: None)

    def after_write(self, actual_offset: int) -> None:
        # The marker must name where the line really is, for recover_marker.
        self._update(lambda marker: {**marker, "offset": actual_offset})


def recover_marker(store: IntentStore, session_path: str) -> dict[str, Any] | None:
    """Finish a commit whose process died between its append and its final state write.

    Under the session flock (so no live append of ours is half-way): when the marked
    entry is in the file at the marked offset or after it (a writer may have slipped in
    before our line; the marker is written before the append, with the planned offset),
    apply the marked record (returned, for a late notification); otherwise drop the
    marker (the process died before its write, or its write was undone). Idempotent.
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
                found = _marked_entry_present(fd, offset, marker.get("entryId"))
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
            return record if is_json_object(record) else None
    finally:
        if fd >= 0:
            os.close(fd)


def _marked_entry_present(fd: int, offset: int, entry_id: Any) -> bool:
    """Whether a complete `compaction` line with id `entry_id` starts at `offset` or later.

    Entry ids are unique in the file (`new_entry_id`), so the first match is ours. Lines
    are streamed (bounded memory, any line length)."""
    if not isinstance(entry_id, str):
        return False
    with os.fdopen(os.dup(fd), "rb") as fp:
        fp.seek(offset)
        for item in _session.iter_session(fp, start_offset=offset, header_seen=True):
            if isinstance(item, EntryRecord) and item.id == entry_id and item.type == "compaction":
                return True
    return False
