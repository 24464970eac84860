"""Live window and cuts (digest §7): live items, call/result spans, the calibrated
continuity cut and the legacy latest-turn cut."""

from __future__ import annotations

import math
from itertools import accumulate
from typing import Any

from fabric_lsp.engine.session.context import build_context_messages

from .estimate import estimate_tokens
from .facts import COMPACTION, NOMSG, facts

SUMMARY_RAW_TOKEN_BUDGET = 8192  # ceil(32768 / 4)
HARD_CEILING_SAFETY_RATIO = 0.9
MAX_PRECOMPACTION_RATIO = 0.95
TURN_BOUNDARY_ROLES = frozenset(("user", "custom", "bashExecution", "branchSummary", "compactionSummary"))


def context_tokens_of(entries: list[dict[str, Any]]) -> int:
    return sum(estimate_tokens(m) for m in build_context_messages(entries))


class Projection:
    """Each branch entry's Pi context-message token estimate (from its facts), and the
    context token count of any branch prefix."""

    __slots__ = ("facts", "tokens", "start")

    def __init__(self, branch: Any, start: int = 0, ids: list[Any] | None = None) -> None:
        """`branch` is a list of entry dicts or their `Facts`; `start` and `ids` are
        accepted for compatibility (entries before `start` are never summed)."""
        self.facts = facts(branch)
        self.tokens = self.facts.tokens
        self.start = start

    def context_tokens(self, end: int) -> int:
        """Sum of estimates over buildSessionContext(branch[:end]).messages."""
        f = self.facts
        lc = f.last_compaction(end)
        tokens = self.tokens
        if lc < 0:
            return sum(tokens[:end])
        kept_from = f.index(f.compactions[lc][0], lc)
        if kept_from < 0:
            kept_from = lc
        return tokens[lc] + sum(tokens[kept_from:lc]) + sum(tokens[lc + 1 : end])


class LiveItem:
    __slots__ = ("branch_index", "id", "turn_boundary", "cut_point", "tokens", "user")

    def __init__(
        self, branch_index: int, eid: Any, turn_boundary: bool, cut_point: bool, tokens: int, *, user: bool = False
    ) -> None:
        self.branch_index = branch_index
        self.id = eid
        self.turn_boundary = turn_boundary
        self.cut_point = cut_point
        self.tokens = tokens
        self.user = user  # a user message (what the overflow rule keeps verbatim)


def live_start(branch: Any, lc: int, ids: list[Any] | None = None) -> int:
    if lc < 0:
        return 0
    f = facts(branch)
    kept = f.compactions[lc][0]
    if isinstance(kept, str) and kept:
        i = f.index(kept)
        if i >= 0:
            return i
    return lc + 1


def entry_ids(branch: list[dict[str, Any]]) -> list[Any]:
    return [e.get("id") for e in branch]


def first_index(branch: Any, entry_id: Any, stop: int | None = None, ids: list[Any] | None = None) -> int:
    """JS `findIndex(e => e.id === entry_id)` over `branch[:stop]` (-1 when absent)."""
    return facts(branch).index(entry_id, stop)


def live_items(branch: Any, start: int, proj: Projection | None = None) -> list[LiveItem]:
    f = proj.facts if proj is not None else facts(branch)
    items: list[LiveItem] = []
    kinds = f.kinds
    tokens = f.tokens
    ident = f.id
    for i in range(start, len(kinds)):
        t, role, skip = kinds[i]
        if t is COMPACTION or skip or role is NOMSG:
            continue
        items.append(
            LiveItem(i, ident(i), role in TURN_BOUNDARY_ROLES, role != "toolResult", tokens[i], user=role == "user")
        )
    return items


class Spans:
    """Call/result spans over the whole branch, with an O(1) crossing test."""

    def __init__(self, branch: Any) -> None:
        f = facts(branch)
        # indices only grow, so the first sighting is `first` and the latest is `last`
        first: dict[str, int] = {}
        last: dict[str, int] = {}
        calls: set[str] = set()
        results: set[str] = set()
        for i in sorted(f.spans):
            call_ids, result = f.spans[i]
            for cid in call_ids:
                if cid not in first:
                    first[cid] = i
                last[cid] = i
                calls.add(cid)
            if result is not None:
                if result not in first:
                    first[result] = i
                last[result] = i
                results.add(result)
        self.closed = [
            (first[cid], last[cid]) for cid in first if cid in calls and cid in results and first[cid] < last[cid]
        ]
        n = len(f) + 2
        diff = [0] * n
        for lo, hi in self.closed:
            diff[lo + 1] += 1
            diff[hi + 1] -= 1
        self.crossing = list(accumulate(diff))  # (prefix sums)

    def safe(self, b: int) -> bool:
        return self.crossing[b] == 0

    def min_first_crossing(self, b: int) -> int | None:
        if self.crossing[b] == 0:
            return None
        return min(f for f, l in self.closed if f < b <= l)


def calibrate(
    branch: Any, tokens_before: float, raw_before: int, proj: Projection | None = None
) -> tuple[float, float]:
    if proj is None:
        proj = Projection(branch)
    f = proj.facts
    lc = f.last_compaction()
    raw = proj.context_tokens(lc + 1) if lc >= 0 else 0
    checkpoints: list[tuple[int, float]] = []
    kinds, toks, usage = f.kinds, proj.tokens, f.usage
    for i in range(lc + 1, len(kinds)):
        role = kinds[i][1]
        if role is NOMSG:
            continue
        raw += toks[i]
        if role == "assistant":
            ctx = usage[i][1]
            if math.isfinite(ctx) and ctx > 0:
                checkpoints.append((raw, ctx))
    kept = [(r, c) for r, c in checkpoints if r < raw_before and c <= tokens_before]
    minimum_delta = max(4096, math.floor(raw_before * 0.1))
    slopes: list[float] = []
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


def compute_cut(
    branch: Any,
    budget_input: dict[str, Any] | None = None,
    *,
    keep_question: bool = False,
    question_in_kept_range: bool = False,
) -> dict[str, Any]:
    """`{ok, firstKeptEntryId, summarized: [LiveItem], retainedRawTokens, budget?,
    questionKept?}`.

    `keep_question` (overflow recovery: Pi retries the request right after): the kept
    range always holds the latest user message verbatim (`keep_latest_question`).
    `question_in_kept_range`: that message may lie in the previous compaction's kept
    range (Pi 1.x, where an older compaction there adds nothing to the context)."""
    f = facts(branch)
    lc = f.last_compaction()
    start = live_start(f, lc)
    proj = Projection(f, min(start, lc) if lc >= 0 else 0)
    live = live_items(f, start, proj)
    if not live:
        return {"ok": False, "reason": "empty"}
    spans = Spans(f)
    res: dict[str, Any] | None = None
    if budget_input is not None:
        b = budget_input["budget"]
        window = b.get("contextWindow")
        if isinstance(window, (int, float)) and math.isfinite(window) and window > 0:
            res = _continuity_cut(f, live, spans, lc, tokens_before=budget_input["tokensBefore"], b=b, proj=proj)
    if res is None:
        res = _legacy_cut(live, spans, lc)
    if keep_question:
        res = keep_latest_question(res, live, spans, lc, in_kept_range=question_in_kept_range)
    return res


def keep_latest_question(
    res: dict[str, Any], live: list[LiveItem], spans: Spans, lc: int, *, in_kept_range: bool = False
) -> dict[str, Any]:
    """Move the cut back so the kept range starts at or before the latest user message
    of the live window (and no call/result pair is split): on overflow recovery the
    retried request must hold the user's question verbatim, never only inside the
    summary. Unchanged when the cut already keeps it, when there is no such message,
    when nothing of the live window lies before it (keeping it would summarize nothing,
    so only a cut inside its turn can shrink the context: the one case the question is
    summarized), or when no safe boundary at or before it exists (after the previous
    compaction unless `in_kept_range`)."""
    q = -1
    for i in range(len(live) - 1, -1, -1):
        if live[i].user:
            q = i
            break
    if q < 0:
        return res
    first_kept = res["firstKeptEntryId"]
    if first_kept:
        for i, it in enumerate(live):
            if it.id == first_kept:
                if i <= q:
                    return res  # the question is kept already
                break
    c = q
    while not spans.safe(live[c].branch_index):
        e = spans.min_first_crossing(live[c].branch_index)
        j = -1
        for k in range(c - 1, -1, -1):
            if live[k].branch_index <= e and live[k].turn_boundary:  # type: ignore[operator]
                j = k
                break
        if j < 0:
            return res
        c = j
    if c == 0 or (not in_kept_range and live[c].branch_index <= lc):
        return res  # (c == 0: nothing before the question to summarize: no recovery by keeping it)
    retained = sum(it.tokens for it in live[c:])
    out = dict(res, firstKeptEntryId=live[c].id, summarized=live[:c], retainedRawTokens=retained, questionKept=True)
    b = res.get("budget")
    if b is not None:
        b["retainedRawTokens"] = retained
    return out


def _continuity_cut(
    branch: Any,
    live: list[LiveItem],
    spans: Spans,
    lc: int,
    *,
    tokens_before: float,
    b: dict[str, Any],
    proj: Projection,
) -> dict[str, Any]:
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
    for name, v in (
        ("continuity", continuity),
        ("occupancy", occupancy),
        ("reserve", safe_ceiling),
        ("reduction", reduction),
    ):
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
    return {
        "ok": True,
        "firstKeptEntryId": first_kept,
        "summarized": summarized,
        "retainedRawTokens": retained,
        "budget": budget,
    }


def _legacy_cut(live: list[LiveItem], spans: Spans, lc: int) -> dict[str, Any]:
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
