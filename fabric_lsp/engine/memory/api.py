"""Memory engine API used by the server and the CLI: `recall`, `expand`, `sessions`.

Results are plain dicts shaped exactly as the `fabric/recall`, `fabric/expand` and
`fabric/sessions` result objects of the wire contract. The engine keeps a warm
in-memory index (one derived state per session and branch mode) that is kept fresh by
`stat` (size, mtime_ns, ctime_ns, inode): unchanged files are neither read nor hashed,
grown files are extended in place after their old tail is verified, and anything else
is rebuilt from source. The disk cache (V5 contents, atomic writes) only saves work
across processes; results are identical whether it is empty, warm or corrupted.

Thread-safe: one lock serialises calls. A cancelled call raises `Cancelled` between
sessions or every few hundred lines; it never leaves a partial cache record because
records are written whole (temp file + rename) only after a session is complete.
"""

from __future__ import annotations

import gc
import math
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Optional
from urllib.parse import unquote, urlparse

from fabric_lsp.engine.activity import ActivitySink, CancelToken, check, report
from fabric_lsp.engine.gcpause import cyclic_gc_paused
from fabric_lsp.engine.jsstr import js_string_of
from fabric_lsp.engine.session.discovery import AmbiguousSession, SessionNotFound, encode_cwd, resolve_session
from fabric_lsp.engine.session.reader import read_header

from . import file_history, store
from .cold_index import score_digests_inverted
from .config import MemoryConfig
from .core import MemoryCore
from .search import (
    CANDIDATE_DIGESTS,
    CANDIDATE_ENTRIES,
    DigestHit,
    DigestView,
    HotIndex,
    HotView,
    SegmentItem,
    bm25_located,
    group_and_rank,
    page_bounds,
    pointer_object,
    render_text,
    score_digests,
    segment_object,
)
from .sessions import SessionState, SourceMissing, build_state, digest_from_hot, state_from_record, try_append
from .source import StatKey, stat_key
from .tokenize import plan_memory_query, sort_lexical, utf16_key

_MAX_SAFE = 2**53 - 1
SESSIONS_LIST_CAP = 500
RECALL_MAX_PAGE_SIZE = 100  # the wire contract's bound (the reference allows 200)
SESSIONS_MAX_PAGE_SIZE = 200

log = logging.getLogger(__name__)


# ---- discovery ------------------------------------------------------------------------------


@dataclass
class Ref:
    id: str
    file: str
    cwd: str
    mtime: float
    key: Optional[StatKey]


@dataclass(frozen=True)
class _RecallEcho:
    """The request fields every `fabric/recall` answer repeats, a search or an error."""

    scope: str
    branches: str
    query: Optional[str]
    mode: str
    page: int
    page_size: int


def _recency(refs: Iterable[Ref]) -> list[Ref]:
    return sorted(refs, key=lambda r: (-r.mtime, utf16_key(r.file)))


class _Unresolved(Exception):
    def __init__(self, code: str, message: str, candidates: Optional[list[str]] = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.candidates = candidates


def _scope_kind(scope: Any) -> tuple[str, Optional[str]]:
    if scope is None:
        return "session", None
    if not isinstance(scope, str):
        raise ValueError("scope: must be a string")
    s = scope.strip()
    if s in ("session", "project", "global"):
        return s, None
    if s.startswith("session:"):
        target = s[len("session:") :].strip()
        if not target:
            raise ValueError('scope: "session:" needs a session id or path')
        return "target", target
    raise ValueError(f'scope: unknown scope "{scope}"; expected session, project, global or session:<id-or-path>')


def _branches(value: Any, field: str = "branches") -> str:
    if value is None:
        return "active"
    if value not in ("active", "all"):
        raise ValueError(f'{field}: must be "active" or "all"')
    return value


def _safe_nonneg_int(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return 0 <= v <= _MAX_SAFE
    if isinstance(v, float):
        return math.isfinite(v) and v.is_integer() and 0 <= v <= _MAX_SAFE
    return False


def _path_of(target: str) -> Optional[str]:
    if target.startswith("file://"):
        return unquote(urlparse(target).path)
    return None


# ---- the engine -----------------------------------------------------------------------------


class MemoryEngine(MemoryCore):
    # -- lifecycle ----------------------------------------------------------------------------

    def notify_changed(self, paths: Iterable[str]) -> None:
        """A watched-file event. Freshness is checked by stat on every call anyway; this
        only forgets state of files that are gone."""
        with self._lock:
            for p in paths:
                p = os.path.abspath(_path_of(p) or p)
                if not os.path.exists(p):
                    for key in [k for k in self._states if k[0] == p]:
                        del self._states[key]
                    self._headers.pop(p, None)
        indexer = self.background
        if indexer is not None:
            indexer.kick()

    def drop_caches(self) -> None:
        with self._lock:
            self._states.clear()
            self._hydrated.clear()
            self._headers.clear()
            self._cleanup_complete = None

    def close(self) -> None:
        indexer = self.background
        if indexer is not None:
            indexer.stop()
        self._regex.close()

    # -- discovery ------------------------------------------------------------------------------

    def _ref(self, path: str, key: Optional[StatKey] = None) -> Ref:
        key = key or stat_key(path)
        hid, hcwd = self._header(path, key)
        return Ref(
            id=hid if hid is not None else Path(path).stem,
            file=path,
            cwd=hcwd if hcwd is not None else "",
            mtime=key.mtime_ms if key else 0.0,
            key=key,
        )

    def _header(self, path: str, key: Optional[StatKey]) -> tuple[Optional[str], Optional[str]]:
        ident = (key.ino, key.dev, key.mtime_ns, key.size) if key else None
        cached = self._headers.get(path)
        if cached is not None and cached[0] == ident:
            return cached[1], cached[2]
        hid = hcwd = None
        value = read_header(path)  # the session layer's one header rule for memory
        if value is not None:
            hid = js_string_of(value.get("id")) if "id" in value else "undefined"
            hcwd = js_string_of(value.get("cwd")) if "cwd" in value else "undefined"
        self._headers[path] = (ident, hid, hcwd)
        return hid, hcwd

    def _folder_refs(self, folder: str) -> list[Ref]:
        try:
            names = os.listdir(folder)
        except OSError:
            return []
        out = []
        for name in names:
            if not name.endswith(".jsonl"):
                continue
            full = os.path.join(folder, name)
            key = stat_key(full)
            if key is None:
                continue
            out.append(self._ref(full, key))
        return out

    def _all_refs(self) -> list[Ref]:
        self._refresh_live()  # every call lists the sessions first: the leases are read then
        try:
            subs = os.listdir(self.session_dir)
        except OSError:
            return []
        refs: list[Ref] = []
        for sub in subs:
            full = os.path.join(self.session_dir, sub)
            if os.path.isdir(full):
                refs.extend(self._folder_refs(full))
        return _recency(refs)

    def _forget_vanished(self, all_refs: list[Ref]) -> None:
        """Drop state (and cache records) of sessions that disappeared since last seen."""
        known = {r.file for r in all_refs}
        for slot in [k for k in self._states if k[0] not in known]:
            if not os.path.exists(slot[0]):
                del self._states[slot]
                for kind in store.RECORD_KINDS:
                    store.remove(self.index_dir, store.cache_name(slot[0], slot[1], kind))

    def _project_refs(self, cwd: Optional[str]) -> list[Ref]:
        if not cwd:
            return []
        return _recency(self._folder_refs(os.path.join(self.session_dir, encode_cwd(cwd))))

    def _resolve_target(self, target: str, all_refs: list[Ref]) -> Ref:
        """The session layer's one resolver (`discovery.resolve_session`: paths, `file://`
        URIs, header ids, file stems and the `<timestamp>_<id>` suffix, unique id
        prefixes), with its errors in memory's error shape (candidates in UTF-16 order)."""
        try:
            path = resolve_session(target, self.session_dir)
        except AmbiguousSession as err:
            raise _Unresolved(err.code, str(err), sorted(err.candidates, key=utf16_key)) from None
        except SessionNotFound:
            raise _Unresolved("session_not_found", f"Session not found: {target}") from None
        known = next((r for r in all_refs if r.file == path), None)
        return known if known is not None else self._ref(path)

    def _scope_refs(self, kind: str, target: Optional[str], cwd: Optional[str], all_refs: list[Ref]) -> list[Ref]:
        if kind == "global":
            return list(all_refs)
        if kind == "project":
            return self._project_refs(cwd)
        if kind == "target":
            assert target is not None
            return [self._resolve_target(target, all_refs)]
        project = self._project_refs(cwd)
        return project[:1]

    def _hot_files(self, all_refs: list[Ref], scoped: list[Ref]) -> set[str]:
        tier_refs = list(all_refs)
        known = {r.file for r in all_refs}
        tier_refs.extend(r for r in scoped if r.file not in known)
        tier_refs = _recency(tier_refs)
        return {r.file for r in tier_refs[: max(0, self.config.hot_sessions)]}

    # -- derived state ---------------------------------------------------------------------------

    def _cleanup_once(self) -> bool:
        if self._cleanup_complete is None:
            self._cleanup_complete = store.cleanup(
                self.index_dir, self.config.max_cache_cleanup_files, self.config.max_sync_source_bytes
            )
        return self._cleanup_complete

    def _persist(self, state: SessionState) -> None:
        kind = "shard" if state.tier == "hot" else "digest"
        name = store.cache_name(state.file, state.branches, kind)
        files_name = file_history.cache_name(state.file, state.branches)
        if state.persisted:
            # the file-operations table first: a record is only used with its table
            if state.file_ops is not None:
                store.write_atomic(self.index_dir, files_name, file_history.encode_record(state))
            store.write_atomic(self.index_dir, name, state.persisted)
        else:
            store.remove(self.index_dir, name)
            store.remove(self.index_dir, files_name)
        other = store.cache_name(state.file, state.branches, "digest" if kind == "shard" else "shard")
        store.remove(self.index_dir, other)

    def _from_disk(self, ref: Ref, branches: str, tier: str) -> Optional[SessionState]:
        kind = "shard" if tier == "hot" else "digest"
        name = store.cache_name(ref.file, branches, kind)
        limit = self.config.max_sync_source_bytes if kind == "shard" else self.config.max_cold_cache_bytes
        data = store.read_cache_file(self.index_dir, name, limit)
        if data is None or ref.key is None:
            return None
        record = store.load_record(data, kind, len(data))
        if record is None:
            store.remove(self.index_dir, name)
            return None
        try:
            state = state_from_record(record, kind, ref.file, branches, key=ref.key, cfg=self.config)
        except (KeyError, TypeError, ValueError, AttributeError):
            state = None
        if state is None:
            store.remove(self.index_dir, name)
            return None
        files = store.read_cache_file(self.index_dir, file_history.cache_name(ref.file, branches),
                                      self.config.max_sync_source_bytes)
        state.file_ops = file_history.load_record(files, state) if files is not None else None
        if state.file_ops is None:
            return None  # no table for exactly this source: rebuild (and rewrite both)
        return state

    def _want_leaf(self, file: str, branches: str) -> Optional[str]:
        """The live leaf the active branch of `file` follows, when a live Pi holds it."""
        if branches != "active" or not self._live:
            return None
        return self._live.get(os.path.realpath(file))

    def _refresh_live(self) -> None:
        if self.live_leaves is None:
            return
        try:
            self._live = dict(self.live_leaves())
        except Exception:  # a broken lease dir must not break recall
            log.exception("reading the live leases failed")
            self._live = {}

    def _cached(self, ref: Ref, branches: str, tier: str) -> tuple[Optional[SessionState], bool]:
        """A fresh state without a full build (memory, in-place append, or disk), or None.
        Raises SourceMissing. A session a live Pi holds is only ever built on its live leaf
        (in memory; the disk cache keeps the file's own leaf)."""
        key = ref.key
        if key is None:
            raise SourceMissing("source_unavailable")
        slot = (ref.file, branches)
        want = self._want_leaf(ref.file, branches)
        state = self._states.get(slot)
        if state is not None and state.live_leaf != want:
            self._states.pop(slot, None)  # built on another leaf
            state = None
        if want is not None:
            if state is not None and state.tier == tier and state.key == key:
                return state, False
            self._states.pop(slot, None)
            return None, False
        if state is not None and state.tier == tier:
            if state.key == key:
                return state, False
            if try_append(state, key, self.config):
                self._persist(state)
                state.persisted = b""  # on disk now; memory keeps only what queries need
                self._states[slot] = state  # a cold append re-derived the vocabulary
                return state, True
        if state is None or state.tier != tier:
            loaded = self._from_disk(ref, branches, tier)
            if loaded is not None:
                self._states[slot] = loaded
                store.remove(
                    self.index_dir, store.cache_name(ref.file, branches, "digest" if tier == "hot" else "shard")
                )
                return loaded, True
            if state is not None and tier == "cold" and state.key == key:
                # Leaving the hot tier: derive the digest instead of re-reading the source.
                derived = digest_from_hot(state, self.config)
                if derived is not None:
                    self._adopt(derived)
                    return derived, True
        self._states.pop(slot, None)
        return None, False

    def _hydrated_state(self, ref: Ref, branches: str, cancel: Optional[CancelToken]) -> SessionState:
        """A cold session's records for explicit hydration: built like a hot shard but
        never persisted and never promoted (kept in a small in-memory LRU)."""
        slot = (ref.file, branches)
        state = self._hydrated.get(slot)
        assert ref.key is not None
        want = self._want_leaf(ref.file, branches)
        if state is not None and state.live_leaf == want:
            if state.key == ref.key:
                return state
            if want is None and try_append(state, ref.key, self.config):
                return state
        state = build_state(
            ref.file, branches, "hot", self.config, ref_id=ref.id, ref_cwd=ref.cwd, cancel=lambda: check(cancel),
            encode=False, live_leaf=want,
        )
        self._hydrated[slot] = state
        return state

    def _adopt(self, state: SessionState) -> None:
        if state.live_leaf is None:  # the disk cache holds the file's own leaf only
            self._persist(state)
            state.persisted = b""  # on disk now; memory keeps only what queries need
        self._states[(state.file, state.branches)] = state

    def _build_many(
        self,
        todo: list[tuple[Ref, str]],
        branches: str,
        cancel: Optional[CancelToken],
        progress: Callable[[], None],
    ) -> dict[str, Any]:
        """Build states from source: {file: SessionState | SourceMissing}.

        Large cold work goes to a small process pool (digests are compact to send back)
        while hot sessions are built here; small work stays in this thread."""
        out: dict[str, Any] = {}

        def build_here(ref: Ref, tier: str) -> None:
            try:
                out[ref.file] = build_state(
                    ref.file, branches, tier, self.config, ref_id=ref.id, ref_cwd=ref.cwd, cancel=lambda: check(cancel),
                    live_leaf=self._want_leaf(ref.file, branches),
                )
            except SourceMissing as missing:
                out[ref.file] = missing
            progress()

        # sessions held by a live Pi are built here, on their live leaf
        cold = [(r, t) for r, t in todo if t == "cold" and self._want_leaf(r.file, branches) is None]
        cold_bytes = sum(r.key.size for r, _ in cold if r.key)
        if not (self.parallel_workers > 1 and len(cold) >= 2 and cold_bytes >= self.parallel_min_bytes):
            for ref, tier in todo:
                check(cancel)
                build_here(ref, tier)
            return out
        from .build_pool import run_batch

        pooled = {r.file for r, _ in cold}
        local = [(r, t) for r, t in todo if r.file not in pooled]
        by_file = {r.file: r for r, _ in cold}
        ordered = sorted(cold, key=lambda rt: -(rt[0].key.size if rt[0].key else 0))

        def on_result(file: str, reply: tuple) -> None:
            status, value = reply
            if status == "ok":
                out[file] = value
                progress()
            elif status == "missing":
                out[file] = SourceMissing(value)
                progress()
            else:
                build_here(by_file[file], "cold")

        def on_idle() -> bool:
            if not local:
                return False
            ref, tier = local.pop(0)
            build_here(ref, tier)
            return bool(local)

        failed = run_batch(
            ((r.file, (r.file, branches, "cold", self.config, r.id, r.cwd)) for r, _ in ordered),
            self.parallel_workers,
            on_result,
            lambda: check(cancel),
            on_idle=on_idle,
        )
        for ref, tier in local:
            check(cancel)
            build_here(ref, tier)
        for file in failed:
            check(cancel)
            build_here(by_file[file], "cold")
        return out

    def _load_index(
        self,
        refs: list[Ref],
        hot_files: set[str],
        branches: str,
        *,
        hydrate: bool,
        cancel: Optional[CancelToken],
        activity: Optional[ActivitySink],
    ) -> tuple[list[SessionState], list[str], dict]:
        """States of the scoped sessions in scope order, their tiers, and index coverage."""
        # Loading and building allocate millions of long-lived, acyclic objects: cyclic GC
        # passes over them only cost time (about half a build), so pause it meanwhile.
        with cyclic_gc_paused():
            return self._load_index_unpaused(
                refs, hot_files, branches, hydrate=hydrate, cancel=cancel, activity=activity
            )

    def _load_index_unpaused(
        self,
        refs: list[Ref],
        hot_files: set[str],
        branches: str,
        *,
        hydrate: bool,
        cancel: Optional[CancelToken],
        activity: Optional[ActivitySink],
    ) -> tuple[list[SessionState], list[str], dict]:
        cleanup_complete = self._cleanup_once()
        reasons: set[str] = set()
        if not cleanup_complete:
            reasons.add("cache_cleanup_budget")
        # The per-call budgets bound the synchronous work of this call: sessions built from
        # source. A session whose derived state is already fresh (in memory, extended in
        # place after an append, or read from the disk cache) costs no budget, so repeated
        # calls, a restarted server and the CLI reach every session the index holds. While
        # a background indexer has work left, cold builds are left to it (reason
        # `indexing_in_progress`) and only hot sessions are built here.
        deferring = self.background_pending() and not hydrate
        processed = 0
        processed_bytes = 0
        accepted: list[tuple[Ref, str]] = []
        resolved: dict[str, Any] = {}
        todo: list[tuple[Ref, str]] = []
        fresh_bytes = 0  # source bytes whose derived state was loaded or built in this call
        for ref in refs:
            if ref.key is None:
                reasons.add("source_unavailable")
                continue
            tier = "hot" if ref.file in hot_files else "cold"
            check(cancel)
            try:
                state, worked = self._cached(ref, branches, tier)
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
            if deferring and tier == "cold":
                reasons.add("indexing_in_progress")
                continue
            if processed >= self.config.max_sync_sessions:
                reasons.add("max_sync_sessions")
                continue
            if processed_bytes + ref.key.size > self.config.max_sync_source_bytes:
                reasons.add("max_sync_source_bytes")
                continue
            processed += 1
            processed_bytes += ref.key.size
            accepted.append((ref, tier))
            todo.append((ref, tier))
        if todo:
            done_count = [0]
            total = len(todo)

            def progress() -> None:
                done_count[0] += 1
                report(activity, f"Indexing {done_count[0]}/{total} sessions", int(100 * done_count[0] / total))

            report(activity, f"Indexing 0/{total} sessions", 0)
            built = self._build_many(todo, branches, cancel, progress)
            fresh_bytes += sum(r.key.size for r, _ in todo if r.key)
            check(cancel)
            for ref, _tier in todo:
                result = built.get(ref.file)
                if isinstance(result, SessionState):
                    self._adopt(result)
                resolved[ref.file] = result
        if fresh_bytes >= self.parallel_min_bytes:
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
                        result = self._hydrated_state(ref, branches, cancel)
                except SourceMissing as missing:
                    result = missing
                tier = "hydrated"
            if not isinstance(result, SessionState):
                reasons.add(result.reason if isinstance(result, SourceMissing) else "index_error")
                self._states.pop((ref.file, branches), None)
                for kind in store.RECORD_KINDS:
                    store.remove(self.index_dir, store.cache_name(ref.file, branches, kind))
                continue
            indexed += 1
            if not result.coverage["complete"]:
                incomplete += 1
                reasons.update(result.coverage["reasons"])
            states.append(result)
            tiers.append(tier)
        eligible = len(refs)
        coverage = {
            "complete": cleanup_complete and eligible - indexed == 0 and incomplete == 0,
            "indexedSessions": indexed,
            "eligibleSessions": eligible,
            "staleSessions": eligible - indexed,
            "incompleteSessions": incomplete,
            "reasons": sort_lexical(reasons),
        }
        return states, tiers, coverage

    def indexed_states(
        self, scope: str, cwd: Optional[str], branches: str, cancel: Optional[CancelToken],
        activity: Optional[ActivitySink],
    ) -> tuple[list[SessionState], dict]:
        """Fresh hot and cold states (never hydrated) of the "project" or "global" scope in
        scope order, and the index coverage. The caller holds the engine lock."""
        all_refs = self._all_refs()
        self._forget_vanished(all_refs)
        refs = self._scope_refs(scope, None, cwd, all_refs)
        hot_files = self._hot_files(all_refs, refs)
        states, _tiers, coverage = self._load_index(refs, hot_files, branches, hydrate=False, cancel=cancel, activity=activity)
        return states, coverage

    # -- file history ---------------------------------------------------------------------------

    def file_history(self, params: dict, *, cwd: Optional[str] = None, cancel: Optional[CancelToken] = None, activity: Optional[ActivitySink] = None) -> dict:
        """The `fabric/fileHistory` result (see file_history.py)."""
        return file_history.file_history(self, params, cwd=cwd, cancel=cancel, activity=activity)

    # -- recall ---------------------------------------------------------------------------------

    def recall(self, params: dict, *, cwd: Optional[str] = None, cancel: Optional[CancelToken] = None, activity: Optional[ActivitySink] = None) -> dict:
        params = params or {}
        query = params.get("query")
        if query is not None and not isinstance(query, str):
            raise ValueError("query: must be a string")
        mode = params.get("queryMode") or "literal"
        if mode not in ("literal", "regex"):
            raise ValueError('queryMode: must be "literal" or "regex"')
        branches = _branches(params.get("branches"))
        kind, target = _scope_kind(params.get("scope"))
        scope = params.get("scope") or "session"
        cwd = params.get("cwd") or cwd
        page, page_size = page_bounds(params.get("page"), params.get("pageSize"), RECALL_MAX_PAGE_SIZE)
        echo = _RecallEcho(scope, branches, query, mode, page, page_size)
        hydrate = kind == "target"
        exp_hash = params.get("expectedSourceHash")
        exp_fp = params.get("expectedLineageFingerprint")
        if (exp_hash is not None or exp_fp is not None) and not hydrate:
            raise ValueError("expectedSourceHash/expectedLineageFingerprint: integrity expectations require scope session:<id-or-path>")
        entry_range = params.get("entryRange")
        rng: Optional[tuple[int, int]] = None
        if entry_range is not None:
            if not isinstance(entry_range, dict) or "first" not in entry_range or "last" not in entry_range:
                raise ValueError("entryRange: requires both first and last")
            if not hydrate:
                raise ValueError("entryRange: requires scope session:<id-or-path>")
            first, last = entry_range["first"], entry_range["last"]
            if not (_safe_nonneg_int(first) and _safe_nonneg_int(last)) or last < first:
                return self._recall_error(echo, "index_out_of_bounds",
                                          "Entry range requires safe integers with 0 <= first <= last.")
            rng = (int(first), int(last))
        plan = plan_memory_query(query, mode)
        with self._lock:
            all_refs = self._all_refs()
            self._forget_vanished(all_refs)
            try:
                refs = self._scope_refs(kind, target, cwd, all_refs)
            except _Unresolved as err:
                return self._recall_error(echo, err.code, err.message)
            hot_files = self._hot_files(all_refs, refs)
            states, tiers, index_cov = self._load_index(refs, hot_files, branches, hydrate=hydrate, cancel=cancel, activity=activity)
            if hydrate and states:
                st = states[0]
                stale = self._stale(st, exp_hash, exp_fp)
                if stale is not None:
                    return self._recall_error(echo, "stale_pointer", stale["message"])
                if rng is not None and rng[1] >= st.entry_count:
                    return self._recall_error(
                        echo, "index_out_of_bounds",
                        f"Entry range ends at {rng[1]}, but the session has {st.entry_count} entries.",
                    )
            views: list[HotView] = []
            digests: list[DigestView] = []
            for st, tier in zip(states, tiers):
                if tier == "hydrated":
                    view = st.hot_view("cold")
                    if rng is not None:
                        chosen = [e for e in st.entries or [] if rng[0] <= e["index"] <= rng[1]]
                        view = HotView(view.session_id, view.session_file, view.source_hash, view.branches,
                                       view.lineage_fingerprint, view.mtime, chosen, HotIndex.build(chosen), "cold")
                    views.append(view)
                elif tier == "hot":
                    views.append(st.hot_view())
                else:
                    digests.append(st.digest_view())
            check(cancel)
            if plan["kind"] != "regex":
                return self._search(plan, echo, views, digests, index_cov)
            # A regex may run up to its timeout in the worker: do that without the engine
            # lock, on snapshots, so other memory requests are not held up meanwhile.
            views = [_snapshot_view(v) for v in views]
        return self._search(plan, echo, views, digests, index_cov)

    def _search(self, plan, echo: _RecallEcho, views, digests, index_cov) -> dict:
        scope, branches, query, mode = echo.scope, echo.branches, echo.query, echo.mode
        page, page_size = echo.page, echo.page_size
        q_reasons: set[str] = set()
        q_error: Optional[dict] = None
        q_complete = True
        browse = plan["kind"] == "browse"
        located: dict[int, dict[int, float]] = {}
        hits: list[DigestHit] = []
        if browse:
            remaining = CANDIDATE_ENTRIES
            order = sorted(range(len(views)), key=lambda i: (-views[i].mtime, utf16_key(views[i].session_file)))
            for vn in order:
                n = len(views[vn].entries)
                if n == 0:
                    continue
                take = min(n, remaining)
                if take < n:
                    q_reasons.add("candidate_entry_budget")
                if take > 0:
                    located[vn] = dict.fromkeys(range(take), 0.0)
                remaining -= take
            eligible = [d for d in digests]
            if len(eligible) > CANDIDATE_DIGESTS:
                q_reasons.add("candidate_digest_budget")
            hits = [DigestHit(d, 0.0, []) for d in eligible[:CANDIDATE_DIGESTS]]
        elif plan["kind"] == "terms":
            located, capped = bm25_located(views, plan["terms"])
            if capped:
                q_reasons.add("candidate_entry_budget")
            hits, dcapped = self._score_cold(digests, plan["terms"])
            if dcapped:
                q_reasons.add("candidate_digest_budget")
        else:
            located, hits, q_reasons, q_error = self._regex_search(plan["pattern"], views, digests)
        if q_error is not None or q_reasons:
            q_complete = False
        start = (page - 1) * page_size
        items, total_items, total_matches, segment_count, icapped = group_and_rank(
            views, located, hits, browse, needed=start + page_size
        )
        if icapped:
            q_reasons.add("candidate_item_budget")
            q_complete = False
        page_items = items[start : start + page_size]
        coverage = dict(index_cov)
        coverage["complete"] = bool(index_cov["complete"] and q_complete)
        coverage["reasons"] = sort_lexical(set(index_cov["reasons"]) | q_reasons)
        if q_error is not None:
            coverage["error"] = q_error
        text = render_text(
            page_items, query=query if not browse else None, total_items=total_items, total_matches=total_matches,
            segment_count=segment_count, index_coverage=index_cov, query_reasons=sort_lexical(q_reasons),
            query_complete=q_complete,
        )
        return {
            "scope": scope,
            "branches": branches,
            "query": query if query is not None else None,
            "queryMode": mode,
            "page": page,
            "pageSize": page_size,
            "totalItems": total_items,
            "totalMatches": total_matches,
            "hasNext": start + page_size < total_items,
            "authoritative": coverage["complete"],
            "coverage": coverage,
            "items": [
                {"kind": "segment", "segment": segment_object(it)} if isinstance(it, SegmentItem)
                else {"kind": "pointer", "pointer": pointer_object(it)}
                for it in page_items
            ],
            "text": text,
        }

    def _regex_search(self, pattern: str, views: list[HotView], digests: list[DigestView]):
        cfg = self.config
        reasons: set[str] = set()
        haystacks: list[str] = []
        owners: list[tuple[int, int]] = []  # (view number, position) or (-1 - digest number, term)
        total_bytes = 0
        complete = True

        def add(text: str, owner: tuple[int, int]) -> bool:
            nonlocal total_bytes, complete
            size = len(text.encode("utf-8", "surrogatepass"))
            if len(haystacks) + 1 > cfg.regex_max_haystack_terms:
                reasons.add("regex_max_haystack_terms")
                complete = False
                return False
            if total_bytes + size > cfg.regex_max_haystack_bytes:
                reasons.add("regex_max_haystack_bytes")
                complete = False
                return False
            haystacks.append(text)
            owners.append(owner)
            total_bytes += size
            return True

        for vn, v in enumerate(views):
            if not complete:
                break
            for pos, e in enumerate(v.entries):
                if not add(e["text"], (vn, pos)):
                    break
        if complete:
            for dn, d in enumerate(digests):
                if not complete:
                    break
                for ti, term in enumerate(d.vocabulary):
                    if not add(term, (-1 - dn, ti)):
                        break
        pbytes = len(pattern.encode("utf-8", "surrogatepass"))
        if pbytes > cfg.regex_max_pattern_bytes:
            err = {"code": "regex_pattern_too_large", "message": f"Regex pattern is {pbytes} bytes; limit is {cfg.regex_max_pattern_bytes}."}
            return {}, [], {err["code"]}, err
        outcome = self._regex.run(pattern, haystacks, cfg.regex_timeout_ms)
        if outcome.error is not None:
            return {}, [], {outcome.error["code"]}, outcome.error
        located: dict[int, dict[int, float]] = {}
        matched_terms: dict[int, list[str]] = {}
        for h in outcome.hits or []:
            a, b = owners[h]
            if a >= 0:
                located.setdefault(a, {})[b] = 1.0
            else:
                matched_terms.setdefault(-1 - a, []).append(digests[-1 - a].vocabulary[b])
        n_loc = sum(len(x) for x in located.values())
        if n_loc > CANDIDATE_ENTRIES:
            reasons.add("candidate_entry_budget")
            kept = 0
            trimmed: dict[int, dict[int, float]] = {}
            for vn in sorted(located):
                for pos in sorted(located[vn]):
                    if kept >= CANDIDATE_ENTRIES:
                        break
                    trimmed.setdefault(vn, {})[pos] = 1.0
                    kept += 1
            located = trimmed
        hits = [DigestHit(digests[dn], float(len(terms)), terms) for dn, terms in sorted(matched_terms.items())]
        if len(hits) > CANDIDATE_DIGESTS:
            reasons.add("candidate_digest_budget")
            hits = hits[:CANDIDATE_DIGESTS]
        return located, hits, reasons, None

    def _score_cold(self, digests: list[DigestView], terms: list[str]):
        """Cold pointer hits from the inverted term -> sessions map when every digest is
        held by the term table (else the per-digest scan, e.g. for detached views)."""
        from .cold_index import TermsSet

        slots = [d.vocab_set._slot if isinstance(d.vocab_set, TermsSet) else None for d in digests]
        if all(s is not None for s in slots):
            return score_digests_inverted(digests, slots, terms, self._cold)
        return score_digests(digests, terms)

    def _recall_error(self, echo: _RecallEcho, code: str, message: str) -> dict:
        return {
            "scope": echo.scope or "session",
            "branches": echo.branches,
            "query": echo.query,
            "queryMode": echo.mode,
            "page": echo.page,
            "pageSize": echo.page_size,
            "totalItems": 0,
            "totalMatches": 0,
            "hasNext": False,
            "authoritative": False,
            "coverage": {
                "complete": False, "indexedSessions": 0, "eligibleSessions": 0, "staleSessions": 0,
                "incompleteSessions": 0, "reasons": [code], "error": {"code": code, "message": message},
            },
            "items": [],
            "text": message,
        }

    @staticmethod
    def _stale(state: SessionState, exp_hash: Any, exp_fp: Any) -> Optional[dict]:
        hash_bad = exp_hash is not None and exp_hash != state.source_hash
        fp_bad = exp_fp is not None and exp_fp != state.lineage.fingerprint
        if not (hash_bad or fp_bad):
            return None
        msg = (
            "Session active lineage changed after the pointer was issued."
            if fp_bad
            else "Session source changed after the pointer was issued."
        )
        return {"code": "stale_pointer", "message": msg}

    # -- expand ---------------------------------------------------------------------------------

    def expand(self, params: dict, *, cwd: Optional[str] = None, cancel: Optional[CancelToken] = None, activity: Optional[ActivitySink] = None) -> dict:
        params = params or {}
        branches = _branches(params.get("branches"))
        indices = params.get("indices")
        if indices is not None and not isinstance(indices, list):
            raise ValueError("indices: must be an array")
        if indices is not None and not all(_safe_nonneg_int(i) for i in indices):
            return _expand_error("index_out_of_bounds", "Every entry index must be a non-negative safe integer.")
        session = params.get("session")
        if not isinstance(session, str) or not session.strip():
            raise ValueError("session: expand requires a session")
        entry_ids = [x for x in params.get("entryIds") or [] if isinstance(x, str) and x]
        op_addrs = [x for x in params.get("operationAddresses") or [] if isinstance(x, str) and x]
        entry_range = params.get("entryRange")
        rng: Optional[tuple[int, int]] = None
        if entry_range is not None:
            if not isinstance(entry_range, dict) or "first" not in entry_range or "last" not in entry_range:
                raise ValueError("entryRange: requires both first and last")
            first, last = entry_range["first"], entry_range["last"]
            if not (_safe_nonneg_int(first) and _safe_nonneg_int(last)) or last < first:
                return _expand_error("index_out_of_bounds", "Entry range requires safe integers with 0 <= first <= last.")
            rng = (int(first), int(last))
        exp_hash = params.get("expectedSourceHash")
        exp_fp = params.get("expectedLineageFingerprint")
        # Expand reads the source itself and shares no derived state: it does not wait for
        # the engine lock (a long first build of other sessions must not hold it up).
        check(cancel)
        try:
            ref = self._resolve_target(session.strip(), self._all_refs())
        except _Unresolved as err:
            return _expand_error(err.code, err.message, err.candidates)
        report(activity, "Expanding session entries")
        from .expand_stream import Selection, expand_streaming

        want = Selection({int(i) for i in indices or []}, set(entry_ids), set(op_addrs), rng)
        try:
            # Expansion streams the full source (no truncation, thinking and output
            # included) and keeps only the requested records: bounded memory at any size.
            state = expand_streaming(ref.file, branches, ref.id, want, cancel=lambda: check(cancel),
                                     live_leaf=self._want_leaf(ref.file, branches))
        except SourceMissing as missing:
            if missing.reason == "source_changed_during_index":
                return _expand_error("stale_pointer", "Session source changed after the pointer was issued.")
            return _expand_error("source_unavailable", f"Session source is unavailable: {ref.file}")
        stale = self._stale(state, exp_hash, exp_fp)  # type: ignore[arg-type]
        if stale is not None:
            return _expand_error("stale_pointer", stale["message"])
        n = state.entry_count
        for i in indices or []:
            if int(i) >= n:
                return _expand_error("index_out_of_bounds", f"Entry index {int(i)} is outside 0..{max(0, n - 1)}.")
        if rng is not None and rng[1] >= n:
            return _expand_error("index_out_of_bounds", f"Entry range ends at {rng[1]}, but the session has {n} entries.")
        base: dict[str, Any] = {
            "session": ref.file,
            "sessionId": state.session_id,
            "sessionFile": ref.file,
            "sourceHash": state.source_hash,
            "branches": branches,
            "lineageFingerprint": state.lineage.fingerprint,
        }
        for kind_name, values, counts in (("Entry", entry_ids, state.id_counts), ("Operation", op_addrs, state.op_counts)):
            for value in dict.fromkeys(values):
                count = counts.get(value, 0)
                if count == 0:
                    return _expand_error("address_not_found", f'{kind_name} address "{value}" was not found.')
                if count > 1:
                    return _expand_error("ambiguous_address", f'{kind_name} address "{value}" resolves to {count} records.')
        selected = state.selected
        base["expanded"] = [_expanded_item(e) for e in selected]
        return base

    # -- sessions --------------------------------------------------------------------------------

    def sessions(self, params: dict, *, cwd: Optional[str] = None, cancel: Optional[CancelToken] = None, activity: Optional[ActivitySink] = None) -> dict:
        params = params or {}
        kind, target = _scope_kind(params.get("scope") or "project")
        branches = _branches(params.get("branches"))
        cwd = params.get("cwd") or cwd
        page, page_size = page_bounds(params.get("page"), params.get("pageSize"), SESSIONS_MAX_PAGE_SIZE, 50)
        with self._lock:
            all_refs = self._all_refs()
            self._forget_vanished(all_refs)
            try:
                refs = self._scope_refs(kind, target, cwd, all_refs)
            except _Unresolved as err:
                return {
                    "sessions": [], "totalItems": 0, "page": page, "pageSize": page_size, "hasNext": False,
                    "coverage": {
                        "complete": False, "indexedSessions": 0, "eligibleSessions": 0, "staleSessions": 0,
                        "incompleteSessions": 0, "reasons": [err.code], "error": {"code": err.code, "message": err.message},
                    },
                }
            found = len(refs)
            refs = refs[: max(1, self.config.max_sessions)][:SESSIONS_LIST_CAP]
            hot_files = self._hot_files(all_refs, refs)
            states, tiers, coverage = self._load_index(refs, hot_files, branches, hydrate=False, cancel=cancel, activity=activity)
            if found > len(refs):  # the cap cut sessions: the list is not the whole scope
                coverage["complete"] = False
                coverage["reasons"] = sort_lexical(set(coverage["reasons"]) | {"max_sessions"})
        by_file = {st.file: (st, tier) for st, tier in zip(states, tiers)}
        rows = []
        for ref in refs:
            st_tier = by_file.get(ref.file)
            row: dict[str, Any] = {
                "sessionId": ref.id,
                "sessionFile": ref.file,
                "uri": Path(ref.file).as_uri(),
                "cwd": ref.cwd,
                "entryCount": 0,
                "sizeBytes": ref.key.size if ref.key else 0,
                "mtime": ref.mtime,
                "tier": "hot" if ref.file in hot_files else "cold",
            }
            if st_tier is not None:
                st, tier = st_tier
                row["sessionId"] = st.session_id
                row["cwd"] = st.cwd or ref.cwd
                row["entryCount"] = st.entry_count
                if st.first_ts is not None:
                    row["firstTs"] = st.first_ts
                if st.last_ts is not None:
                    row["lastTs"] = st.last_ts
                if st.lineage.leaf_id is not None:
                    row["leafId"] = st.lineage.leaf_id
            rows.append(row)
        start = (page - 1) * page_size
        return {
            "sessions": rows[start : start + page_size],
            "totalItems": len(rows),
            "page": page,
            "pageSize": page_size,
            "hasNext": start + page_size < len(rows),
            "coverage": coverage,
        }


def _snapshot_view(view: HotView) -> HotView:
    """A view whose entry list and segment starts no append can extend (regex needs no
    postings)."""
    n = len(view.entries)
    index = HotIndex(seg_starts=list(view.index.seg_starts), seg_of=view.index.seg_of[:n])
    return HotView(view.session_id, view.session_file, view.source_hash, view.branches, view.lineage_fingerprint,
                   view.mtime, list(view.entries), index, view.tier, view.first_index)


class _ExpandConfig:
    """The engine config seen by expansion: full text, thinking and tool output."""

    def __init__(self, cfg: MemoryConfig) -> None:
        self.max_entry_chars = None
        self.index_thinking = True
        self.index_tool_output = True
        self.max_cold_vocabulary_bytes = cfg.max_cold_vocabulary_bytes
        self.max_cold_cache_bytes = cfg.max_cold_cache_bytes


def _expand_error(code: str, message: str, candidates: Optional[list[str]] = None) -> dict:
    err: dict[str, Any] = {"code": code, "message": message}
    if candidates is not None:
        err["candidates"] = candidates
    return {"error": err}


def _expanded_item(e: dict) -> dict:
    item: dict[str, Any] = {"index": e["index"], "entryId": e.get("entryId")}
    if e.get("operationAddress") is not None:
        item["operationAddress"] = e["operationAddress"]
    item["role"] = e.get("role")
    if e.get("toolName"):
        item["toolName"] = e["toolName"]
    item["type"] = e.get("type")
    if e.get("timestamp") is not None:
        item["timestamp"] = e["timestamp"]
    item["isError"] = bool(e.get("isError"))
    item["text"] = e["text"]
    item["line"] = e.get("line", -1)
    # The reference's structural detail, when present (extra keys are allowed on results).
    for key in _EXPAND_EXTRAS:
        if key in e and e[key] is not None:
            item[key] = e[key]
    return item


_EXPAND_EXTRAS = (
    "parentEntryId", "ref", "provider", "action", "outcome", "filesTouched", "operation", "branchFact",
    "factAddress", "carrierEntryId", "carrierParentId", "carrierFromId",
)
