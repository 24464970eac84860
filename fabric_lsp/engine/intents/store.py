"""Durable per-session intent state beside the index: pending slot, last record, commit marker.

One JSON file per session in `state_dir` (mode 0600, directory 0700), named by the
SHA-256 of the session's absolute path. Writes are atomic (temp file, fsync, rename),
so a reader never sees a half-written state. Read-modify-write sequences take an
exclusive `flock` on a sidecar lock file, so several processes (two editors' servers,
the CLI) sharing one state directory never lose each other's updates.

Invariant: the disk is the source of truth; nothing here is cached across calls.
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
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabric_lsp.engine.jsstr import is_json_object
from fabric_lsp.engine.private_dir import make_private_dir, write_private_file

log = logging.getLogger(__name__)

STATE_VERSION = 1
_SUFFIX = ".json"


def session_key(session_path: str) -> str:
    """Stable file-name key of a session: SHA-256 of its absolute path (first 32 hex)."""
    return hashlib.sha256(os.fsencode(session_path)).hexdigest()[:32]


@dataclass
class IntentState:
    """What one session's state file holds.

    `pending` is the wire Intent, `pending_id` its identity (clearing is by identity,
    as the seed's controller compares objects). `committing` is written just before an
    append and names the entry that append writes, so a crash between the append and
    the final state write is recovered instead of committing the intent twice.
    """

    session: str
    pending: dict[str, Any] | None = None
    pending_id: str | None = None
    last: dict[str, Any] | None = None
    last_intent_id: str | None = None  # the last intent whose commit finished (any outcome)
    last_record_intent_id: str | None = None  # the intent `last` records
    committing: dict[str, Any] | None = None
    # `{intentId, pid, startTime, at}`: a live Pi (editors/pi) took the pending intent
    # and is compacting it; nobody else commits it while that process runs.
    claim: dict[str, Any] | None = None
    # `{intentId, reason, at}`: the last intent that ended without a record (a quiet
    # outcome such as "Nothing to compact", or a cancel), so a waiting requester can say why.
    last_cleared: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": STATE_VERSION, "session": self.session}
        if self.pending is not None:
            out["pending"] = self.pending
            out["pendingId"] = self.pending_id
        if self.last is not None:
            out["last"] = self.last
        if self.last_intent_id is not None:
            out["lastIntentId"] = self.last_intent_id
        if self.last_record_intent_id is not None:
            out["lastRecordIntentId"] = self.last_record_intent_id
        if self.committing is not None:
            out["committing"] = self.committing
        if self.claim is not None:
            out["claim"] = self.claim
        if self.last_cleared is not None:
            out["lastCleared"] = self.last_cleared
        return out

    @classmethod
    def from_json(cls, session: str, obj: Any) -> IntentState:
        state = cls(session=session)
        if not is_json_object(obj) or obj.get("version") != STATE_VERSION:
            return state
        pending = obj.get("pending")
        pending_id = obj.get("pendingId")
        if is_json_object(pending) and isinstance(pending_id, str):
            state.pending, state.pending_id = pending, pending_id
        last = obj.get("last")
        if is_json_object(last):
            state.last = last
        if isinstance(obj.get("lastIntentId"), str):
            state.last_intent_id = obj["lastIntentId"]
        if isinstance(obj.get("lastRecordIntentId"), str):
            state.last_record_intent_id = obj["lastRecordIntentId"]
        committing = obj.get("committing")
        if is_json_object(committing):
            state.committing = committing
        claim = obj.get("claim")
        if is_json_object(claim) and isinstance(claim.get("intentId"), str) and isinstance(claim.get("pid"), int):
            state.claim = claim
        cleared = obj.get("lastCleared")
        if is_json_object(cleared) and isinstance(cleared.get("intentId"), str):
            state.last_cleared = cleared
        return state


def new_intent_id() -> str:
    return secrets.token_hex(8)


class IntentStore:
    """Reads and atomically writes `IntentState` files under `state_dir`."""

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.state_dir = Path(state_dir)

    def ensure_dir(self) -> None:
        make_private_dir(self.state_dir)  # <agentDir>/fabric-lsp/ too: 0700, not 0755

    def state_path(self, session_path: str) -> Path:
        return self.state_dir / (session_key(session_path) + _SUFFIX)

    @contextlib.contextmanager
    def locked(self, session_path: str) -> Generator[None, None, None]:
        """Exclusive lock for a read-modify-write of one session's state (all processes)."""
        self.ensure_dir()
        lock_path = self.state_dir / (session_key(session_path) + ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the flock

    def load(self, session_path: str) -> IntentState:
        path = self.state_path(session_path)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return IntentState(session=session_path)
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError):
            log.warning("ignoring unreadable intent state %s", path)
            return IntentState(session=session_path)
        return IntentState.from_json(session_path, obj)

    def save(self, state: IntentState) -> None:
        """Atomically replace the state file (0600); an empty state removes it."""
        self.ensure_dir()
        path = self.state_path(state.session)
        if (
            state.pending is None
            and state.last is None
            and state.committing is None
            and state.claim is None
            and state.last_cleared is None
        ):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            return
        data = json.dumps(state.to_json(), ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode(
            "utf-8", "surrogatepass"
        )
        write_private_file(path, data, durable=True)

    def scan(self) -> dict[str, int]:
        """{state-file name: mtime_ns} of every state file (stat only, no reads)."""
        out: dict[str, int] = {}
        try:
            entries = list(os.scandir(self.state_dir))
        except OSError as err:
            if err.errno != errno.ENOENT:
                log.warning("cannot list intent state dir %s: %s", self.state_dir, err)
            return out
        for entry in entries:
            if entry.name.endswith(_SUFFIX) and not entry.name.startswith("."):
                try:
                    out[entry.name] = entry.stat().st_mtime_ns
                except OSError:
                    continue
        return out

    def session_of(self, name: str) -> str | None:
        """The session path a state file belongs to (None when unreadable or misnamed)."""
        try:
            obj = json.loads((self.state_dir / name).read_bytes())
        except (OSError, ValueError, RecursionError):
            return None
        session = obj.get("session") if is_json_object(obj) else None
        if isinstance(session, str) and session_key(session) + _SUFFIX == name:
            return session
        return None

    def sessions(self) -> list[tuple[str, int]]:
        """(session path, state-file mtime_ns) of every state file, sorted by path."""
        out: list[tuple[str, int]] = []
        for name, mtime in self.scan().items():
            session = self.session_of(name)
            if session is not None:
                out.append((session, mtime))
        out.sort(key=lambda item: item[0])
        return out
