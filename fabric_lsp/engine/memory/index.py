"""The warm index: one derived state per session and branch mode, kept fresh by stat.

Unchanged files are neither read nor hashed, grown files are extended in place after
their old tail is verified, anything else is rebuilt from source (in a small process pool
for large cold sets). States move between the hot tier (shards) and the cold tier
(digests); the disk cache (disk_cache.py) only saves work across processes. The per-call
budgets bound how much one call builds; while a background indexer (background.py) has
work left, cold builds are left to it (`indexing_in_progress`).
"""

from __future__ import annotations

import gc
import logging
import operator
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from fabric_lsp.engine.activity import ActivitySink, CancelToken, check, report
from fabric_lsp.engine.gcpause import cyclic_gc_paused
from fabric_lsp.engine.owned_dir import DirRefused

from . import disk_cache, hot_cache
from .append import try_append
from .catalog import Ref, all_refs, forget_vanished, hot_files, path_of, scope_refs, want_leaf
from .cold_snapshot import SNAPSHOT_NAME, encode_snapshot
from .core import MemoryState
from .pending import with_pending_records
from .persist import read_file_ops, state_from_record, write_records
from .state import SessionState, SourceMissing
from .state_build import build_state, digest_from_hot, file_ops_reader
from .tokenize import sort_lexical

if TYPE_CHECKING:
    from ..json_types import JsonObject

# the coverage reason (and error code) of a scope with no session dir to list (docs/recall.md)
SESSION_DIR_MISSING = "session_dir_missing"

log = logging.getLogger(__name__)

# ---- lifecycle ------------------------------------------------------------------------------


def forget_gone(eng: MemoryState, paths: Iterable[str]) -> None:
    """Forget the state of the files among `paths` that are gone."""
    with eng.lock:
        states, headers = eng.states, eng.headers
        for p in paths:
            p = os.path.abspath(path_of(p) or p)
            if not os.path.exists(p):
                for key in [k for k in states if k[0] == p]:
                    del states[key]
                headers.pop(p, None)


def drop_caches(eng: MemoryState) -> None:
    with eng.lock:
        eng.states.clear()
        eng.hydrated.clear()
        eng.headers.clear()
        eng.refs.clear()
        eng.listing = None
        eng.cleanup_complete = None


def cleanup_once(eng: MemoryState) -> bool:
    """The first look at the disk cache of this engine: the bounded cleanup, and the cold
    term table's snapshot restored (cold_index.py) before any digest is loaded."""
    complete = eng.cleanup_complete
    if complete is None:
        try:
            eng.index_dir = disk_cache.claim_index_dir(
                eng.index_dir_configured, agent_dir=eng.agent_dir, session_dir=eng.session_dir
            )
            eng.index_dir_error = None
        except DirRefused as err:
            if eng.index_dir_error != str(err):
                log.warning("memory index: %s; the index is kept in memory only", err)
            eng.index_dir, eng.index_dir_error = None, str(err)
        complete = eng.cleanup_complete = _cleanup(eng)
        if eng.cold.is_empty():
            data = disk_cache.read_cache_file(eng.index_dir, SNAPSHOT_NAME, eng.config.max_sync_source_bytes)
            if data is not None and not eng.cold.restore(data):
                disk_cache.remove(eng.index_dir, SNAPSHOT_NAME)  # damaged or of another format
            eng.terms_persisted = eng.cold.version
    return complete


def _cleanup(eng: MemoryState) -> bool:
    """The bounded cleanup (disk_cache.cleanup); a one-shot process skips it when, by name,
    there is nothing to remove (`disk_cache.nothing_to_clean`)."""
    max_files, max_bytes = eng.config.max_cache_cleanup_files, eng.config.max_sync_source_bytes
    if getattr(eng, "one_shot", False):
        complete, eng.listed_names = disk_cache.nothing_to_clean(eng.index_dir, list(eng.refs), max_files, max_bytes)
        if complete is not None:
            return complete
    return disk_cache.cleanup(eng.index_dir, max_files, max_bytes)


def persist_terms(eng: MemoryState, *, whole_pass: bool) -> bool:
    """After an indexing pass: drop the restored term-table slots nobody claimed (only
    after a `whole_pass` over every session) and write the table's snapshot when it
    changed since it was restored or last written; True when one was written. The lock
    is held while the slots are captured, not while the snapshot is encoded and written."""
    with eng.lock:
        table = eng.cold
        if whole_pass:
            table.drop_unclaimed()
        version = table.version
        if version == eng.terms_persisted:
            return False
        capture = table.capture()
    data = encode_snapshot(capture)  # (the slow part, without the lock)
    written = disk_cache.write_atomic(eng.index_dir, SNAPSHOT_NAME, data)
    with eng.lock:
        table.remember_keys(capture)  # the keys it computed: not again next time
        if written:
            eng.terms_persisted = version
    return written


# ---- the disk cache -------------------------------------------------------------------------


def from_disk(eng: MemoryState, ref: Ref, branches: str, tier: str) -> SessionState | None:
    kind = "shard" if tier == "hot" else "digest"
    name = disk_cache.cache_name(ref.file, branches, kind)
    limit = eng.config.max_sync_source_bytes if kind == "shard" else eng.config.max_cold_cache_bytes
    data = disk_cache.read_cache_file(eng.index_dir, name, limit)
    if data is None or ref.key is None:
        return None
    # (the server never reads the addresses; a vocabulary the restored term table holds
    # is left undecoded: cold_index.py, "snapshot")
    record = disk_cache.load_record(
        data,
        kind,
        len(data),
        addresses=False,
        vocabulary_known=eng.cold.claimable.__contains__ if kind == "digest" else None,
    )
    if record is None:
        disk_cache.remove(eng.index_dir, name)
        return None
    hot_index = None
    if kind == "shard":
        terms = disk_cache.read_cache_file(
            eng.index_dir, hot_cache.cache_name(ref.file, branches), eng.config.max_sync_source_bytes
        )
        hot_index = hot_cache.load_record(terms, record, ref.file, branches, ref.key) if terms is not None else None
    try:
        state = None
        if hot_index is not None and getattr(eng, "one_shot", False):
            state = with_pending_records(record, ref.file, branches, key=ref.key, cfg=eng.config, hot_index=hot_index)
        if state is None:
            state = state_from_record(
                record, kind, ref.file, branches, key=ref.key, cfg=eng.config, hot_index=hot_index
            )
    except (KeyError, TypeError, ValueError, AttributeError):
        state = None
    if state is None:
        disk_cache.remove(eng.index_dir, name)
        return None
    if getattr(eng, "one_shot", False):
        # A process answering one query reads a file-operation table only when the query
        # does (file history): recall, expand and sessions never read them.
        state.defer_file_ops(
            file_ops_reader(
                ref.file, branches, state, ref_id=ref.id, ref_cwd=ref.cwd, index_dir=eng.index_dir, cfg=eng.config
            )
        )
    else:
        state.file_ops = read_file_ops(eng.index_dir, eng.config.max_sync_source_bytes, ref.file, branches, state)
        if state.file_ops is None:
            return None  # no table for exactly this source: rebuild (and rewrite both)
    if kind == "shard" and state.hot_index is not hot_index:
        data = hot_cache.encode_record(state)  # built from the records: kept for the next load
        if data is not None:
            disk_cache.write_atomic(eng.index_dir, hot_cache.cache_name(ref.file, branches), data)
    return state


def remove_listed(eng: MemoryState, name: str) -> None:
    """Remove the record `name` from the disk cache, unless a one-shot engine's listing of
    it shows no such name (`MemoryState.listed_names`: each removal costs a few system
    calls, and after a load there are two per session). A record written since the listing
    is left in place: it is only kept tidy, never read without its checks."""
    listed = eng.listed_names
    if listed is None or name in listed:
        disk_cache.remove(eng.index_dir, name)


# ---- fresh states ---------------------------------------------------------------------------


def cached(eng: MemoryState, ref: Ref, branches: str, tier: str) -> tuple[SessionState | None, bool]:
    """A fresh state without a full build (memory, in-place append, or disk), or None.
    Raises SourceMissing. A session a live Pi holds is only ever built on its live leaf
    (in memory; the disk cache keeps the file's own leaf)."""
    key = ref.key
    if key is None:
        raise SourceMissing("source_unavailable")
    slot = (ref.file, branches)
    states = eng.states
    state = states.get(slot)
    if (
        state is not None
        and state.key is key
        and state.tier == tier
        and state.live_leaf is None
        and not eng.live_snapshot
    ):
        # The warm path of every call over thousands of sessions: the state was found
        # fresh for this very Ref (same stat identity, below) and no live Pi holds a file.
        return state, False
    want = want_leaf(eng, ref.file, branches)
    if state is not None and state.live_leaf != want:
        states.pop(slot, None)  # built on another leaf
        state = None
    if want is not None:
        if state is not None and state.tier == tier and state.key == key:
            return state, False
        states.pop(slot, None)
        return None, False
    if state is not None and state.tier == tier:
        if state.key == key:
            state.key = key  # the Ref's own (equal) key: the next call's check above is by identity
            return state, False
        if try_append(state, key, eng.config):
            write_records(eng.index_dir, state)
            state.persisted = b""  # on disk now; memory keeps only what queries need
            states[slot] = state  # a cold append re-derived the vocabulary
            return state, True
    if state is None or state.tier != tier:
        loaded = from_disk(eng, ref, branches, tier)
        if loaded is not None:
            states[slot] = loaded
            remove_listed(eng, disk_cache.cache_name(ref.file, branches, "digest" if tier == "hot" else "shard"))
            if tier != "hot":
                remove_listed(eng, hot_cache.cache_name(ref.file, branches))
            return loaded, True
        if state is not None and tier == "cold" and state.key == key:
            # Leaving the hot tier: derive the digest instead of re-reading the source.
            derived = digest_from_hot(state, eng.config)
            if derived is not None:
                adopt(eng, derived)
                return derived, True
    states.pop(slot, None)
    return None, False


def hydrated_state(eng: MemoryState, ref: Ref, branches: str, cancel: CancelToken | None) -> SessionState:
    """A cold session's records for explicit hydration: built like a hot shard but
    never persisted and never promoted (kept in a small in-memory LRU)."""
    slot = (ref.file, branches)
    state = eng.hydrated.get(slot)
    assert ref.key is not None
    want = want_leaf(eng, ref.file, branches)
    if state is not None and state.live_leaf == want:
        if state.key == ref.key:
            return state
        if want is None and try_append(state, ref.key, eng.config):
            return state
    state = build_state(
        ref.file,
        branches,
        "hot",
        eng.config,
        ref_id=ref.id,
        ref_cwd=ref.cwd,
        cancel=lambda: check(cancel),
        encode=False,
        live_leaf=want,
    )
    eng.hydrated[slot] = state
    return state


def adopt(eng: MemoryState, state: SessionState) -> None:
    if state.live_leaf is None:  # the disk cache holds the file's own leaf only
        write_records(eng.index_dir, state)
        state.persisted = b""  # on disk now; memory keeps only what queries need
    eng.states[(state.file, state.branches)] = state


def build_many(
    eng: MemoryState,
    todo: list[tuple[Ref, str]],
    branches: str,
    cancel: CancelToken | None,
    progress: Callable[[], None],
    *,
    on_state: Callable[[SessionState], None] = lambda _state: None,
) -> dict[str, Any]:
    """Build states from source: {file: SessionState | SourceMissing}; `on_state` gets
    each state as it is built (in this thread).

    Large work goes to a small process pool (hot states come back without their append
    bookkeeping, which the first append restores: `append.try_append`); sessions a live
    Pi holds and small work stay in this thread."""
    out: dict[str, Any] = {}

    def build_here(ref: Ref, tier: str) -> None:
        try:
            out[ref.file] = build_state(
                ref.file,
                branches,
                tier,
                eng.config,
                ref_id=ref.id,
                ref_cwd=ref.cwd,
                cancel=lambda: check(cancel),
                live_leaf=want_leaf(eng, ref.file, branches),
            )
        except SourceMissing as missing:
            out[ref.file] = missing
        else:
            on_state(out[ref.file])
        progress()

    # sessions held by a live Pi are built here, on their live leaf; the rest may go to the pool
    free = [(r, t) for r, t in todo if want_leaf(eng, r.file, branches) is None]
    free_bytes = sum(r.key.size for r, _ in free if r.key)
    if not (eng.parallel_workers > 1 and len(free) >= 2 and free_bytes >= eng.parallel_min_bytes):
        for ref, tier in todo:
            check(cancel)
            build_here(ref, tier)
        return out
    from .build_pool import build_split

    pooled = {r.file for r, _ in free}

    def built(ref: Ref, tier: str, value: Any) -> None:
        out[ref.file] = value
        if isinstance(value, SessionState):
            on_state(value)
        progress()

    build_split(
        sorted(free, key=lambda rt: -(rt[0].key.size if rt[0].key else 0)),  # largest first
        [(r, t) for r, t in todo if r.file not in pooled],
        task=lambda r, tier: (r.file, branches, tier, eng.config, r.id, r.cwd, eng.index_dir),
        workers=eng.parallel_workers,
        build_here=build_here,
        on_built=built,
        check_cancel=lambda: check(cancel),
    )
    return out


# ---- the states of a call -------------------------------------------------------------------


def load_index(
    eng: MemoryState,
    refs: list[Ref],
    hot: set[str],
    branches: str,
    *,
    hydrate: bool,
    cancel: CancelToken | None,
    activity: ActivitySink | None,
) -> tuple[list[SessionState], list[str], JsonObject]:
    """States of the scoped sessions in scope order, their tiers, and index coverage.
    A call over the very same Refs (a kept listing: catalog.FolderListing), the same hot
    set and an unchanged state table gets the last answer that found every session fresh
    again, without asking each session (no live Pi leaf in either)."""
    table: Any = eng.states
    memo = eng.load_memo
    memo_ok = not hydrate and bool(refs) and not eng.live_snapshot
    if (
        memo_ok
        and memo is not None
        and memo[0] == (branches, table.version, len(refs))
        and memo[1] == hot
        and all(map(operator.is_, memo[2], refs))
    ):
        states, tiers, coverage = memo[3]
        return list(states), list(tiers), {**coverage, "reasons": list(coverage["reasons"])}
    version = table.version
    # Loading and building allocate millions of long-lived, acyclic objects: cyclic GC
    # passes over them only cost time (about half a build), so pause it meanwhile.
    with cyclic_gc_paused():
        out = _load_index_unpaused(eng, refs, hot, branches, hydrate=hydrate, cancel=cancel, activity=activity)
    coverage = out[2]
    fresh = table.version == version and coverage["indexedSessions"] == coverage["eligibleSessions"]
    eng.load_memo = ((branches, version, len(refs)), set(hot), list(refs), out) if memo_ok and fresh else None
    return list(out[0]), list(out[1]), {**coverage, "reasons": list(coverage["reasons"])}


def _load_index_unpaused(
    eng: MemoryState,
    refs: list[Ref],
    hot: set[str],
    branches: str,
    *,
    hydrate: bool,
    cancel: CancelToken | None,
    activity: ActivitySink | None,
) -> tuple[list[SessionState], list[str], JsonObject]:
    cleanup_complete = cleanup_once(eng)
    reasons: set[str] = set()
    if not cleanup_complete:
        reasons.add("cache_cleanup_budget")
    # The per-call budgets bound the synchronous work of this call: sessions built from
    # source, as the reference builds them, so within the budgets the first answer is
    # complete. A session whose derived state is already fresh (in memory, extended in
    # place after an append, or read from the disk cache) costs no budget, so repeated
    # calls, a restarted server and the CLI reach every session the index holds. A
    # session the background indexer is building counts as this call's work and is
    # waited for, never built twice; what is beyond the budgets is left to the indexer
    # (reason `indexing_in_progress` beside the budget's own reason).
    background = eng.background_pending() and not hydrate
    processed = 0
    processed_bytes = 0
    accepted: list[tuple[Ref, str]] = []
    resolved: dict[str, Any] = {}
    todo: list[tuple[Ref, str]] = []
    waiting: list[tuple[Ref, str]] = []  # in flight in the background indexer
    fresh_bytes = 0  # source bytes whose derived state was loaded or built in this call
    for ref in refs:
        if ref.key is None:
            reasons.add("source_unavailable")
            continue
        tier = "hot" if ref.file in hot else "cold"
        check(cancel)
        try:
            state, worked = cached(eng, ref, branches, tier)
        except SourceMissing as missing:
            accepted.append((ref, tier))
            resolved[ref.file] = missing
            continue
        if state is not None:
            if worked:
                fresh_bytes += ref.key.size
            accepted.append((ref, tier))
            resolved[ref.file] = state
            continue
        if processed >= eng.config.max_sync_sessions:
            reasons.add("max_sync_sessions")
            if background:
                reasons.add("indexing_in_progress")
            continue
        if processed_bytes + ref.key.size > eng.config.max_sync_source_bytes:
            reasons.add("max_sync_source_bytes")
            if background:
                reasons.add("indexing_in_progress")
            continue
        processed += 1
        processed_bytes += ref.key.size
        accepted.append((ref, tier))
        if (ref.file, branches) in eng.indexer_building:
            waiting.append((ref, tier))
        else:
            todo.append((ref, tier))
    if todo:
        done_count = [0]
        total = len(todo)

        def progress() -> None:
            done_count[0] += 1
            report(activity, f"Indexing {done_count[0]}/{total} sessions", int(100 * done_count[0] / total))

        report(activity, f"Indexing 0/{total} sessions", 0)
        keys = [(r.file, branches) for r, _ in todo]
        with eng.lock:
            eng.building.update(keys)  # (a background indexer leaves these to this call)
        try:
            # each state is adopted as it arrives, so its interning overlaps the builders' work
            built = build_many(eng, todo, branches, cancel, progress, on_state=lambda state: adopt(eng, state))
            fresh_bytes += sum(r.key.size for r, _ in todo if r.key)
            check(cancel)
            for ref, _tier in todo:
                resolved[ref.file] = built.get(ref.file)
        finally:
            with eng.lock:
                eng.building.difference_update(keys)
                eng.building_done.notify_all()
    if waiting:
        fresh_bytes += _take_from_indexer(eng, waiting, branches, resolved, cancel=cancel, activity=activity)
    if fresh_bytes >= eng.parallel_min_bytes:
        # Move the new long-lived index out of the collector's generations, so later
        # full collections do not walk it during warm queries.
        gc.freeze()
    indexed = incomplete = 0
    states: list[SessionState] = []
    tiers: list[str] = []
    for ref, tier in accepted:
        result = resolved.get(ref.file)
        if isinstance(result, SessionState) and hydrate:
            try:
                if tier == "cold":
                    result = hydrated_state(eng, ref, branches, cancel)
            except SourceMissing as missing:
                result = missing
            tier = "hydrated"
        if not isinstance(result, SessionState):
            reasons.add(result.reason if isinstance(result, SourceMissing) else "index_error")
            eng.states.pop((ref.file, branches), None)
            for kind in disk_cache.RECORD_KINDS:
                disk_cache.remove(eng.index_dir, disk_cache.cache_name(ref.file, branches, kind))
            continue
        indexed += 1
        if not result.coverage["complete"]:
            incomplete += 1
            reasons.update(result.coverage["reasons"])
        states.append(result)
        tiers.append(tier)
    eligible = len(refs)
    missing_dir = not hydrate and not os.path.isdir(eng.session_dir)
    if missing_dir:  # no sessions because there is no session dir: never "complete"
        reasons.add(SESSION_DIR_MISSING)
    coverage: JsonObject = {
        "complete": cleanup_complete and eligible - indexed == 0 and incomplete == 0 and not missing_dir,
        "indexedSessions": indexed,
        "eligibleSessions": eligible,
        "staleSessions": eligible - indexed,
        "incompleteSessions": incomplete,
        "reasons": sort_lexical(reasons),
    }
    if missing_dir:
        coverage["error"] = {
            "code": SESSION_DIR_MISSING,
            "message": (
                f"The Pi session directory {eng.session_dir} does not exist. Set the agentDir setting (the "
                "editor's Fabric settings) or PI_CODING_AGENT_DIR to Pi's agent dir, or sessionDir in its "
                "fabric.json; `fabric-lsp examples DIR` writes example sessions."
            ),
        }
    return states, tiers, coverage


def _take_from_indexer(
    eng: MemoryState,
    waiting: list[tuple[Ref, str]],
    branches: str,
    resolved: dict[str, Any],
    *,
    cancel: CancelToken | None,
    activity: ActivitySink | None,
) -> int:
    """The sessions the background indexer had in flight when this call looked: waited for
    (the engine lock is released meanwhile) and taken from its result; one it gave up or
    built for other contents is built here. Returns the source bytes made fresh."""
    report(activity, f"Indexing: waiting for {len(waiting)} session(s) the indexer is building", None)
    fresh = 0
    for ref, tier in waiting:
        key = (ref.file, branches)
        while key in eng.indexer_building:
            check(cancel)
            eng.building_done.wait(0.25)  # (bounded: a cancel is seen meanwhile)
        try:
            state, _ = cached(eng, ref, branches, tier)
        except SourceMissing as missing:
            resolved[ref.file] = missing
            continue
        if state is None:
            built = build_many(eng, [(ref, tier)], branches, cancel, lambda: None, on_state=lambda st: adopt(eng, st))
            resolved[ref.file] = built.get(ref.file)
        else:
            resolved[ref.file] = state
        if ref.key is not None:
            fresh += ref.key.size
    return fresh


def indexed_states(
    eng: MemoryState,
    scope: str,
    cwd: str | None,
    branches: str,
    *,
    cancel: CancelToken | None,
    activity: ActivitySink | None,
) -> tuple[list[SessionState], JsonObject]:
    """Fresh hot and cold states (never hydrated) of the "project" or "global" scope in
    scope order, and the index coverage. The caller holds the engine lock."""
    refs = all_refs(eng)
    forget_vanished(eng, refs)
    scoped = scope_refs(eng, scope, None, cwd, refs)
    hot = hot_files(eng, refs, scoped)
    states, _tiers, coverage = load_index(eng, scoped, hot, branches, hydrate=False, cancel=cancel, activity=activity)
    return states, coverage
