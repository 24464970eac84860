"""The advisory-then-committed controller of seed 001, one per session.

`request` records an intent in a single replaceable slot, `cancel` clears it, `status`
reads it, and `maybe_commit(commit_fn)` is called at a boundary: a no-op without a
pending intent; re-entrant calls share the in-flight commit; the in-flight commit clears
only the intent it captured (by identity), so a newer request waits for the next
boundary; `Compaction cancelled` / `Already compacted` / `Nothing to compact …` clear
quietly; any other failure records `status: "failed"` with its message.

Beyond the seed (documented in docs/intents.md): the state lives in an `IntentStore`
(durable, shared between processes), and a commit attempt may be *deferred* (the
session is not at a safe boundary, or the file changed while the compaction was
computed): then the intent stays pending for the next boundary and nothing is recorded.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard, cast

from fabric_lsp.engine.activity import CancelToken
from fabric_lsp.engine.intents.limits import MSG_PRESERVE_NOT_ARRAY, check_bounds, encode_typed_request
from fabric_lsp.engine.intents.store import IntentState, IntentStore, new_intent_id

log = logging.getLogger(__name__)

# Outcomes that clear the intent quietly (seed 001 plus the LSP's "nothing to compact").
QUIET_MESSAGES = frozenset(
    {"Compaction cancelled", "Already compacted", "Nothing to compact", "Nothing to compact (session too small)"}
)
ABORTED_BEFORE_START = "Compaction aborted before it started"
CANCELLED = "cancelled (fabric/compact/cancel or fabric-lsp compact-cancel)"
FAILED_TO_START = "Compaction failed to start"


@dataclass(frozen=True)
class Committed:
    """The compaction entry was appended; fields go into the CommitRecord."""

    summary: str
    tokens_before: int
    entry_id: str
    estimated_tokens_after: int | None = None
    projected_tokens_after: int | None = None  # the preview's figure for this summary and cut
    at: int | None = None  # ms epoch of the append (the entry's timestamp)

    def record(self, requested_by: str) -> dict[str, Any]:
        """The CommitRecord (protocol key order)."""
        record: dict[str, Any] = {
            "at": now_ms() if self.at is None else self.at,
            "requestedBy": requested_by,
            "status": "committed",
            "summary": self.summary,
            "tokensBefore": self.tokens_before,
        }
        if self.estimated_tokens_after is not None:
            record["estimatedTokensAfter"] = self.estimated_tokens_after
        if self.projected_tokens_after is not None:
            record["projectedTokensAfter"] = self.projected_tokens_after
        record["entryId"] = self.entry_id
        return record


@dataclass(frozen=True)
class Failed:
    """The commit ended with an error message (quiet when in QUIET_MESSAGES)."""

    message: str


@dataclass(frozen=True)
class Deferred:
    """Not now: the intent stays pending for the next boundary. `why` is for logs/tests.

    `until_change`: retrying is pointless until the session file changes (the branch does
    not end a finished turn); otherwise the reason is time-based (not quiet yet).
    """

    why: str
    until_change: bool = False


@dataclass(frozen=True)
class Adopted:
    """Another process already committed this very intent; its record is `record`."""

    record: dict[str, Any] | None


CommitOutcome = Committed | Failed | Deferred | Adopted
CommitFn = Callable[[dict[str, Any], str], CommitOutcome]


def now_ms() -> int:
    return int(time.time() * 1000)


def _is_str_sequence(v: object) -> TypeGuard[list[str] | tuple[str, ...]]:
    """`v` is a list or tuple of strings only."""
    return isinstance(v, (list, tuple)) and all(isinstance(p, str) for p in cast("Sequence[object]", v))


def build_intent(
    *,
    reason: Any = None,
    instructions: Any = None,
    preserve: Any = None,
    requested_by: Any = None,
    default_requested_by: str = "model",
    requested_at: int | None = None,
) -> dict[str, Any]:
    """Seed §2: validate and build a PendingIntent (JS key order). Raises ValueError."""
    preserve_list: list[str] | None = None
    if preserve is not None:
        if not _is_str_sequence(preserve):
            raise ValueError(MSG_PRESERVE_NOT_ARRAY)
        preserve_list = list(preserve)
    instructions_str = instructions if isinstance(instructions, str) else None
    check_bounds(instructions_str, preserve_list)
    if preserve_list is not None:
        encode_typed_request(instructions_str or None, preserve_list)
    intent: dict[str, Any] = {
        "requestedBy": requested_by if isinstance(requested_by, str) and requested_by else default_requested_by,
        "requestedAt": now_ms() if requested_at is None else requested_at,
    }
    if isinstance(reason, str) and reason:
        intent["reason"] = reason
    if instructions_str:
        intent["instructions"] = instructions_str
    if preserve_list is not None:
        intent["preserve"] = preserve_list
    return intent


def custom_instructions(intent: dict[str, Any]) -> str | None:
    """What the host forwards to the engine: the typed payload with preserve, else the text."""
    if "preserve" in intent:
        return encode_typed_request(intent.get("instructions"), intent["preserve"])
    return intent.get("instructions") or None


class _Flight:
    __slots__ = ("done", "result")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: dict[str, Any] | None = None


class CompactController:
    """Seed 001's controller for one session, with its state in `store`.

    `on_commit(record)` is called for every recorded outcome (committed or failed),
    never for quiet clears or deferrals.
    """

    def __init__(
        self,
        store: IntentStore,
        session_path: str,
        *,
        on_commit: Callable[[dict[str, Any]], None] | None = None,
        on_request: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.store = store
        self.session_path = session_path
        self.on_commit = on_commit
        self.on_request = on_request
        self._lock = threading.Lock()
        self._flight: _Flight | None = None

    # -- the open paths -------------------------------------------------------------

    def request(self, default_requested_by: str = "model", **fields: Any) -> dict[str, Any]:
        """Record an intent, replacing any pending one. Returns the intent."""
        intent = build_intent(default_requested_by=default_requested_by, **fields)
        with self.store.locked(self.session_path):
            state = self.store.load(self.session_path)
            state.pending, state.pending_id = intent, new_intent_id()
            self.store.save(state)
        if self.on_request is not None:
            self.on_request(intent)
        return intent

    def cancel(self) -> bool:
        """Clear the pending intent (safe when none). `last` is untouched. True if one was cleared."""
        with self.store.locked(self.session_path):
            state = self.store.load(self.session_path)
            had = state.pending is not None
            if had and state.pending_id is not None:
                state.last_cleared = {"intentId": state.pending_id, "reason": CANCELLED, "at": now_ms()}
            state.pending = state.pending_id = None
            self.store.save(state)
        return had

    def status(self) -> dict[str, Any]:
        state = self.store.load(self.session_path)
        out: dict[str, Any] = {}
        if state.pending is not None:
            out["pending"] = state.pending
        if state.last is not None:
            out["last"] = state.last
        return out

    @property
    def in_flight(self) -> bool:
        return self._flight is not None

    # -- the committed path ---------------------------------------------------------

    def maybe_commit(self, commit_fn: CommitFn, *, abort: CancelToken | None = None) -> dict[str, Any] | None:
        """Commit the pending intent with `commit_fn(intent, intent_id)`.

        Returns the CommitRecord it recorded, or None (nothing pending, quiet clear,
        deferred). A call while a commit is in flight waits for that commit and returns
        its result; it never starts a second one.
        """
        claimed: tuple[dict[str, Any], str] | None = None  # (intent, id) when this call commits
        with self._lock:
            flight = self._flight
            if flight is None:
                state = self.store.load(self.session_path)
                if state.pending is None or state.pending_id is None:
                    return None
                claimed = (state.pending, state.pending_id)
                flight = self._flight = _Flight()
        if claimed is None:
            flight.done.wait()
            return flight.result
        intent, intent_id = claimed
        try:
            flight.result = self._run(commit_fn, intent, intent_id, abort)
        finally:
            flight.done.set()
            with self._lock:
                if self._flight is flight:
                    self._flight = None
        return flight.result

    def _run(
        self, commit_fn: CommitFn, intent: dict[str, Any], intent_id: str, abort: CancelToken | None
    ) -> dict[str, Any] | None:
        requested_by = intent.get("requestedBy", "model")
        if abort is not None and abort.cancelled:
            return self._finish(
                intent_id,
                {"at": now_ms(), "requestedBy": requested_by, "status": "failed", "error": ABORTED_BEFORE_START},
            )
        try:
            outcome = commit_fn(intent, intent_id)
        except Exception as err:  # a throw from the commit path is a failure, as in the seed
            log.warning("compaction commit for %s raised: %s", self.session_path, err, exc_info=True)
            message = str(err) or FAILED_TO_START
            return self._finish(
                intent_id, {"at": now_ms(), "requestedBy": requested_by, "status": "failed", "error": message}
            )
        if isinstance(outcome, Deferred):
            log.debug("compaction commit for %s deferred: %s", self.session_path, outcome.why)
            return None
        if isinstance(outcome, Adopted):
            # Another process committed this very intent under the session lock; its
            # state is already final. Tell our client too.
            if outcome.record is not None and self.on_commit is not None:
                try:
                    self.on_commit(outcome.record)
                except Exception:
                    log.exception("on_commit callback failed")
            return outcome.record
        if isinstance(outcome, Committed):
            return self._finish(intent_id, outcome.record(requested_by))
        message = outcome.message or "Compaction error"
        if message in QUIET_MESSAGES:
            self._finish(intent_id, None, cleared=message)
            return None
        return self._finish(
            intent_id, {"at": now_ms(), "requestedBy": requested_by, "status": "failed", "error": message}
        )

    def _finish(
        self, intent_id: str, record: dict[str, Any] | None, cleared: str | None = None
    ) -> dict[str, Any] | None:
        """Clear the captured intent (by identity) and record `record` (None = quietly,
        `cleared` saying why)."""
        with self.store.locked(self.session_path):
            state = self.store.load(self.session_path)
            finish_state(state, intent_id, record, cleared=cleared)
            self.store.save(state)
        if record is not None and self.on_commit is not None:
            try:
                self.on_commit(record)
            except Exception:  # a notification failure must not undo a commit
                log.exception("on_commit callback failed")
        return record


def finish_state(state: IntentState, intent_id: str, record: dict[str, Any] | None, cleared: str | None = None) -> None:
    """Apply a finished commit to `state` (idempotent, so crash recovery may repeat it).
    A quiet end (`record` None) remembers `cleared`, the reason, for a waiting requester."""
    if state.pending_id == intent_id:
        state.pending = state.pending_id = None
    if record is not None:
        state.last = record
        state.last_record_intent_id = intent_id
    elif cleared is not None:
        state.last_cleared = {"intentId": intent_id, "reason": cleared, "at": now_ms()}
    state.last_intent_id = intent_id
    if state.committing is not None and state.committing.get("intentId") == intent_id:
        state.committing = None
    if state.claim is not None and state.claim.get("intentId") == intent_id:
        state.claim = None
