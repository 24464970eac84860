"""Background indexing of every eligible session, newest first.

The seed's per-call budgets (`maxSyncSessions`, `maxSyncSourceBytes`) bound the
synchronous work inside one request; they must not bound what the index can ever hold.
So after `initialized` the server runs one `BackgroundIndexer` over its memory engine (and
`fabric-lsp index` runs one pass in the foreground): it builds every session whose
derived state is not fresh, persists it through the engine's disk cache, and hands it to
the engine's in-memory index. Requests meanwhile answer from what is indexed and say
`indexing_in_progress` for the rest (index.py).

Invariants:
* Builds run without the engine lock (they only read session files); adopting a result
  takes the lock briefly and only when the file's stat key is still the one that was
  built, so a session changed meanwhile is picked up by the next pass, never half-stale.
* Passes repeat until one finds nothing to build: a session appended or rewritten during
  indexing ends up current. A later change (`kick`) starts a new pass.
* Lowest priority: builder children run at nice 19, this thread at nice 10, and the lock
  is held for at most a small chunk of cache lookups at a time.
* Stopping (`stop`) is the only cancellation: a request's CancelToken never reaches it.
* Bounded memory: cold digests are built in child processes and adopted (their
  vocabulary handed to the engine's term table) as each one arrives; every pass interns
  what is pending (its own and what calls adopted) before its `end` event, a step per
  lock hold and only while no call runs (at most `PENDING_MAX_TERMS` wait: cold_index.py),
  so the answer that waits for a pass does not wait for the interning, and the answers
  after the pass find everything interned.
* Every pass that has work emits one `{"type": "indexing", "phase": "begin"}` and exactly
  one matching `"end"` (also when stopped or failing), with progress events
  "Indexing N/M sessions" in between. When a pass finds nothing left to index (the index
  is complete), `{"type": "indexing", "phase": "idle"}` follows, once per such pass.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from typing import Any

from fabric_lsp.engine.activity import ActivitySink, Cancelled, CancelToken, IndexingEvent, check, report
from fabric_lsp.engine.gcpause import cyclic_gc_paused

from .build_pool import drop_spares
from .catalog import all_refs, forget_vanished, hot_files, scope_refs, want_leaf
from .core import MemoryState
from .index import adopt as adopt_state
from .index import cached, cleanup_once, persist_terms
from .source import stat_key
from .state import SessionState, SourceMissing
from .state_build import build_detached, build_state

log = logging.getLogger("fabric_lsp.memory.background")

LOOKUP_CHUNK = 32  # cache lookups per lock hold
PROGRESS_INTERVAL_S = 0.1
# The term table's snapshot (about a second of work at 1 GB) is written once the engine has
# answered nothing for this long, so it never slows the answers that follow indexing; or
# when the indexer stops (shutdown).
SNAPSHOT_IDLE_S = 2.0
SETTLE_STEP_TERMS = 20_000  # cold terms interned per hold of the engine lock (~7 ms)

Sink = ActivitySink


class BackgroundIndexer:
    """Indexes every session of `scope` for `branches` over one MemoryEngine."""

    def __init__(
        self,
        engine: MemoryState,
        sink: Sink | None = None,
        *,
        branches: str = "active",
        scope: str = "global",
        workers: int | None = None,
        nice: int = 19,
    ) -> None:
        self.engine = engine
        self.sink = sink
        self.branches = branches
        self.scope = scope
        self.workers = engine.parallel_workers if workers is None else workers
        self.nice = nice
        self.pending = True  # sessions may be left to index (requests defer cold builds)
        self.passes = 0
        self.totals = {"built": 0, "loaded": 0}
        self.last: dict[str, Any] = {}
        self._stop = CancelToken()
        self._kick = threading.Event()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._last_report = 0.0
        self._whole_pass = False  # the last pass looked at every session of a global scope
        self.snapshot_idle_s = SNAPSHOT_IDLE_S
        self.snapshots_checked = 0  # times the snapshot was written or found current

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Attach to the engine and index in a daemon thread."""
        self.engine.background = self
        self._thread = threading.Thread(target=self._run, name="fabric-memory-index", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 10.0) -> None:
        self._stop.cancel()
        self._kick.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if not thread.is_alive():
                self._persist()  # a snapshot the thread had not written yet (no-op when current)
        if self.engine.background is self:
            self.engine.background = None
        with self._cond:
            self.pending = False
            self._cond.notify_all()

    def _persist(self) -> None:
        try:
            persist_terms(self.engine, whole_pass=self._whole_pass)
        except Exception:
            log.exception("writing the cold term table's snapshot failed")
        with self._cond:
            self.snapshots_checked += 1
            self._cond.notify_all()

    def wait_snapshot(self, count: int, timeout: float | None = None) -> bool:
        """Wait until the snapshot was written (or found current) `count` times."""
        with self._cond:
            return self._cond.wait_for(lambda: self.snapshots_checked >= count, timeout)

    def kick(self) -> None:
        """Sessions changed: run another pass."""
        if self._stop.cancelled:
            return
        self.pending = True
        self._kick.set()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until a pass found nothing left to index (or the indexer stopped)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self.pending, timeout)

    def _run(self) -> None:
        try:  # Linux threads have their own nice value
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        except (AttributeError, OSError):
            pass
        while not self._stop.cancelled:
            self._kick.clear()
            try:
                summary = self.run_once(sink=self.sink, cancel=self._stop, persist=False)
            except Cancelled:
                break
            except Exception:
                log.exception("background indexing pass failed")
                summary = None
            if summary is not None and (summary["built"] or summary["changed"]):
                continue  # verify: the next pass must find everything current
            if self._kick.is_set():
                continue
            drop_spares()  # (builder children started for a first pass that did not need them)
            with self._cond:
                self.pending = False
                self._cond.notify_all()
            if summary is not None:  # everything is indexed now: answers given meanwhile may be refreshed
                self._emit(
                    self.sink,
                    IndexingEvent(phase="idle", total=summary["total"], indexed=summary["indexed"]),
                )
            if not self._persist_when_idle():
                continue  # new work came first
            self._kick.wait()
        with self._cond:
            self.pending = False
            self._cond.notify_all()

    def _settle_terms(self, cancel: CancelToken | None) -> None:
        """Intern the cold vocabularies left pending (`ColdTermTable.settle`: adopted by
        this pass or by calls) before the pass says it is done, so the answers after it
        find them interned: a step of SETTLE_STEP_TERMS terms per hold of the engine lock,
        each taken only while no call runs (the call that waited for this pass answers
        first; a call that comes meanwhile waits for one step at most)."""
        eng = self.engine
        while eng.cold.has_pending():
            while not eng.wait_no_call(0.25):
                check(cancel)
            check(cancel)
            with eng.lock:
                eng.cold.settle(SETTLE_STEP_TERMS)

    def _persist_when_idle(self) -> bool:
        """Write the term table's snapshot once the engine has been idle for
        snapshot_idle_s; False when new work (a kick) or a stop came first."""
        while not self._stop.cancelled:
            idle = self.engine.idle_seconds()
            if idle >= self.snapshot_idle_s:
                self._persist()
                return True
            if self._kick.wait(self.snapshot_idle_s - idle):
                return False
        return False

    # -- one pass -----------------------------------------------------------------------

    def run_once(
        self,
        *,
        sink: Sink | None = None,
        cancel: CancelToken | None = None,
        cwd: str | None = None,
        persist: bool = True,
    ) -> dict[str, Any]:
        """Index every session of the scope that is not fresh; returns
        {total, indexed, built, loaded, unavailable, changed, seconds}. `persist`: write
        the term table's snapshot at the end (the indexer's own thread waits for an idle
        engine instead)."""
        eng = self.engine
        branches = self.branches
        started = time.monotonic()
        with eng.lock:
            known = all_refs(eng)
            forget_vanished(eng, known)
            refs = scope_refs(eng, self.scope, None, cwd, known)
            hot = hot_files(eng, known, refs)
            cleanup_once(eng)
        summary: dict[str, Any] = {
            "total": len(refs),
            "indexed": 0,
            "built": 0,
            "loaded": 0,
            "unavailable": 0,
            "changed": 0,
        }
        todo: list[tuple[Any, str]] = []
        for i in range(0, len(refs), LOOKUP_CHUNK):
            check(cancel)
            with eng.lock, cyclic_gc_paused():
                for ref in refs[i : i + LOOKUP_CHUNK]:
                    if ref.key is None:
                        summary["unavailable"] += 1
                        continue
                    tier = "hot" if ref.file in hot else "cold"
                    try:
                        state, worked = cached(eng, ref, branches, tier)
                    except SourceMissing:
                        summary["unavailable"] += 1
                        continue
                    if state is None:
                        todo.append((ref, tier))
                    else:
                        summary["indexed"] += 1
                        if worked:
                            summary["loaded"] += 1
        if todo:
            self._emit(sink, IndexingEvent(phase="begin", total=summary["total"], indexed=summary["indexed"]))
            try:
                self._progress(sink, summary, force=True)
                self._build(todo, summary, sink, cancel)
                self._settle_terms(cancel)  # (before `end`: the answers after it find them interned)
            finally:
                summary["seconds"] = time.monotonic() - started
                self._emit(
                    sink,
                    IndexingEvent(
                        phase="end",
                        total=summary["total"],
                        indexed=summary["indexed"],
                        built=summary["built"],
                        cancelled=bool(cancel is not None and cancel.cancelled),
                    ),
                )
        else:
            self._settle_terms(cancel)  # what calls adopted meanwhile (before `idle` follows)
        # Every session of the scope was looked at: a global pass knows which restored
        # term-table slots no session claimed. The snapshot is written when it changed.
        self._whole_pass = self.scope == "global" and not (cancel is not None and cancel.cancelled)
        if persist:
            self._persist()
        summary["seconds"] = time.monotonic() - started
        self.passes += 1
        self.totals["built"] += summary["built"]
        self.totals["loaded"] += summary["loaded"]
        self.last = summary
        return summary

    def _build(
        self, todo: list[tuple[Any, str]], summary: dict[str, Any], sink: Sink | None, cancel: CancelToken | None
    ) -> None:
        eng = self.engine
        cfg = eng.config
        branches = self.branches

        claimed: set[tuple[str, str]] = set()  # this pass's entries in eng.indexer_building

        def claim(key: tuple[str, str]) -> None:
            """Under the engine lock: the session is this pass's to build (a call that
            needs it waits for it: index._take_from_indexer)."""
            eng.indexer_building.add(key)
            claimed.add(key)

        def release(key: tuple[str, str]) -> None:
            """Under the engine lock: the session was adopted or given up."""
            eng.indexer_building.discard(key)
            claimed.discard(key)
            eng.building_done.notify_all()

        def adopt(ref: Any, tier: str, result: Any) -> None:
            key = (ref.file, branches)
            if isinstance(result, SourceMissing) or not isinstance(result, SessionState):
                with eng.lock:
                    release(key)
                summary["unavailable"] += 1
                self._progress(sink, summary)
                return
            with eng.lock:
                try:
                    if stat_key(ref.file) != ref.key:
                        summary["changed"] += 1  # the next pass builds the new contents
                        return
                    current = eng.states.get(key)
                    if not (current is not None and current.tier == tier and current.key == ref.key):
                        adopt_state(eng, result)
                finally:
                    release(key)
            summary["indexed"] += 1
            summary["built"] += 1
            self._progress(sink, summary)

        def build_here(ref: Any, tier: str) -> None:
            with eng.lock:
                claim((ref.file, branches))
            live = want_leaf(eng, ref.file, branches)
            try:
                if tier == "hot" or live is not None:  # a held session: on its live leaf
                    result: Any = build_state(
                        ref.file,
                        branches,
                        tier,
                        cfg,
                        ref_id=ref.id,
                        ref_cwd=ref.cwd,
                        cancel=lambda: check(cancel),
                        live_leaf=live,
                    )
                else:  # no append bookkeeping: an append rebuilds a cold session
                    result = build_detached(ref.file, branches, tier, cfg, ref_id=ref.id, ref_cwd=ref.cwd)
            except SourceMissing as missing:
                result = missing
            adopt(ref, tier, result)

        # hot and cold alike go to the builder children, but sessions a live Pi holds
        free = [(r, t) for r, t in todo if want_leaf(eng, r.file, branches) is None]
        pooled = {r.file for r, _ in free}
        local = [(r, t) for r, t in todo if r.file not in pooled]

        def settle(ref: Any, tier: str) -> None:
            """A session a call was building (or had built) when its turn came: taken from
            the call's result once the call ends (built here only when it was not adopted)."""
            key = (ref.file, branches)
            with eng.lock:
                while key in eng.building:
                    check(cancel)
                    eng.building_done.wait(0.25)  # (bounded: a cancel is seen meanwhile)
                try:
                    state, _ = cached(eng, ref, branches, tier)
                except SourceMissing:
                    state = None
            if state is None:
                build_here(ref, tier)
                return
            summary["indexed"] += 1
            self._progress(sink, summary)

        def building(ref: Any, tier: str) -> bool:
            """Whether a call is building this session or has adopted it since this pass
            looked; else the session is claimed for this pass (under the lock, so a call
            either finds it claimed and waits for it, or has claimed it first)."""
            key = (ref.file, branches)
            with eng.lock:
                if key in eng.building:
                    return True
                current = eng.states.get(key)
                if current is not None and current.tier == tier and current.key == ref.key:
                    return True
                claim(key)
                return False

        try:
            self._build_all(
                free, local, building=building, settle=settle, build_here=build_here, adopt=adopt, cancel=cancel
            )
        finally:
            with eng.lock:
                for key in list(claimed):  # stopped or failed: nothing is in flight any more
                    release(key)
        if summary["built"]:
            gc.collect(0)
            gc.freeze()  # the new long-lived index leaves the collector's generations

    def _build_all(
        self,
        free: list[tuple[Any, str]],
        local: list[tuple[Any, str]],
        *,
        building: Any,
        settle: Any,
        build_here: Any,
        adopt: Any,
        cancel: CancelToken | None,
    ) -> None:
        eng = self.engine
        cfg = eng.config
        branches = self.branches
        with cyclic_gc_paused():
            if self.workers > 1 and len(free) >= 2:
                from .build_pool import build_split

                skipped = build_split(
                    free,
                    local,
                    task=lambda r, tier: (r.file, branches, tier, cfg, r.id, r.cwd, eng.index_dir),
                    workers=self.workers,
                    build_here=build_here,
                    on_built=adopt,
                    check_cancel=lambda: check(cancel),
                    nice=self.nice,
                    skip=building,
                )
                for ref, tier in skipped:
                    check(cancel)
                    settle(ref, tier)
            else:
                for ref, tier in local + free:
                    check(cancel)
                    if building(ref, tier):
                        settle(ref, tier)
                    else:
                        build_here(ref, tier)

    # -- events -------------------------------------------------------------------------

    def _emit(self, sink: Sink | None, event: IndexingEvent) -> None:
        if sink is None:
            return
        try:
            sink(event)
        except Exception:
            log.exception("background indexing sink failed")

    def _progress(self, sink: Sink | None, summary: dict[str, Any], force: bool = False) -> None:
        if sink is None:
            return
        now = time.monotonic()
        done = summary["indexed"] + summary["unavailable"]
        total = summary["total"]
        if not force and done < total and now - self._last_report < PROGRESS_INTERVAL_S:
            return
        self._last_report = now
        try:
            report(sink, f"Indexing {summary['indexed']}/{total} sessions", int(100 * done / total) if total else 100)
        except Exception:
            log.exception("background indexing sink failed")
