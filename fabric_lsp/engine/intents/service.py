"""IntentsService: compaction intents for sessions seen from an editor (the server's API).

The wire calls take the decoded params and return the result Structs of protocol.py;
the pending intent and the last record come from the session's state file, which other
processes (a live Pi, `fabric-lsp compact`) write too, so they are checked against the
contract as they are read (`protocol.struct_from_json`). One controller per session; the state lives in `state_dir`
(beside the index), so pending intents survive a restart and are shared with other
processes (a second editor's server, `fabric-lsp compact`).

A background thread (`start()`/`close()`) polls the sessions that have a pending intent
with `os.stat` only, and attempts a commit when a file has been quiet for the interval
and has changed since the last attempt found it unsettled. `on_committed(session_path,
record)` is called for every recorded outcome (committed or failed), whichever path
(thread or `maybe_commit`) produced it.

A request the preview already knows cannot be honoured (Pi's gate or the engine says
there is nothing to compact on the branch that would be compacted: the live Pi's leaf,
else the file's) is refused with the reason (`RequestRefused`) and nothing is recorded.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from fabric_lsp.engine.activity import CancelToken
from fabric_lsp.engine.intents.boundary import TurnVerdict, finished_turn, tail_verdict
from fabric_lsp.engine.intents.bridge import claim_is_live
from fabric_lsp.engine.intents.commit import ComputeFn, attempt_commit, default_compute, recover_marker
from fabric_lsp.engine.intents.controller import CommitOutcome, CompactController, Deferred
from fabric_lsp.engine.intents.limits import check_request
from fabric_lsp.engine.intents.store import IntentStore
from fabric_lsp.engine.session import parse_session_bytes
from fabric_lsp.engine.session.lease import Lease, LeaseBook
from fabric_lsp.protocol import (
    COMPACT_REQUEST,
    COMPACT_STATUS,
    CommitRecord,
    CompactCancelResult,
    CompactRequestParams,
    CompactRequestResult,
    CompactStatusResult,
    Intent,
    LeaseHolder,
    struct_from_json,
)

log = logging.getLogger(__name__)

DEFAULT_REQUESTED_BY = "user"  # protocol.md: `requestedBy?: string = "user"`
_RESCAN_S = 0.5

OnCommitted = Callable[[str, dict[str, Any]], None]
OptionsProvider = Callable[[str], dict[str, Any] | None]


class RequestRefused(ValueError):
    """A compaction request that cannot be honoured at all right now (nothing to compact):
    refused at request time with the reason, never recorded."""


def default_state_dir(agent_dir: str) -> str:
    """Where intents live by default: beside the memory index under the agent dir."""
    return os.path.join(agent_dir, "fabric-lsp", "intents")


def normalize_session_path(session_path: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.fspath(session_path))


class IntentsService:
    def __init__(
        self,
        *,
        state_dir: str | os.PathLike[str],
        quiet_interval_s: float = 2.0,
        compaction_options_provider: OptionsProvider | None = None,
        on_committed: OnCommitted | None = None,
        poll_interval_s: float | None = None,
        leases: LeaseBook | None = None,
    ) -> None:
        if quiet_interval_s < 0:
            raise ValueError("quiet_interval_s must be >= 0")
        self.store = IntentStore(state_dir)
        self.quiet_interval_s = float(quiet_interval_s)
        self.poll_interval_s = (
            poll_interval_s if poll_interval_s is not None else min(0.5, max(0.02, self.quiet_interval_s / 4))
        )
        self._options_provider = compaction_options_provider
        # A session a live Pi holds is committed by that Pi (editors/pi), never by us.
        self.leases = leases
        self._on_committed = on_committed
        self._lock = threading.Lock()
        self._controllers: dict[str, CompactController] = {}
        self._verdicts: dict[str, tuple[tuple[int, int, int], TurnVerdict]] = {}
        self._unsettled_sig: dict[str, tuple[int, int, int]] = {}
        self._deferred_why: dict[str, str] = {}
        self._watch: set[str] = set()
        self._state_mtimes: dict[str, int] = {}
        # session -> the intent whose record we last saw: a record written by another
        # process (a live Pi, the CLI) is announced through on_committed once.
        self._seen_records: dict[str, str | None] = {}
        self._scanned_once = False
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._closing = CancelToken()
        self._thread: threading.Thread | None = None

    # -- the wire API ---------------------------------------------------------------

    def request(self, session_path: str | os.PathLike[str], params: CompactRequestParams) -> CompactRequestResult:
        """Record (replace) the pending intent of the decoded `params` (their Struct is the
        schema layer; `params.session` is the caller's, `session_path` is what it resolved
        to). Raises ValueError with the seed's bounds message."""
        path = normalize_session_path(session_path)
        check_request(params.instructions, params.preserve)
        self.store.ensure_dir()  # the state directory exists once anyone asked (0700)
        args: dict[str, Any] = {}
        if params.instructions is not None:
            args["instructions"] = params.instructions
        if params.preserve is not None:
            args["preserve"] = list(params.preserve)
        refusal = self.refusal(path, args)
        if refusal is not None:
            raise RequestRefused(refusal)
        intent = self._controller(path).request(
            default_requested_by=DEFAULT_REQUESTED_BY,
            reason=params.reason,
            instructions=params.instructions,
            preserve=args.get("preserve"),
            requested_by=params.requested_by,
        )
        with self._lock:
            self._watch.add(path)
            self._unsettled_sig.pop(path, None)
        self._wake.set()
        return CompactRequestResult(pending=struct_from_json(Intent, intent, COMPACT_REQUEST))

    def status(self, session_path: str | os.PathLike[str]) -> CompactStatusResult:
        path = normalize_session_path(session_path)
        self._recover(path)
        state = self._controller(path).status()
        pending, last = state.get("pending"), state.get("last")
        holder = self.holder(path)
        holders = self.holders(path)  # every live Pi on the file (two fork it: docs/pi.md), oldest hold first
        return CompactStatusResult(
            pending=struct_from_json(Intent, pending, COMPACT_STATUS) if pending is not None else None,
            last=struct_from_json(CommitRecord, last, COMPACT_STATUS) if last is not None else None,
            settled=self.is_settled(path),
            held_by=LeaseHolder(pid=holder.pid, since=holder.since, leaf_id=holder.leaf_id)
            if holder is not None
            else None,
            holders=[
                LeaseHolder(pid=h.pid, since=h.since, leaf_id=h.leaf_id, pi_version=h.pi_version or None)
                for h in holders
            ]
            or None,
        )

    def refusal(self, session_path: str | os.PathLike[str], args: dict[str, Any] | None = None) -> str | None:
        """Why a compaction request on this session cannot be honoured now, or None.

        The preview of the branch a commit would compact (the live Pi's leaf when one
        holds the session, else the file's leaf), with the effective options and the
        request's instructions: "Nothing to compact" from Pi's gate or from the engine is
        known before any commit, so the request is refused instead of queued (it would
        only be cleared later, and the requester would never hear why). Anything else —
        a file that cannot be read, a branch that ends with a compaction (the intent then
        waits for the next turn), a summary that does not fit — is left to the commit."""
        path = normalize_session_path(session_path)
        args = args or {}
        holder = self.holder(path)
        leaf = holder.leaf_id if holder is not None else None
        try:
            with open(path, "rb") as fp:
                data = fp.read()
        except OSError:
            return None
        compute = self._compute_for(path, leaf_id=leaf)
        try:
            result = compute(data, path, {k: args[k] for k in ("instructions", "preserve") if k in args})
        except Exception as err:  # a preview error is the commit's to report, with its context
            log.debug("request pre-check of %s failed: %s", path, err)
            return None
        outcome = result.get("outcome")
        reason = str(result.get("reason") or "")
        if outcome in ("skipped", "cancelled") and "nothing to compact" in reason.lower():
            where = f"the live Pi's branch (leaf {leaf})" if leaf else "the session's branch"
            return (
                f"Nothing to compact (session too small): Pi would keep all of {where}; "
                f"ask again after more turns ({reason})"
            )
        return None

    def holders(self, session_path: str | os.PathLike[str]) -> list[Lease]:
        """Every live Pi that holds the session, oldest hold first (two Pis on one file
        fork it: each appends under its own in-memory leaf)."""
        if self.leases is None:
            return []
        path = normalize_session_path(session_path)
        return sorted(
            (lease for lease in self.leases.all_live() if lease.session == path),
            key=lambda lease: (lease.since, lease.pid),
        )

    def why_waiting(self, session_path: str | os.PathLike[str]) -> str | None:
        """Why the last commit attempt on this session was deferred (None: none was)."""
        with self._lock:
            return self._deferred_why.get(normalize_session_path(session_path))

    def cleared(self, session_path: str | os.PathLike[str]) -> dict[str, Any] | None:
        """The last intent cleared without a record: `{intentId, reason, at}` (a quiet
        outcome such as "Nothing to compact", or a cancel)."""
        return self.store.load(normalize_session_path(session_path)).last_cleared

    def holder(self, session_path: str | os.PathLike[str]) -> Lease | None:
        """The live Pi that holds the session, if any: it commits, we do not."""
        if self.leases is None:
            return None
        return self.leases.live(normalize_session_path(session_path))

    def cancel(self, session_path: str | os.PathLike[str]) -> CompactCancelResult:
        """Clear the pending intent. `cancelled` is True when one was pending."""
        path = normalize_session_path(session_path)
        return CompactCancelResult(cancelled=self._controller(path).cancel())

    def maybe_commit(self, session_path: str | os.PathLike[str]) -> dict[str, Any] | None:
        """Attempt a commit now, at the current state of the file (the boundary and quiet
        rules apply). Returns the CommitRecord recorded, or None (nothing pending, quiet
        clear, or not at a safe boundary yet: the intent then stays pending)."""
        path = normalize_session_path(session_path)
        recovered = self._recover(path)
        if recovered is not None:
            return recovered
        holder = self.holder(path)
        if holder is not None or claim_is_live(self.store.load(path).claim):
            with self._lock:  # the live Pi holding the file commits at its next settled boundary
                self._deferred_why[path] = (
                    f"a live Pi (pid {holder.pid}) holds the session: it commits at its next settled boundary"
                    if holder is not None
                    else "a live Pi took the intent and is compacting it"
                )
            return None
        controller = self._controller(path)
        compute = self._compute_for(path)

        def commit_fn(intent: dict[str, Any], intent_id: str) -> CommitOutcome:
            sig = _file_sig(path)
            outcome = attempt_commit(
                path,
                intent,
                intent_id,
                store=self.store,
                compute=compute,
                quiet_interval_s=self.quiet_interval_s,
                held=(lambda: self.holder(path) is not None) if self.leases is not None else None,
            )
            with self._lock:
                if isinstance(outcome, Deferred):
                    self._deferred_why[path] = outcome.why
                    if outcome.until_change and sig is not None:
                        self._unsettled_sig[path] = sig
                else:
                    self._deferred_why.pop(path, None)
            return outcome

        return controller.maybe_commit(commit_fn)

    def is_settled(self, session_path: str | os.PathLike[str]) -> bool:
        """Whether the session is at a safe boundary right now (finished turn + quiet)."""
        path = normalize_session_path(session_path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            st = os.fstat(fd)
            sig = (st.st_size, st.st_mtime_ns, st.st_ino)
            with self._lock:
                cached = self._verdicts.get(path)
            if cached is not None and cached[0] == sig:
                verdict = cached[1]
            else:
                found = tail_verdict(fd, st.st_size, self.quiet_interval_s)
                if found is None:
                    with os.fdopen(os.dup(fd), "rb") as fp:
                        found = finished_turn(parse_session_bytes(fp.read(), path), self.quiet_interval_s)
                verdict = found
                with self._lock:
                    self._verdicts[path] = (sig, verdict)
        except OSError:
            return False
        finally:
            os.close(fd)
        age = time.time() - st.st_mtime
        return verdict.finished and age >= max(self.quiet_interval_s, verdict.min_quiet_s)

    def notify_changed(self, paths: Any) -> None:
        """A hint that these session files changed (e.g. the editor saw them): re-check
        them at the next poll instead of waiting for the stat signature to differ."""
        with self._lock:
            for p in paths:
                self._unsettled_sig.pop(normalize_session_path(p), None)
        self._wake.set()

    # -- the background committer ---------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        if self._closing.cancelled:
            self._closing = CancelToken()
        self._rescan()
        self._thread = threading.Thread(target=self._run, name="fabric-intents", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 30.0) -> None:
        """Stop the committer thread. A commit being computed is stopped and its intent
        stays pending (on disk); an append already under way completes."""
        self._stop.set()
        self._closing.cancel()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)

    def __enter__(self) -> IntentsService:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _run(self) -> None:
        last_rescan = time.monotonic()
        while not self._stop.is_set():
            self._wake.wait(self.poll_interval_s)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                if time.monotonic() - last_rescan >= _RESCAN_S:
                    self._rescan()
                    last_rescan = time.monotonic()
                self.tick()
            except Exception:  # the committer thread must survive anything
                log.exception("intent committer tick failed")

    def tick(self) -> None:
        """One polling pass: attempt commits on quiet, changed, pending sessions."""
        with self._lock:
            watch = sorted(self._watch)
        now = time.time()
        for path in watch:
            if self._stop.is_set():
                return
            controller = self._controller(path)
            if controller.in_flight:
                continue
            state = self.store.load(path)
            if state.pending is None and state.committing is None:
                with self._lock:
                    self._watch.discard(path)
                continue
            sig = _file_sig(path)
            if sig is not None:
                try:
                    age = now - os.stat(path).st_mtime
                except OSError:
                    age = 0.0
                if age < self.quiet_interval_s:
                    continue
                with self._lock:
                    if self._unsettled_sig.get(path) == sig:
                        continue
            self.maybe_commit(path)

    def _rescan(self) -> None:
        """Pick up intents written by other processes (and, at start, by our last run).
        Only state files whose mtime changed since the last scan are read."""
        for name, mtime in sorted(self.store.scan().items()):
            with self._lock:
                if self._state_mtimes.get(name) == mtime:
                    continue
                self._state_mtimes[name] = mtime
            session = self.store.session_of(name)
            if session is None:
                continue
            with self._lock:
                self._watch.add(session)
                self._unsettled_sig.pop(session, None)
            self._announce_foreign_record(session)
        self._scanned_once = True

    def _announce_foreign_record(self, session: str) -> None:
        state = self.store.load(session)
        seen = self._seen_records.get(session, "unseen")
        self._seen_records[session] = state.last_record_intent_id
        if not self._scanned_once or seen == state.last_record_intent_id or state.last is None:
            return  # records that were there when we started are old news
        self._notify(session, state.last)

    # -- helpers --------------------------------------------------------------------

    def _controller(self, path: str) -> CompactController:
        with self._lock:
            controller = self._controllers.get(path)
            if controller is None:
                controller = CompactController(
                    self.store, path, on_commit=lambda record, p=path: self._notify(p, record)
                )
                self._controllers[path] = controller
            return controller

    def _compute_for(self, path: str, leaf_id: str | None = None) -> ComputeFn:
        options: dict[str, Any] | None = None
        if self._options_provider is not None:
            try:
                options = self._options_provider(path)
            except Exception:  # settings trouble must not wedge the committer
                log.exception("compaction options provider failed; using the engine defaults")
        if leaf_id is not None:
            options = {**(options or {}), "leaf_id": leaf_id}
        return default_compute(options or None, self._closing)

    def _notify(self, path: str, record: dict[str, Any]) -> None:
        # our own record: the next rescan must not announce it a second time
        self._seen_records[path] = self.store.load(path).last_record_intent_id
        if self._on_committed is not None:
            self._on_committed(path, record)

    def _recover(self, path: str) -> dict[str, Any] | None:
        if self.store.load(path).committing is None or self._controller(path).in_flight:
            return None
        record = recover_marker(self.store, path)
        if record is not None:
            self._notify(path, record)
        return record


def _file_sig(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)
