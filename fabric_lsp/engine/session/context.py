"""Pi's context view: what Pi sends to the model for a branch (spec pi-host §6).

Given the active path root→leaf as raw entry dicts, `build_context_messages` returns the
AgentMessages Pi 0.80.6's buildSessionContext would produce: the latest compaction as a
`compactionSummary`, the kept entries from `firstKeptEntryId` (none when that id is not
found before the compaction, which covers both retain-none conventions "" and the
compaction's own id), then every entry after it. Pi 1.x builds a different view (context
edits applied, system messages kept, older compactions silent): `projection.py`;
`context_messages(path, rules)` picks one of the two.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..json_types import JsonValue


def entry_to_message(entry: dict[str, Any]) -> dict[str, Any] | None:
    """Pi's sessionEntryToContextMessages for one entry (None when it adds nothing)."""
    etype = entry.get("type")
    if etype == "message":
        msg: JsonValue = entry.get("message")
        if not isinstance(msg, dict):
            return None
        if msg.get("content", []) is None:
            msg = dict(msg)
            msg["content"] = []
        return msg
    if etype == "custom_message":
        return {
            "role": "custom",
            "customType": entry.get("customType"),
            "content": entry.get("content"),
            "display": entry.get("display"),
            "details": entry.get("details"),
            "timestamp": entry.get("timestamp"),
        }
    if etype == "branch_summary":
        if not entry.get("summary"):
            return None
        return {
            "role": "branchSummary",
            "summary": entry.get("summary"),
            "fromId": entry.get("fromId"),
            "timestamp": entry.get("timestamp"),
        }
    if etype == "compaction":
        return compaction_message(entry)
    return None


def compaction_message(entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "compactionSummary",
        "summary": entry.get("summary"),
        "tokensBefore": entry.get("tokensBefore"),
        "timestamp": entry.get("timestamp"),
    }


def context_entries(path: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The path entries that make up the context, in order, with the latest compaction
    first when there is one (Pi's buildContextEntries)."""
    comp_idx = -1
    for i in range(len(path) - 1, -1, -1):
        if path[i].get("type") == "compaction":
            comp_idx = i
            break
    if comp_idx < 0:
        return list(path)
    comp = path[comp_idx]
    first_kept = comp.get("firstKeptEntryId")
    kept_from = comp_idx  # nothing before the compaction unless the id is found there
    for i in range(comp_idx):
        if path[i].get("id") == first_kept:
            kept_from = i
            break
    return [comp] + path[kept_from:comp_idx] + path[comp_idx + 1 :]


def build_context_messages(path: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pi's buildSessionContext(path).messages over raw entry dicts root→leaf."""
    out: list[dict[str, Any]] = []
    for entry in context_entries(path):
        msg = entry_to_message(entry)
        if msg is not None:
            out.append(msg)
    return out


def context_tokens(path: list[dict[str, Any]], rules: str = "0.80") -> Any:
    """`tokensBefore` as Pi computes it: 0.80.6's estimateContextTokens over the context
    view, or (rules "1.x") Pi 1.x's estimateProjectedContextTokens."""
    if rules == "1.x":
        from .projection import estimate_projected_context_tokens

        return estimate_projected_context_tokens(path)
    from .tokens import estimate_context_tokens

    return estimate_context_tokens(build_context_messages(path))


def context_messages(path: list[dict[str, Any]], rules: str = "0.80") -> list[dict[str, Any]]:
    """What Pi sends to the model for this branch under `rules` ("0.80" or "1.x")."""
    if rules == "1.x":
        from .projection import projected_messages

        return projected_messages(path)
    return build_context_messages(path)
