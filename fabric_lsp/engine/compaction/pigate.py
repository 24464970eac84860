"""Pi's own compaction gate (pi-host §6-7): whether Pi would call the
`session_before_compact` hook at all, and the `tokensBefore` it passes.

Pi's `prepareCompaction` returns nothing (so no hook runs) when the last path entry is
already a compaction ("Already compacted") or when its cut leaves nothing to summarize
("Nothing to compact (session too small)"): the walk back from the leaf never reaches
`keepRecentTokens`, so the cut lands on the first valid cut point and the span before
it holds no message.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .facts import COMPACTION, MESSAGE, MODEL_CHANGE, NOMSG, facts

if TYPE_CHECKING:
    from ..json_types import JsonValue

ALREADY_COMPACTED = "Already compacted"
NOTHING_TO_COMPACT = "Nothing to compact (session too small)"
_CUT_ROLES = frozenset(("user", "assistant", "bashExecution", "custom", "branchSummary"))
_TURN_ROLES = frozenset(("user", "bashExecution", "custom", "branchSummary"))


def _message(entry: dict[str, Any]) -> dict[str, Any] | None:
    m: JsonValue = entry.get("message") if entry.get("type") == "message" else None
    return m if isinstance(m, dict) else None


def _role(kind: tuple[Any, ...]) -> Any:
    """The role of an entry's Pi context message from its kind (None for compaction
    entries and for entries that add nothing to the context, such as an empty branch
    summary)."""
    t, role, _ = kind
    if t is COMPACTION or role is NOMSG:
        return None
    return role


def _compaction_message(kind: tuple[Any, ...]) -> bool:
    """getMessageFromEntryForCompaction gives a message: every entry with a context
    message but compaction entries (message, custom_message, non-empty branch_summary)."""
    return kind[1] is not NOMSG and kind[0] is not COMPACTION


def find_cut_point(entries: Any, start: int, end: int, keep_recent_tokens: float) -> dict[str, Any]:
    """Pi's findCutPoint as observed on Pi 0.80.6 (see the oracle test):

    * cut points are entries whose context message is a user, assistant, bashExecution,
      custom or branchSummary message (never a tool result, never a compaction);
    * walking back from the leaf, every context message (the compaction's summary too)
      adds its estimate until `keepRecentTokens` is reached; the cut is the first cut
      point at or after that entry (the first cut point of the span when never reached);
    * the cut then moves back over entries that add no context message (metadata,
      labels, empty branch summaries), stopping at a compaction;
    * a cut at a turn start (user, bashExecution, custom, branchSummary) is not split;
      otherwise the turn starts at the last such entry before it.

    `entries` is a list of entry dicts or their `Facts`.
    """
    f = facts(entries)
    kinds = f.kinds
    tokens = f.tokens
    cut_points = [i for i in range(start, end) if _role(kinds[i]) in _CUT_ROLES]
    if not cut_points:
        return {"firstKeptEntryIndex": start, "turnStartIndex": -1, "isSplitTurn": False}
    accumulated = 0
    cut_index = cut_points[0]
    for i in range(end - 1, start - 1, -1):
        if kinds[i][1] is NOMSG:
            continue
        accumulated += tokens[i]
        if accumulated >= keep_recent_tokens:
            for c in cut_points:
                if c >= i:
                    cut_index = c
                    break
            break
    while cut_index > start:
        t, role, _ = kinds[cut_index - 1]
        if t is COMPACTION or role is not NOMSG:
            break
        cut_index -= 1
    cut_role = _role(kinds[cut_index]) if cut_index < len(kinds) else None
    if cut_role in _TURN_ROLES:
        return {"firstKeptEntryIndex": cut_index, "turnStartIndex": -1, "isSplitTurn": False}
    turn_start = -1
    for i in range(min(cut_index, end - 1), start - 1, -1):
        if _role(kinds[i]) in _TURN_ROLES:
            turn_start = i
            break
    return {"firstKeptEntryIndex": cut_index, "turnStartIndex": turn_start, "isSplitTurn": turn_start != -1}


def prepare_compaction(branch: Any, keep_recent_tokens: float = 20000) -> dict[str, Any]:
    """`{ok: False, reason}` when Pi would not compact, else
    `{ok: True, firstKeptEntryId, isSplitTurn, messagesToSummarize, turnPrefixMessages}`."""
    f = facts(branch)
    kinds = f.kinds
    n = len(kinds)
    if n and kinds[-1][0] is COMPACTION:
        return {"ok": False, "reason": ALREADY_COMPACTED}
    prev = f.last_compaction()
    start = 0
    if prev >= 0:
        start = prev + 1
        kept = f.compactions[prev][0]
        if isinstance(kept, str) and kept:
            i = f.index(kept, prev)
            if i >= 0:
                start = i
    end = n
    cut = find_cut_point(f, start, end, keep_recent_tokens)
    idx = cut["firstKeptEntryIndex"]
    if idx >= n or not f.id(idx):
        return {"ok": False, "reason": NOTHING_TO_COMPACT}
    history_end = cut["turnStartIndex"] if cut["isSplitTurn"] else idx
    to_summarize = sum(1 for i in range(start, history_end) if _compaction_message(kinds[i]))
    prefix = 0
    if cut["isSplitTurn"]:
        prefix = sum(1 for i in range(cut["turnStartIndex"], idx) if _compaction_message(kinds[i]))
    if to_summarize == 0 and prefix == 0:
        return {"ok": False, "reason": NOTHING_TO_COMPACT}
    return {
        "ok": True,
        "firstKeptEntryId": f.id(idx),
        "isSplitTurn": cut["isSplitTurn"],
        "messagesToSummarize": to_summarize,
        "turnPrefixMessages": prefix,
    }


def pi_tokens_before(branch: Any, ids: list[Any] | None = None) -> Any:
    """Pi's `tokensBefore`: estimateContextTokens over buildSessionContext(path) — the
    last valid assistant usage plus the estimates of the context messages after it
    (else the sum of all estimates), computed backwards without building the context."""
    f = facts(branch)
    kinds, tokens, usage = f.kinds, f.tokens, f.usage
    n = len(kinds)
    lc = f.last_compaction()
    if lc < 0:
        order: Iterable[int] = range(n - 1, -1, -1)
    else:
        kept_from = f.index(f.compactions[lc][0], lc)
        if kept_from < 0:
            kept_from = lc
        order = [*range(n - 1, lc, -1), *range(lc - 1, kept_from - 1, -1), lc]
    tail = 0
    for i in order:
        role = kinds[i][1]
        if role is NOMSG:
            continue
        if role == "assistant":
            base = usage[i][0]
            if base is not None and base > 0:
                total = base + tail
                return int(total) if float(total).is_integer() else total
        tail += tokens[i]
    return tail


def model_key(branch: Any) -> str | None:
    """`provider/modelId` of the active model: the last model_change on the path, or the
    provider/model of the last assistant message (whichever comes last)."""
    f = facts(branch)
    kinds = f.kinds
    for i in range(len(kinds) - 1, -1, -1):
        t, role, _ = kinds[i]
        if t is MODEL_CHANGE:
            e = f.entry(i)
            p, m = e.get("provider"), e.get("modelId")
            if isinstance(p, str) and isinstance(m, str):
                return f"{p}/{m}"
        elif t is MESSAGE and role == "assistant":
            msg = _message(f.entry(i))
            if msg is not None and msg.get("role") == "assistant":
                p, m = msg.get("provider"), msg.get("model")
                if isinstance(p, str) and isinstance(m, str):
                    return f"{p}/{m}"
    return None
