"""Hot BM25, cold digest scoring, segment grouping, global ranking, pagination and the
rendered text (digest §6-§8).

Hot sessions arrive as `HotView`s carrying a per-session inverted index, so a query
touches only the postings of its terms; grouping uses precomputed segment starts, and
only the requested page is materialised into wire objects.

Invariants: results depend only on the session data and the query (ties broken by
explicit keys); totals describe the whole retained stream, never just the page.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from collections.abc import Container, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from fabric_lsp.protocol import Branches, ExactMatch, Pointer, ResultEntryRange, Segment, SegmentEntry, Tier

from ..jsstr import iso_ms_or_none, js_stringify, utf16_order_str
from ..native import NATIVE
from .hot_index import HotIndex, postings_of
from .records import HotRecords
from .tokenize import tokenize_lexical

if TYPE_CHECKING:
    from ..json_types import JsonObject

K1 = 1.2
B = 0.75
CANDIDATE_ENTRIES = 50_000
CANDIDATE_DIGESTS = 10_000
CANDIDATE_ITEMS = 10_000

_SESSION_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
_ENTRY_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*\Z")

# a term's BM25 contributions and a view's segment keys in C (engine/_native.c), when built
_bm25_add = getattr(NATIVE, "bm25_add", None)
_segment_keys_c = getattr(NATIVE, "segment_keys", None)


@dataclass
class HotView:
    """One hot (or hydrated) session as the search sees it."""

    session_id: str
    session_file: str
    source_hash: str
    branches: str
    lineage_fingerprint: str
    mtime: float
    entries: Sequence[JsonObject]
    index: HotIndex
    tier: str = "hot"
    first_index: int = 0  # hydrated ranges: index of entries[0]

    def __post_init__(self) -> None:
        self.file_key = _file_key(self.session_file)
        # Records are dense: entries[i]["index"] == base_index + i (also for range slices).
        entries = self.entries
        if type(entries) is HotRecords:  # its column (no record built)
            self.base_index = entries.index_at(0) if len(entries) else 0
        else:
            self.base_index = entries[0]["index"] if entries else 0


@dataclass
class DigestView:
    session_id: str
    session_file: str
    source_hash: str
    branches: str
    lineage_fingerprint: str
    cwd: str
    last_ts: float | None
    mtime: float
    vocabulary: list[str]
    vocab_set: Container[str]  # a frozenset, or a cold_index.TermsSet

    def __post_init__(self) -> None:
        self.file_key = _file_key(self.session_file)


@dataclass
class DigestHit:
    view: DigestView
    score: float
    matched_terms: list[str]


@dataclass
class SegmentItem:
    view: HotView
    start: int  # position in view.entries
    end: int  # exclusive
    score: float
    matched: Any | None  # container of matched positions (set or located map); None = all
    matched_count: int

    def records(self) -> list[JsonObject]:
        """The segment's records, read once (its wire segment and its text both show them)."""
        recs: list[JsonObject] | None = self.__dict__.get("_records")
        if recs is None:
            entries = self.view.entries
            recs = self.__dict__["_records"] = [entries[pos] for pos in range(self.start, self.end)]
        return recs


# ---- scoring ---------------------------------------------------------------------------


def bm25_located(
    views: list[HotView], terms: list[str], limit: int = CANDIDATE_ENTRIES
) -> tuple[dict[int, dict[int, float]], bool]:
    """{view number: {position: score}} for documents with score > 0, and whether the
    corpus was capped at `limit` documents (in view order)."""
    query_terms = list(dict.fromkeys(t for term in terms for t in tokenize_lexical(term)))
    sizes: list[int] = []
    remaining = limit
    capped = False
    for v in views:
        n = len(v.entries)
        take = min(n, remaining)
        if take < n:
            capped = True
        sizes.append(take)
        remaining -= take
    N = sum(sizes)
    if N == 0 or not query_terms:
        return {}, capped
    total_len = 0
    for v, take in zip(views, sizes):
        if take == len(v.entries):
            total_len += v.index.total_len
        else:
            total_len += sum(v.index.doc_len[:take])
    avgdl = total_len / N
    located: dict[int, dict[int, float]] = {}
    for term in query_terms:
        lists: list[tuple[int, HotView, Sequence[int]]] = []
        df = 0
        for vn, (v, take) in enumerate(zip(views, sizes)):
            arr = v.index.postings.get(term)
            if arr is None or take == 0:
                continue
            arr = postings_of(arr)
            if take < len(v.entries):
                kept = [p for p in arr if (p >> 32) < take]
            else:
                kept = arr
            if kept:
                lists.append((vn, v, kept))
                df += len(kept)
        if df == 0:
            continue
        idf = math.log((N - df + 0.5) / (df + 0.5) + 1)
        k1p1 = K1 + 1
        norm_a = K1 * (1 - B)
        norm_b = K1 * B / avgdl
        for vn, v, kept in lists:
            scores = located.setdefault(vn, {})
            dl = v.index.doc_len
            if _bm25_add is not None and _bm25_add(scores, kept, dl, idf, k1p1, norm_a, norm_b):
                continue  # the loop below, in C (the same doubles)
            get = scores.get
            for p in kept:
                idx = p >> 32
                tf = p & 0xFFFFFFFF
                s = idf * (tf * k1p1) / (tf + (norm_a + norm_b * dl[idx]))
                scores[idx] = get(idx, 0.0) + s
    return located, capped


def score_digests(
    digests: list[DigestView], terms: list[str], limit: int = CANDIDATE_DIGESTS
) -> tuple[list[DigestHit], bool]:
    hits: list[tuple[DigestView, list[str]]] = []
    capped = False
    for d in digests:
        matches = [t for t in terms if t in d.vocab_set]
        if matches:
            if len(hits) >= limit:
                capped = True
                break
            hits.append((d, matches))
    return rank_digest_hits(hits), capped


def rank_digest_hits(hits: list[tuple[DigestView, list[str]]]) -> list[DigestHit]:
    """The cold pointers' score (digest §6): per matched term, the IDF over the matched
    digests. The one copy of the rule, for the scan and the inverted cold index alike."""
    C = len(hits)
    df: Counter[str] = Counter()
    for _, matches in hits:
        df.update(matches)
    out: list[DigestHit] = []
    for d, matches in hits:
        score = 0.0
        for t in matches:
            score += math.log((C - df[t] + 0.5) / (df[t] + 0.5) + 1)
        out.append(DigestHit(d, score, matches))
    return out


# ---- grouping, ranking, pagination ------------------------------------------------------


def _segments_for(view: HotView, matched: dict[int, float]) -> list[SegmentItem]:
    """A browse's segments of one view: every segment, each with its matched positions."""
    starts = view.index.seg_starts  # the index is always built over exactly view.entries
    n = len(view.entries)
    out: list[SegmentItem] = []
    everything = len(matched) >= n
    for si, start in enumerate(starts):
        end = starts[si + 1] if si + 1 < len(starts) else n
        if everything:
            out.append(SegmentItem(view, start, end, 0.0, None, end - start))
        else:
            chosen = {p for p in range(start, end) if p in matched}
            out.append(SegmentItem(view, start, end, 0.0, chosen, len(chosen)))
    return out


def _segment_keys(view: HotView, vn: int, matched: dict[int, float], seq: int) -> list[tuple[Any, ...]]:
    """A query's segments of one view (those with a matched position) as sort keys:
    `(-best score, -mtime, 0, first index, file key, seq, vn, segment number, matched
    count)`, in the order of each segment's first position in `matched`; `seq` numbers
    them on from the given value. The first five are `_item_key` of the segment's item;
    `_item_of` makes the item of a key (only the ranked page's are made)."""
    starts = view.index.seg_starts
    seg_of = view.index.seg_of
    if _segment_keys_c is not None:
        keys = _segment_keys_c(matched, seg_of, starts, -view.mtime, view.base_index, view.file_key, vn, seq)
        if keys is not None:
            return keys
    by_seg: dict[int, list[Any]] = {}  # segment number -> [best score, matched count]
    get = by_seg.get
    for pos, score in matched.items():
        si = seg_of[pos]
        cur = get(si)
        if cur is None:
            by_seg[si] = [score, 1]
        else:
            cur[1] += 1
            if score > cur[0]:
                cur[0] = score
    neg_mtime, base, file_key = -view.mtime, view.base_index, view.file_key
    out: list[tuple[Any, ...]] = []
    for si, (score, count) in by_seg.items():
        out.append((-score, neg_mtime, 0, base + starts[si], file_key, seq, vn, si, count))
        seq += 1
    return out


def _item_of(key: tuple[Any, ...], views: list[HotView], located: dict[int, dict[int, float]]) -> Any:
    """The ranked item of a sort key: a `_segment_keys` key's SegmentItem (segments share
    their view's located map; which of their entries matched is looked up only when a
    segment is rendered), else the item the key carries."""
    if len(key) == 9:
        vn: int = key[6]
        si: int = key[7]
        count: int = key[8]
        view = views[vn]
        starts = view.index.seg_starts
        end = starts[si + 1] if si + 1 < len(starts) else len(view.entries)
        return SegmentItem(view, starts[si], end, -key[0], located[vn], count)
    return key[6]


def _file_key(path: str) -> str:
    # JS `<` order as a str, comparable between any two paths (an ASCII path, told at once
    # by `isascii`, is its own key)
    return path if path.isascii() else utf16_order_str(path)


def _item_key(item: Any) -> tuple[Any, ...]:
    v = item.view
    if type(item) is SegmentItem:
        return (-item.score, -v.mtime, 0, v.base_index + item.start, v.file_key)
    return (-item.score, -v.mtime, 1, 0, v.file_key)


def group_and_rank(
    views: list[HotView],
    located: dict[int, dict[int, float]],
    digest_hits: list[DigestHit],
    browse: bool,
    *,
    max_items: int = CANDIDATE_ITEMS,
    needed: int | None = None,
) -> tuple[list[Any], int, int, int, bool]:
    """(ranked items, totalItems, totalMatches, segmentCount, item cap reached).

    The ranked list holds the first `needed` items of the global order (all of them when
    `needed` is None); totals always describe the whole retained stream.

    Every item is ranked by its sort key (`_item_key`) followed by a number unique to it,
    so the order is the keys' and no two keys are ever equal; a query's segments are
    ranked as bare keys (`_segment_keys`) and only the returned ones become items."""
    keyed: list[tuple[Any, ...]] = []
    total = 0
    segs = 0
    for vn, matched in located.items():
        view = views[vn]
        if browse:
            for item in _segments_for(view, matched):
                keyed.append((*_item_key(item), len(keyed), item))
                total += item.matched_count
                segs += 1
        else:
            keys = _segment_keys(view, vn, matched, len(keyed))
            keyed.extend(keys)
            total += len(matched)  # every matched position is in one segment
            segs += len(keys)
    for hit in digest_hits:
        keyed.append((*_item_key(hit), len(keyed), hit))
    total += len(digest_hits)
    if not keyed:
        return [], 0, 0, 0, False
    capped = len(keyed) > max_items
    if capped or needed is None or needed * 4 >= len(keyed):
        keyed.sort()
        if capped:
            del keyed[max_items:]
            total = segs = 0
            for key in keyed:
                if len(key) == 9:
                    total += key[8]
                    segs += 1
                elif type(key[6]) is SegmentItem:
                    total += key[6].matched_count
                    segs += 1
                else:
                    total += 1
        top = keyed if needed is None else keyed[:needed]
    else:
        # Only the page is shown: select it instead of sorting everything (same order).
        top = heapq.nsmallest(needed, keyed)
    ranked = [_item_of(key, views, located) for key in top]
    return ranked, len(keyed), total, segs, capped


# ---- wire objects and text ------------------------------------------------------------


def segment_result(item: SegmentItem) -> Segment:
    """The wire `Segment` of a ranked segment (its entries and exact matches)."""
    v = item.view
    entries: list[SegmentEntry] = []
    exact: list[ExactMatch] = []
    recs = item.records()
    for pos, rec in zip(range(item.start, item.end), recs):
        matched = item.matched is None or pos in item.matched
        entries.append(
            SegmentEntry(
                index=rec["index"],
                entry_id=rec.get("entryId"),
                parent_id=rec.get("parentId"),
                type=rec.get("type"),
                role=rec.get("role"),
                tool_name=rec.get("toolName"),
                timestamp=rec.get("timestamp"),
                is_error=rec["isError"],
                truncated=rec["truncated"],
                text=rec["text"],
                matched=matched,
                line=rec.get("line", -1),
            )
        )
        if matched:
            exact.append(
                ExactMatch(
                    index=rec["index"], entry_id=rec.get("entryId"), operation_address=rec.get("operationAddress")
                )
            )
    first = recs[0]["index"]
    last = recs[-1]["index"]
    return Segment(
        tier=cast("Tier", v.tier),
        session_id=v.session_id,
        session_file=v.session_file,
        source_hash=v.source_hash,
        branches=cast("Branches", v.branches),
        lineage_fingerprint=v.lineage_fingerprint,
        entry_range=ResultEntryRange(first=first, last=last),
        score=item.score,
        matched_count=item.matched_count,
        exact_matches=exact,
        entries=entries,
    )


def pointer_result(hit: DigestHit) -> Pointer:
    """The wire `Pointer` of a cold session's digest hit."""
    d = hit.view
    return Pointer(
        tier="cold",
        session_id=d.session_id,
        session_file=d.session_file,
        source_hash=d.source_hash,
        branches=cast("Branches", d.branches),
        lineage_fingerprint=d.lineage_fingerprint,
        matched_terms=list(hit.matched_terms),
        score=hit.score,
        cwd=d.cwd,
        last_ts=d.last_ts,
    )


def entry_reference(session_id: str, rec: JsonObject) -> str | None:
    """`pi-entry:<sessionId>/<entryId>`; child records point at their carrier entry."""
    entry_id = rec.get("entryId")
    if rec.get("type") in ("fabric_operation", "fabric_branch_fact"):
        entry_id = rec.get("parentEntryId")
    if not isinstance(entry_id, str) or not _SESSION_REF.match(session_id) or not _ENTRY_REF.match(entry_id):
        return None
    return f"pi-entry:{session_id}/{entry_id}"


def _render_segment(item: SegmentItem, browse: bool, entry_refs: bool) -> str:
    v = item.view
    recs = item.records()
    first = recs[0]["index"]
    last = recs[-1]["index"]
    rng = f"#{first}" if first == last else f"#{first}-#{last}"
    lines = [f"--- {rng} ({item.matched_count}/{item.end - item.start} match) ---"]
    for pos, rec in zip(range(item.start, item.end), recs):
        matched = item.matched is None or pos in item.matched
        marker = ">" if (browse or matched) else " "
        label = rec.get("role") or rec.get("type")
        if rec.get("toolName"):
            label = f"{label} {rec['toolName']}"
        line = f"{marker} #{rec['index']} [{label}]"
        if rec.get("isError"):
            line += " [error]"
        line += " " + (rec["text"] if matched else "")
        if rec.get("truncated"):
            line += " …[truncated]"
        if entry_refs:
            ref = entry_reference(v.session_id, rec)
            if ref:
                line += " " + ref
        lines.append(line)
    return "\n".join(lines)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _render_digest(hit: DigestHit, browse: bool) -> str:
    d = hit.view
    when = iso_ms_or_none(d.last_ts) or "unknown time"  # (also a time JS's Date refuses)
    n = len(hit.matched_terms)
    m = "is available as a cold session pointer" if browse else f"has {_plural(n, 'matching lexical term')}"
    return (
        f"> session {d.session_id} (cold, {d.cwd}, {when}, branches={d.branches}) {m} — hydrate exact file "
        f"{js_stringify(d.session_file)} with branches {js_stringify(d.branches)}, expectedSourceHash "
        f"{js_stringify(d.source_hash)}, and expectedLineageFingerprint {js_stringify(d.lineage_fingerprint)}."
    )


def render_text(
    page_items: list[Any],
    *,
    query: str | None,
    total_items: int,
    total_matches: int,
    segment_count: int,
    index_coverage: JsonObject | None,
    query_reasons: list[str],
    query_complete: bool,
    entry_refs: bool = True,
) -> str:
    """The text a model sees (digest §8), plus entry references when `entry_refs`."""
    browse = not query
    if not page_items:
        if total_items > 0:
            return "No results on this page."
        if not query:
            return "No entries in scope."
        if index_coverage is not None and not index_coverage["complete"]:
            reasons = index_coverage["reasons"]
            tail = f"; reasons: {', '.join(reasons)}" if reasons else ""
            text = (
                f'No indexed matches for "{query}"; coverage is incomplete '
                f"({index_coverage['indexedSessions']}/{index_coverage['eligibleSessions']} sessions indexed{tail})."
            )
            error = index_coverage.get("error")  # (only a missing session dir: deviations.md, 14)
            return f"{text} {error['message']}" if isinstance(error, dict) else text
        if not query_complete:
            return f'No indexed matches for "{query}"; query coverage is incomplete ({", ".join(query_reasons)}).'
        return f'No matches for "{query}".'
    if query:
        cold_n = sum(1 for it in page_items if isinstance(it, DigestHit))
        cold = f" and {_plural(cold_n, 'cold session')}" if cold_n else ""
        header = f'{total_matches} matches across {_plural(segment_count, "segment")}{cold} for "{query}":'
    else:
        header = f"{total_matches} most recent entries:"
    blocks = [
        _render_segment(it, browse, entry_refs) if isinstance(it, SegmentItem) else _render_digest(it, browse)
        for it in page_items
    ]
    return header + "\n\n" + "\n\n".join(blocks)
