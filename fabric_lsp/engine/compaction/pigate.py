"""Pi's own compaction gate (pi-host §6-7): whether Pi would call the
`session_before_compact` hook at all, and the `tokensBefore` it passes.

Pi's `prepareCompaction` returns nothing (so no hook runs) when the last path entry is
already a compaction ("Already compacted") or when its cut leaves nothing to summarize
("Nothing to compact (session too small)"): the walk back from the leaf never reaches
`keepRecentTokens`, so the cut lands on the first valid cut point and the span before
it holds no message.
"""

from __future__ import annotations

from typing import Any, Optional

from fabric_lsp.engine.session.context import entry_to_message
from fabric_lsp.engine.session.tokens import calculate_context_tokens

from .cut import first_index
from .estimate import estimate_tokens

ALREADY_COMPACTED = "Already compacted"
NOTHING_TO_COMPACT = "Nothing to compact (session too small)"
_CUT_ROLES = frozenset(("user", "assistant", "bashExecution", "custom", "branchSummary"))
_TURN_ROLES = frozenset(("user", "bashExecution", "custom", "branchSummary"))


def _message(entry: dict) -> Optional[dict]:
    m = entry.get("message") if entry.get("type") == "message" else None
    return m if isinstance(m, dict) else None


def _role(entry: dict) -> Optional[str]:
    """The role of an entry's Pi context message (None for compaction entries and for
    entries that add nothing to the context, such as an empty branch summary)."""
    if entry.get("type") == "compaction":
        return None
    m = entry_to_message(entry)
    return m.get("role") if m is not None else None


def _compaction_message(entry: dict) -> Optional[dict]:
    """getMessageFromEntryForCompaction: the context message an entry contributes to a
    summary (compaction entries contribute none)."""
    t = entry.get("type")
    if t == "message":
        return _message(entry)
    if t == "custom_message":
        return {"role": "custom"}
    if t == "branch_summary":
        return {"role": "branchSummary"} if entry.get("summary") else None
    return None


def find_cut_point(entries: list[dict], start: int, end: int, keep_recent_tokens: float) -> dict[str, Any]:
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
    """
    roles = [_role(entries[i]) for i in range(start, end)]
    cut_points = [start + k for k, r in enumerate(roles) if r in _CUT_ROLES]
    if not cut_points:
        return {"firstKeptEntryIndex": start, "turnStartIndex": -1, "isSplitTurn": False}
    accumulated = 0
    cut_index = cut_points[0]
    for i in range(end - 1, start - 1, -1):
        m = entry_to_message(entries[i])
        if m is None:
            continue
        accumulated += estimate_tokens(m)
        if accumulated >= keep_recent_tokens:
            for c in cut_points:
                if c >= i:
                    cut_index = c
                    break
            break
    while cut_index > start:
        prev = entries[cut_index - 1]
        if prev.get("type") == "compaction" or entry_to_message(prev) is not None:
            break
        cut_index -= 1
    cut_role = _role(entries[cut_index]) if cut_index < len(entries) else None
    if cut_role in _TURN_ROLES:
        return {"firstKeptEntryIndex": cut_index, "turnStartIndex": -1, "isSplitTurn": False}
    turn_start = -1
    for i in range(min(cut_index, end - 1), start - 1, -1):
        if _role(entries[i]) in _TURN_ROLES:
            turn_start = i
            break
    return {"firstKeptEntryIndex": cut_index, "turnStartIndex": turn_start, "isSplitTurn": turn_start != -1}


def prepare_compaction(branch: list[dict], keep_recent_tokens: float = 20000) -> dict[str, Any]:
    """`{ok: False, reason}` when Pi would not compact, else
    `{ok: True, firstKeptEntryId, isSplitTurn, messagesToSummarize, turnPrefixMessages}`."""
    if branch and branch[-1].get("type") == "compaction":
        return {"ok": False, "reason": ALREADY_COMPACTED}
    prev = -1
    for i in range(len(branch) - 1, -1, -1):
        if branch[i].get("type") == "compaction":
            prev = i
            break
    start = 0
    if prev >= 0:
        start = prev + 1
        kept = branch[prev].get("firstKeptEntryId")
        if isinstance(kept, str) and kept:
            i = first_index(branch, kept, prev)
            if i >= 0:
                start = i
    end = len(branch)
    cut = find_cut_point(branch, start, end, keep_recent_tokens)
    idx = cut["firstKeptEntryIndex"]
    if idx >= len(branch) or not branch[idx].get("id"):
        return {"ok": False, "reason": NOTHING_TO_COMPACT}
    history_end = cut["turnStartIndex"] if cut["isSplitTurn"] else idx
    to_summarize = sum(1 for i in range(start, history_end) if _compaction_message(branch[i]) is not None)
    prefix = 0
    if cut["isSplitTurn"]:
        prefix = sum(1 for i in range(cut["turnStartIndex"], idx) if _compaction_message(branch[i]) is not None)
    if to_summarize == 0 and prefix == 0:
        return {"ok": False, "reason": NOTHING_TO_COMPACT}
    return {
        "ok": True,
        "firstKeptEntryId": branch[idx].get("id"),
        "isSplitTurn": cut["isSplitTurn"],
        "messagesToSummarize": to_summarize,
        "turnPrefixMessages": prefix,
    }


def pi_tokens_before(branch: list[dict], ids: Optional[list] = None) -> Any:
    """Pi's `tokensBefore`: estimateContextTokens over buildSessionContext(path) — the
    last valid assistant usage plus the estimates of the context messages after it
    (else the sum of all estimates), computed backwards without building the context."""
    lc = -1
    for i in range(len(branch) - 1, -1, -1):
        if branch[i].get("type") == "compaction":
            lc = i
            break
    if lc < 0:
        order: Any = range(len(branch) - 1, -1, -1)
    else:
        kept_from = first_index(branch, branch[lc].get("firstKeptEntryId"), lc, ids=ids)
        if kept_from < 0:
            kept_from = lc
        order = [*range(len(branch) - 1, lc, -1), *range(lc - 1, kept_from - 1, -1), lc]
    tail = 0
    for i in order:
        msg = entry_to_message(branch[i])
        if msg is None:
            continue
        if (
            msg.get("role") == "assistant"
            and msg.get("stopReason") not in ("error", "aborted")
            and isinstance(msg.get("usage"), dict)
        ):
            base = calculate_context_tokens(msg["usage"])
            if base > 0:
                total = base + tail
                return int(total) if float(total).is_integer() else total
        tail += estimate_tokens(msg)
    return tail


def model_key(branch: list[dict]) -> Optional[str]:
    """`provider/modelId` of the active model: the last model_change on the path, or the
    provider/model of the last assistant message (whichever comes last)."""
    for e in reversed(branch):
        if e.get("type") == "model_change":
            p, m = e.get("provider"), e.get("modelId")
            if isinstance(p, str) and isinstance(m, str):
                return f"{p}/{m}"
        msg = _message(e)
        if msg is not None and msg.get("role") == "assistant":
            p, m = msg.get("provider"), msg.get("model")
            if isinstance(p, str) and isinstance(m, str):
                return f"{p}/{m}"
    return None
