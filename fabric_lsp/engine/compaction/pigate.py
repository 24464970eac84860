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

from .estimate import context_tokens
from .estimate import estimate_tokens

ALREADY_COMPACTED = "Already compacted"
NOTHING_TO_COMPACT = "Nothing to compact (session too small)"
_CUT_ROLES = frozenset(("user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"))


def _message(entry: dict) -> Optional[dict]:
    m = entry.get("message") if entry.get("type") == "message" else None
    return m if isinstance(m, dict) else None


def _is_cut_point(entry: dict) -> bool:
    t = entry.get("type")
    if t in ("branch_summary", "custom_message"):
        return True
    m = _message(entry)
    return m is not None and m.get("role") in _CUT_ROLES


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
    cut_points = [i for i in range(start, end) if _is_cut_point(entries[i])]
    if not cut_points:
        return {"firstKeptEntryIndex": start, "turnStartIndex": -1, "isSplitTurn": False}
    accumulated = 0
    cut_index = cut_points[0]
    for i in range(end - 1, start - 1, -1):
        e = entries[i]
        if e.get("type") == "compaction":
            continue
        m = entry_to_message(e)
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
        if prev.get("type") in ("compaction", "message", "branch_summary", "custom_message"):
            break
        cut_index -= 1
    cut_entry = entries[cut_index] if cut_index < len(entries) else {}
    m = _message(cut_entry)
    is_user = m is not None and m.get("role") == "user"
    turn_start = -1
    if not is_user:
        for i in range(cut_index, start - 1, -1):
            e = entries[i]
            if e.get("type") in ("branch_summary", "custom_message"):
                turn_start = i
                break
            mm = _message(e)
            if mm is not None and mm.get("role") in ("user", "bashExecution"):
                turn_start = i
                break
    return {"firstKeptEntryIndex": cut_index, "turnStartIndex": turn_start, "isSplitTurn": (not is_user) and turn_start != -1}


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
            for i in range(prev):
                if branch[i].get("id") == kept:
                    start = i
                    break
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


def pi_tokens_before(branch: list[dict]) -> Any:
    """Pi's `tokensBefore`: estimateContextTokens over buildSessionContext(path)."""
    return context_tokens(branch)


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
