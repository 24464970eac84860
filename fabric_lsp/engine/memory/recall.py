"""The `fabric/recall` query path: scope, index states, search, coverage and its reasons.

A query is planned (tokenize.py: browse, terms or regex), run over the hot views (BM25
over entries) and the cold digests (pointer hits from the term table), grouped, ranked
and paged (search.py). The coverage of the answer joins the index's (index.py) with the
query's own budgets and errors. A regex runs in the worker (regex_worker.py) without the
engine lock, on snapshots of the hot views.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fabric_lsp.engine.activity import ActivitySink, CancelToken, check, report
from fabric_lsp.protocol import (
    Branches,
    CoverageError,
    PointerItem,
    RecallParams,
    RecallResult,
)
from fabric_lsp.protocol import SegmentItem as SegmentResultItem
from fabric_lsp.protocol_results import coverage_error, index_coverage

from ..jsstr import utf16_sort_key
from .catalog import (
    Unresolved,
    all_refs,
    forget_vanished,
    hot_files,
    safe_nonneg_int,
    scope_kind,
    scope_refs,
)
from .cold_index import TermsSet, score_digests_inverted
from .core import MemoryState
from .expand import stale_pointer
from .index import load_index
from .records import HotRecords, snapshot, texts_of
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
    pointer_result,
    render_text,
    score_digests,
    segment_result,
)
from .tokenize import plan_memory_query, sort_lexical

if TYPE_CHECKING:
    from ..json_types import JsonObject

RECALL_MAX_PAGE_SIZE = 100  # the wire contract's bound (the reference allows 200)


@dataclass(frozen=True)
class RecallEcho:
    """The request fields every `fabric/recall` answer repeats, a search or an error."""

    scope: str
    branches: Branches
    query: str | None
    mode: str
    page: int
    page_size: int


def recall(
    eng: MemoryState,
    params: RecallParams,
    *,
    cwd: str | None = None,
    cancel: CancelToken | None = None,
    activity: ActivitySink | None = None,
) -> RecallResult:
    """The answer to `params`, decoded and checked by the wire contract (protocol.py:
    types, bounds and the cross-field rules), so nothing here checks them again."""
    query, mode, branches, scope = params.query, params.query_mode, params.branches, params.scope
    kind, target = scope_kind(scope)
    cwd = params.cwd or cwd
    page, page_size = params.page, params.page_size
    echo = RecallEcho(scope, branches, query, mode, page, page_size)
    hydrate = kind == "target"
    exp_hash, exp_fp = params.expected_source_hash, params.expected_lineage_fingerprint
    rng = (params.entry_range.first, params.entry_range.last) if params.entry_range is not None else None
    if rng is not None and not (safe_nonneg_int(rng[0]) and safe_nonneg_int(rng[1])):  # past JS's safe integers
        return recall_error(echo, "index_out_of_bounds", "Entry range requires safe integers with 0 <= first <= last.")
    plan = plan_memory_query(query, mode)
    with eng.lock:
        known = all_refs(eng)
        forget_vanished(eng, known)
        try:
            refs = scope_refs(eng, kind, target, cwd, known)
        except Unresolved as err:
            return recall_error(echo, err.code, err.message)
        hot = hot_files(eng, known, refs)
        states, tiers, index_cov = load_index(
            eng, refs, hot, branches, hydrate=hydrate, cancel=cancel, activity=activity
        )
        if hydrate and states:
            st = states[0]
            stale = stale_pointer(st, exp_hash, exp_fp)
            if stale is not None:
                return recall_error(echo, "stale_pointer", stale)
            if rng is not None and rng[1] >= st.entry_count:
                return recall_error(
                    echo,
                    "index_out_of_bounds",
                    f"Entry range ends at {rng[1]}, but the session has {st.entry_count} entries.",
                )
        views: list[HotView] = []
        digests: list[DigestView] = []
        for st, tier in zip(states, tiers):
            if tier == "hydrated":
                view = st.hot_view("cold")
                if rng is not None:
                    held = st.entries if st.entries is not None else HotRecords()
                    chosen = [held[p] for p in range(len(held)) if rng[0] <= held.index_at(p) <= rng[1]]
                    view = HotView(
                        view.session_id,
                        view.session_file,
                        view.source_hash,
                        view.branches,
                        view.lineage_fingerprint,
                        view.mtime,
                        chosen,
                        HotIndex.build(chosen),
                        "cold",
                    )
                views.append(view)
            elif tier == "hot":
                views.append(st.hot_view())
            else:
                digests.append(st.digest_view())
        check(cancel)
        if plan["kind"] != "regex":
            return _mark_context_edits(
                eng, run_search(eng, plan, echo, views, digests, index_cov=index_cov, activity=activity), states
            )
        # A regex may run up to its timeout in the worker: do that without the engine
        # lock, on snapshots, so other memory requests are not held up meanwhile (the cold
        # vocabularies interned first: a view of an interned slot never changes).
        views = [snapshot_view(v) for v in views]
        eng.cold.settle()
    return _mark_context_edits(
        eng, run_search(eng, plan, echo, views, digests, index_cov=index_cov, activity=activity), states
    )


def _mark_context_edits(eng: MemoryState, result: RecallResult, states: list[Any]) -> RecallResult:
    """`contextEdit` on the segment entries Pi 1.x hides or replaces (session/projection.py):
    read from each shown session's file, when it still has the bytes the index read."""
    from ..session.projection import file_context_edit_marks
    from .catalog import want_leaf
    from .expand import mark_context_edits

    leaves = {st.file: st.lineage.leaf_id for st in states}
    marks: dict[tuple[Any, ...], Any] = {}
    for item in result.items:
        if not isinstance(item, SegmentResultItem):
            continue
        seg = item.segment
        file, branches = seg.session_file, seg.branches
        key = (file, seg.source_hash, branches)
        if key not in marks:
            leaf = leaves.get(file)
            if leaf is None:
                leaf = want_leaf(eng, file, "active")
            marks[key] = file_context_edit_marks(file, source_hash=seg.source_hash, leaf_id=leaf, branches=branches)
        mark_context_edits(seg.entries, marks[key])
    return result


def run_search(
    eng: MemoryState,
    plan: JsonObject,
    echo: RecallEcho,
    views: list[HotView],
    digests: list[DigestView],
    *,
    index_cov: JsonObject,
    activity: ActivitySink | None = None,
) -> RecallResult:
    scope, branches, query, mode = echo.scope, echo.branches, echo.query, echo.mode
    page, page_size = echo.page, echo.page_size
    q_reasons: set[str] = set()
    q_error: JsonObject | None = None
    q_complete = True
    browse = plan["kind"] == "browse"
    located: dict[int, dict[int, float]] = {}
    hits: list[DigestHit] = []
    if browse:
        remaining = CANDIDATE_ENTRIES
        order = sorted(range(len(views)), key=lambda i: (-views[i].mtime, utf16_sort_key(views[i].session_file)))
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
        hits, dcapped = score_cold(eng, digests, plan["terms"])
        if dcapped:
            q_reasons.add("candidate_digest_budget")
    else:
        located, hits, q_reasons, q_error = regex_search(eng, plan["pattern"], views, digests, activity)
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
    coverage = index_coverage(
        index_cov,
        complete=bool(index_cov["complete"] and q_complete),
        reasons=sort_lexical(set(index_cov["reasons"]) | q_reasons),
        error=CoverageError(code=q_error["code"], message=q_error["message"]) if q_error is not None else None,
    )
    text = render_text(
        page_items,
        query=query if not browse else None,
        total_items=total_items,
        total_matches=total_matches,
        segment_count=segment_count,
        index_coverage=index_cov,
        query_reasons=sort_lexical(q_reasons),
        query_complete=q_complete,
    )
    return RecallResult(
        scope=scope,
        branches=branches,
        query=query,
        query_mode=mode,
        page=page,
        page_size=page_size,
        total_items=total_items,
        total_matches=total_matches,
        has_next=start + page_size < total_items,
        authoritative=coverage.complete,
        coverage=coverage,
        items=[
            SegmentResultItem(segment=segment_result(it))
            if isinstance(it, SegmentItem)
            else PointerItem(pointer=pointer_result(it))
            for it in page_items
        ],
        text=text,
    )


def regex_search(
    eng: MemoryState,
    pattern: str,
    views: list[HotView],
    digests: list[DigestView],
    activity: ActivitySink | None = None,
) -> tuple[dict[int, dict[int, float]], list[DigestHit], set[str], JsonObject | None]:
    cfg = eng.config
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
        for pos, text in enumerate(texts_of(v.entries)):
            if not add(text, (vn, pos)):
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
        err: JsonObject = {
            "code": "regex_pattern_too_large",
            "message": f"Regex pattern is {pbytes} bytes; limit is {cfg.regex_max_pattern_bytes}.",
        }
        return {}, [], {err["code"]}, err
    report(activity, f"Matching the regex against {len(haystacks)} texts", milestone=True)
    outcome = eng.regex.run(pattern, haystacks, cfg.regex_timeout_ms)
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


def score_cold(eng: MemoryState, digests: list[DigestView], terms: list[str]) -> tuple[list[DigestHit], bool]:
    """Cold pointer hits from the inverted term -> sessions map when every digest is
    held by the term table (else the per-digest scan, e.g. for detached views)."""
    slots = [d.vocab_set.slot if isinstance(d.vocab_set, TermsSet) else None for d in digests]
    if all(s is not None for s in slots):
        return score_digests_inverted(digests, slots, terms, eng.cold)
    return score_digests(digests, terms)


def recall_error(echo: RecallEcho, code: str, message: str) -> RecallResult:
    return RecallResult(
        scope=echo.scope or "session",
        branches=echo.branches,
        query=echo.query,
        query_mode=echo.mode,
        page=echo.page,
        page_size=echo.page_size,
        total_items=0,
        total_matches=0,
        has_next=False,
        authoritative=False,
        coverage=coverage_error(code, message),
        items=[],
        text=message,
    )


def snapshot_view(view: HotView) -> HotView:
    """A view whose entry list and segment starts no append can extend (regex needs no
    postings)."""
    n = len(view.entries)
    index = HotIndex(seg_starts=list(view.index.seg_starts), seg_of=view.index.seg_of[:n])
    return HotView(
        view.session_id,
        view.session_file,
        view.source_hash,
        view.branches,
        view.lineage_fingerprint,
        view.mtime,
        snapshot(view.entries),
        index,
        view.tier,
        view.first_index,
    )
