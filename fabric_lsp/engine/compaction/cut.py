"""Live window and cuts (digest §7): live items, call/result spans, the calibrated
continuity cut and the legacy latest-turn cut."""

from __future__ import annotations

import math
from typing import Any, Optional

from fabric_lsp.engine.session.context import build_context_messages, entry_to_message
from .estimate import estimate_tokens

from .normalize import typed_custom_message

SUMMARY_RAW_TOKEN_BUDGET = 8192  # ceil(32768 / 4)
HARD_CEILING_SAFETY_RATIO = 0.9
MAX_PRECOMPACTION_RATIO = 0.95
TURN_BOUNDARY_ROLES = frozenset(("user", "custom", "bashExecution", "branchSummary", "compactionSummary"))


def _num(v: Any) -> Optional[float]:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return v


def calculate_context_tokens_js(usage: Any) -> float:
    """JS `calculateContextTokens`: NaN when fields are missing (no checkpoint)."""
    if not isinstance(usage, dict):
        return math.nan
    total = usage.get("totalTokens")
    if total:  # truthy
        t = _num(total)
        return math.nan if t is None else t
    s = 0.0
    for k in ("input", "output", "cacheRead", "cacheWrite"):
        v = _num(usage.get(k))
        if v is None:
            return math.nan
        s += v
    return s


def context_tokens_of(entries: list[dict]) -> int:
    return sum(estimate_tokens(m) for m in build_context_messages(entries))


class Projection:
    """Each branch entry's Pi context message and its token estimate, computed once."""

    __slots__ = ("branch", "msgs", "tokens", "start", "ids")

    def __init__(self, branch: list[dict], start: int = 0, ids: Optional[list] = None) -> None:
        """Entries before `start` (never needed: they precede the last compaction's kept
        range) are not projected; their token count reads as 0."""
        self.branch = branch
        self.start = start
        self.ids = ids
        n = len(branch)
        self.msgs: list[Optional[dict]] = [None] * n
        self.tokens = [0] * n
        for i in range(start, n):
            e = branch[i]
            m = entry_to_message(e) if isinstance(e, dict) else None
            if m is not None:
                self.msgs[i] = m
                self.tokens[i] = estimate_tokens(m)

    def context_tokens(self, end: int) -> int:
        """Sum of estimates over buildSessionContext(branch[:end]).messages."""
        branch = self.branch
        lc = -1
        for i in range(end - 1, -1, -1):
            if branch[i].get("type") == "compaction":
                lc = i
                break
        tokens = self.tokens
        if lc < 0:
            return sum(tokens[:end])
        kept = branch[lc].get("firstKeptEntryId")
        kept_from = first_index(branch, kept, lc, ids=self.ids)
        if kept_from < 0:
            kept_from = lc
        return tokens[lc] + sum(tokens[kept_from:lc]) + sum(tokens[lc + 1 : end])


class LiveItem:
    __slots__ = ("branch_index", "id", "turn_boundary", "cut_point", "tokens")

    def __init__(self, branch_index: int, eid: Any, turn_boundary: bool, cut_point: bool, tokens: int) -> None:
        self.branch_index = branch_index
        self.id = eid
        self.turn_boundary = turn_boundary
        self.cut_point = cut_point
        self.tokens = tokens


def last_compaction_index(branch: list[dict]) -> int:
    for i in range(len(branch) - 1, -1, -1):
        if branch[i].get("type") == "compaction":
            return i
    return -1


def live_start(branch: list[dict], lc: int, ids: Optional[list] = None) -> int:
    if lc < 0:
        return 0
    kept = branch[lc].get("firstKeptEntryId")
    if isinstance(kept, str) and kept:
        i = first_index(branch, kept, ids=ids)
        if i >= 0:
            return i
    return lc + 1


def entry_ids(branch: list[dict]) -> list[Any]:
    return [e.get("id") for e in branch]


def first_index(branch: list[dict], entry_id: Any, stop: Optional[int] = None, ids: Optional[list] = None) -> int:
    """JS `findIndex(e => e.id === entry_id)` over `branch[:stop]` (-1 when absent), with
    the scan done by `list.index` in C (`ids` = `entry_ids(branch)` when already known)."""
    if ids is None:
        ids = entry_ids(branch if stop is None else branch[:stop])
    try:
        return ids.index(entry_id, 0, len(ids) if stop is None else stop)
    except ValueError:
        return -1


def live_items(branch: list[dict], start: int, proj: Optional["Projection"] = None) -> list[LiveItem]:
    if proj is None:
        proj = Projection(branch)
    items: list[LiveItem] = []
    msgs = proj.msgs
    for i in range(start, len(branch)):
        e = branch[i]
        t = e.get("type")
        if t == "compaction":
            continue
        if t == "custom_message" and not typed_custom_message(e):
            continue
        if t == "message":
            m = e.get("message")
            if isinstance(m, dict) and m.get("role") == "custom" and m.get("display") is False:
                c = m.get("content")
                if c == "" or c == []:
                    continue
        msg = msgs[i]
        if msg is None:
            continue
        role = msg.get("role")
        items.append(LiveItem(i, e.get("id"), role in TURN_BOUNDARY_ROLES, role != "toolResult", proj.tokens[i]))
    return items


class Spans:
    """Call/result spans over the whole branch, with an O(1) crossing test."""

    def __init__(self, branch: list[dict]) -> None:
        # indices only grow, so the first sighting is `first` and the latest is `last`
        first: dict[str, int] = {}
        last: dict[str, int] = {}
        calls: set[str] = set()
        results: set[str] = set()
        for i, e in enumerate(branch):
            if e.get("type") != "message":
                continue
            m = e.get("message")
            if type(m) is not dict:
                continue
            content = m.get("content")
            if type(content) is list:
                for p in content:
                    if type(p) is dict and p.get("type") == "toolCall":
                        cid = p.get("id")
                        if type(cid) is str and cid:
                            if cid not in first:
                                first[cid] = i
                            last[cid] = i
                            calls.add(cid)
            if m.get("role") == "toolResult":
                cid = m.get("toolCallId")
                if type(cid) is str and cid:
                    if cid not in first:
                        first[cid] = i
                    last[cid] = i
                    results.add(cid)
        spans = {cid: [first[cid], last[cid], cid in calls, cid in results] for cid in first}
        self.closed = [(s[0], s[1]) for s in spans.values() if s[2] and s[3] and s[0] < s[1]]
        n = len(branch) + 2
        diff = [0] * n
        for lo, hi in self.closed:
            diff[lo + 1] += 1
            diff[hi + 1] -= 1
        acc = 0
        self.crossing = [0] * n
        for b in range(n):
            acc += diff[b]
            self.crossing[b] = acc

    def safe(self, b: int) -> bool:
        return self.crossing[b] == 0

    def min_first_crossing(self, b: int) -> Optional[int]:
        if self.crossing[b] == 0:
            return None
        return min(f for f, l in self.closed if f < b <= l)


def calibrate(branch: list[dict], tokens_before: float, raw_before: int, proj: Optional[Projection] = None) -> tuple[float, float]:
    if proj is None:
        proj = Projection(branch)
    lc = last_compaction_index(branch)
    raw = proj.context_tokens(lc + 1) if lc >= 0 else 0
    checkpoints: list[tuple[int, float]] = []
    msgs, toks = proj.msgs, proj.tokens
    for i in range(lc + 1, len(branch)):
        msg = msgs[i]
        if msg is None:
            continue
        raw += toks[i]
        if msg.get("role") == "assistant":
            ctx = calculate_context_tokens_js(msg.get("usage"))
            if math.isfinite(ctx) and ctx > 0:
                checkpoints.append((raw, ctx))
    kept = [(r, c) for r, c in checkpoints if r < raw_before and c <= tokens_before]
    minimum_delta = max(4096, math.floor(raw_before * 0.1))
    slopes = []
    for r, c in kept:
        rd = raw_before - r
        cd = tokens_before - c
        if rd >= minimum_delta and cd >= 0:
            s = cd / rd
            if math.isfinite(s) and s >= 0:
                slopes.append(s)
    if not slopes:
        return 1, max(0, tokens_before - raw_before)
    scale = max(1, max(slopes))
    fixed = max(0, tokens_before - scale * raw_before)
    if kept:
        fixed = max(fixed, max(c - scale * r for r, c in kept))
    return scale, fixed


def _js_floor(x: float) -> float:
    """Math.floor: ±Infinity stays infinite (a session's `1e400` usage), never OverflowError."""
    return math.floor(x) if math.isfinite(x) else x


def _js_ceil(x: float) -> float:
    """Math.ceil, likewise."""
    return math.ceil(x) if math.isfinite(x) else x


def compute_cut(branch: list[dict], budget_input: Optional[dict] = None) -> dict:
    """`{ok, firstKeptEntryId, summarized: [LiveItem], retainedRawTokens, budget?}`."""
    lc = last_compaction_index(branch)
    ids = entry_ids(branch)
    start = live_start(branch, lc, ids)
    proj = Projection(branch, min(start, lc) if lc >= 0 else 0, ids)
    live = live_items(branch, start, proj)
    if not live:
        return {"ok": False, "reason": "empty"}
    spans = Spans(branch)
    if budget_input is not None:
        b = budget_input["budget"]
        window = b.get("contextWindow")
        if isinstance(window, (int, float)) and math.isfinite(window) and window > 0:
            res = _continuity_cut(branch, live, spans, lc, tokens_before=budget_input["tokensBefore"], b=b, proj=proj)
            res["ids"] = ids
            return res
    res = _legacy_cut(live, spans, lc)
    res["ids"] = ids
    return res


def _continuity_cut(
    branch: list[dict], live: list[LiveItem], spans: Spans, lc: int, *, tokens_before: float, b: dict, proj: Projection
) -> dict:
    raw_before = proj.context_tokens(len(branch))
    scale, fixed = calibrate(branch, tokens_before, raw_before, proj)
    window = math.floor(b["contextWindow"])
    reserve = max(0, math.floor(b["reserveTokens"]))
    keep = max(0, math.floor(b["keepRecentTokens"]))
    ratio = min(0.85, max(0.25, b["targetContextRatio"]))
    continuity = max(1, _js_ceil(fixed + (keep + SUMMARY_RAW_TOKEN_BUDGET) * scale))
    occupancy = max(1, math.floor(window * ratio))
    safe_ceiling = max(1, math.floor(max(1, window - reserve) * HARD_CEILING_SAFETY_RATIO))
    reduction = max(1, _js_floor(tokens_before * MAX_PRECOMPACTION_RATIO))
    target = min(continuity, occupancy, safe_ceiling, reduction)
    binding = "continuity"
    for name, v in (("continuity", continuity), ("occupancy", occupancy), ("reserve", safe_ceiling), ("reduction", reduction)):
        if v == target:
            binding = name
            break
    raw_post = max(0, _js_floor((target - fixed) / scale))
    raw_tail = max(0, raw_post - SUMMARY_RAW_TOKEN_BUDGET)
    n = len(live)
    suffix = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        suffix[i] = suffix[i + 1] + live[i].tokens
    cut = -1
    for i in range(1, n):
        it = live[i]
        if it.branch_index > lc and it.cut_point and suffix[i] <= raw_tail and spans.safe(it.branch_index):
            cut = i
            break
    if cut < 0:
        summarized = live
        first_kept = ""
        retained = 0
    else:
        summarized = live[:cut]
        first_kept = live[cut].id
        retained = suffix[cut]
    budget = {
        "strategy": "continuity",
        "contextWindow": b["contextWindow"],
        "targetContextRatio": ratio,
        "targetContextTokens": target,
        "reserveTokens": reserve,
        "keepRecentTokens": keep,
        "rawTokensBefore": raw_before,
        "tokenScale": scale,
        "fixedOverheadTokens": fixed,
        "retainedRawTokens": retained,
        "continuityTargetTokens": continuity,
        "occupancyCeilingTokens": occupancy,
        "safeCeilingTokens": safe_ceiling,
        "reductionCeilingTokens": reduction,
        "rawTailTokenBudget": raw_tail,
        "bindingConstraint": binding,
    }
    return {"ok": True, "firstKeptEntryId": first_kept, "summarized": summarized, "retainedRawTokens": retained, "budget": budget}


def _legacy_cut(live: list[LiveItem], spans: Spans, lc: int) -> dict:
    lb = -1
    for i in range(len(live) - 1, -1, -1):
        if live[i].turn_boundary:
            lb = i
            break
    i = lb
    if lb > 0:
        while i > 0:
            e = spans.min_first_crossing(live[i].branch_index)
            if e is None:
                break
            j = -1
            for k in range(len(live) - 1, -1, -1):
                if live[k].branch_index <= e and live[k].turn_boundary:
                    j = k
                    break
            if j < 0 or j >= i:
                i = 0
                break
            i = j
    if i <= 0 or live[i].branch_index <= lc:
        return {"ok": True, "firstKeptEntryId": "", "summarized": live, "retainedRawTokens": 0}
    return {"ok": True, "firstKeptEntryId": live[i].id, "summarized": live[:i], "retainedRawTokens": 0}
