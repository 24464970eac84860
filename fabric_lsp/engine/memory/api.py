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

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

from fabric_lsp.engine.activity import ActivitySink, CancelToken, check, report

from . import catalog, file_history, index
from .catalog import Ref, Unresolved, branches_of, safe_nonneg_int, scope_kind
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
from .sessions import SessionState, SourceMissing
from .tokenize import plan_memory_query, sort_lexical, utf16_key

SESSIONS_LIST_CAP = 500
RECALL_MAX_PAGE_SIZE = 100  # the wire contract's bound (the reference allows 200)
SESSIONS_MAX_PAGE_SIZE = 200


@dataclass(frozen=True)
class _RecallEcho:
    """The request fields every `fabric/recall` answer repeats, a search or an error."""

    scope: str
    branches: str
    query: Optional[str]
    mode: str
    page: int
    page_size: int


# ---- the engine -----------------------------------------------------------------------------


class MemoryEngine(MemoryCore):
    # -- lifecycle ----------------------------------------------------------------------------

    def notify_changed(self, paths: Iterable[str]) -> None:
        """A watched-file event. Freshness is checked by stat on every call anyway; this
        only forgets state of files that are gone."""
        index.forget_gone(self, paths)
        indexer = self.background
        if indexer is not None:
            indexer.kick()

    def drop_caches(self) -> None:
        index.drop_caches(self)

    def close(self) -> None:
        indexer = self.background
        if indexer is not None:
            indexer.stop()
        self._regex.close()

    # -- file history ---------------------------------------------------------------------------

    def file_history(self, params: dict, *, cwd: Optional[str] = None, cancel: Optional[CancelToken] = None, activity: Optional[ActivitySink] = None) -> dict:
        """The `fabric/fileHistory` result (see file_history.py)."""
        return file_history.file_history(self, params, cwd=cwd, cancel=cancel, activity=activity)

    def indexed_states(
        self, scope: str, cwd: Optional[str], branches: str, cancel: Optional[CancelToken],
        activity: Optional[ActivitySink],
    ) -> tuple[list[SessionState], dict]:
        """Fresh hot and cold states (never hydrated) of the "project" or "global" scope in
        scope order, and the index coverage. The caller holds the engine lock."""
        return index.indexed_states(self, scope, cwd, branches, cancel=cancel, activity=activity)

    # -- what the background indexer (background.py) uses -------------------------------------

    def _all_refs(self) -> list[Ref]:
        return catalog.all_refs(self)

    def _forget_vanished(self, all_refs: list[Ref]) -> None:
        catalog.forget_vanished(self, all_refs)

    def _scope_refs(self, kind: str, target: Optional[str], cwd: Optional[str], all_refs: list[Ref]) -> list[Ref]:
        return catalog.scope_refs(self, kind, target, cwd, all_refs)

    def _hot_files(self, all_refs: list[Ref], scoped: list[Ref]) -> set[str]:
        return catalog.hot_files(self, all_refs, scoped)

    def _want_leaf(self, file: str, branches: str) -> Optional[str]:
        return catalog.want_leaf(self, file, branches)

    def _cleanup_once(self) -> bool:
        return index.cleanup_once(self)

    def _cached(self, ref: Ref, branches: str, tier: str) -> tuple[Optional[SessionState], bool]:
        return index.cached(self, ref, branches, tier)

    def _adopt(self, state: SessionState) -> None:
        index.adopt(self, state)

    # -- recall ---------------------------------------------------------------------------------

    def recall(self, params: dict, *, cwd: Optional[str] = None, cancel: Optional[CancelToken] = None, activity: Optional[ActivitySink] = None) -> dict:
        params = params or {}
        query = params.get("query")
        if query is not None and not isinstance(query, str):
            raise ValueError("query: must be a string")
        mode = params.get("queryMode") or "literal"
        if mode not in ("literal", "regex"):
            raise ValueError('queryMode: must be "literal" or "regex"')
        branches = branches_of(params.get("branches"))
        kind, target = scope_kind(params.get("scope"))
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
            if not (safe_nonneg_int(first) and safe_nonneg_int(last)) or last < first:
                return self._recall_error(echo, "index_out_of_bounds",
                                          "Entry range requires safe integers with 0 <= first <= last.")
            rng = (int(first), int(last))
        plan = plan_memory_query(query, mode)
        with self._lock:
            all_refs = self._all_refs()
            self._forget_vanished(all_refs)
            try:
                refs = self._scope_refs(kind, target, cwd, all_refs)
            except Unresolved as err:
                return self._recall_error(echo, err.code, err.message)
            hot_files = self._hot_files(all_refs, refs)
            states, tiers, index_cov = index.load_index(self, refs, hot_files, branches, hydrate=hydrate, cancel=cancel, activity=activity)
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
        branches = branches_of(params.get("branches"))
        indices = params.get("indices")
        if indices is not None and not isinstance(indices, list):
            raise ValueError("indices: must be an array")
        if indices is not None and not all(safe_nonneg_int(i) for i in indices):
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
            if not (safe_nonneg_int(first) and safe_nonneg_int(last)) or last < first:
                return _expand_error("index_out_of_bounds", "Entry range requires safe integers with 0 <= first <= last.")
            rng = (int(first), int(last))
        exp_hash = params.get("expectedSourceHash")
        exp_fp = params.get("expectedLineageFingerprint")
        # Expand reads the source itself and shares no derived state: it does not wait for
        # the engine lock (a long first build of other sessions must not hold it up).
        check(cancel)
        try:
            ref = catalog.resolve_target(self, session.strip(), self._all_refs())
        except Unresolved as err:
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
        kind, target = scope_kind(params.get("scope") or "project")
        branches = branches_of(params.get("branches"))
        cwd = params.get("cwd") or cwd
        page, page_size = page_bounds(params.get("page"), params.get("pageSize"), SESSIONS_MAX_PAGE_SIZE, 50)
        with self._lock:
            all_refs = self._all_refs()
            self._forget_vanished(all_refs)
            try:
                refs = self._scope_refs(kind, target, cwd, all_refs)
            except Unresolved as err:
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
            states, tiers, coverage = index.load_index(self, refs, hot_files, branches, hydrate=False, cancel=cancel, activity=activity)
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
