"""Compaction details v2 (digest §10) and the strict v1/v2 recognizers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..jsstr import is_finite_number

POLICY_MODES = frozenset(("none", "plain", "typed-v1", "malformed-typed-prefix"))
BINDINGS = frozenset(("continuity", "occupancy", "reserve", "reduction"))
BASE_BUDGET_NUMBERS = (
    "contextWindow",
    "targetContextRatio",
    "targetContextTokens",
    "reserveTokens",
    "keepRecentTokens",
    "rawTokensBefore",
    "tokenScale",
    "fixedOverheadTokens",
    "retainedRawTokens",
    "projectedTokensAfter",
)
CONTINUITY_NUMBERS = (
    "continuityTargetTokens",
    "occupancyCeilingTokens",
    "safeCeilingTokens",
    "reductionCeilingTokens",
    "rawTailTokenBudget",
)


def _is_obj(v: Any) -> bool:
    return isinstance(v, dict)


def _range_ok(v: Any) -> bool:
    return _is_obj(v) and isinstance(v.get("first"), str) and isinstance(v.get("last"), str)


def _nums(obj: Any, keys: Iterable[str], optional: Iterable[str] = ()) -> bool:
    if not _is_obj(obj):
        return False
    for k in keys:
        if not is_finite_number(obj.get(k)):
            return False
    for k in optional:
        if k in obj and not is_finite_number(obj[k]):
            return False
    return True


def is_fabric_v1(d: Any) -> bool:
    return (
        _is_obj(d)
        and d.get("compactor") == "fabric"
        and d.get("version") == 1
        and not isinstance(d.get("version"), bool)
        and isinstance(d.get("sections"), list)
        and all(isinstance(s, str) for s in d["sections"])
        and _range_ok(d.get("summarizedEntryRange"))
        and is_finite_number(d.get("sourceEntryCount"))
        and isinstance(d.get("firstKeptEntryId"), str)
        and isinstance(d.get("timestamp"), str)
    )


def is_fabric_v2(d: Any) -> bool:
    if not _is_obj(d) or d.get("compactor") != "fabric" or isinstance(d.get("version"), bool) or d.get("version") != 2:
        return False
    if not isinstance(d.get("sections"), list) or not all(isinstance(s, str) for s in d["sections"]):
        return False
    cov = d.get("coverage")
    if not _is_obj(cov) or not _range_ok(cov.get("cumulativeSourceRange")) or not _range_ok(cov.get("liveCutRange")):
        return False
    if not _nums(
        d.get("counts"),
        (
            "branchEntries",
            "cumulativeSourceEntries",
            "sourceEvents",
            "liveCutEntries",
            "priorFabricV1",
            "priorFabricV2",
        ),
    ):
        return False
    if not _nums(
        d.get("omittedCounts"),
        ("goal", "files", "outstanding", "earlierTurns", "transcript", "preserve"),
        ("activity", "commits", "thinking"),
    ):
        return False
    pol = d.get("instructionPolicy")
    if not _is_obj(pol) or pol.get("mode") not in POLICY_MODES:
        return False
    if not isinstance(pol.get("canonicalized"), bool) or not isinstance(pol.get("truncated"), bool):
        return False
    if not _nums(pol, ("sourceBytes", "preserveCount", "omittedPreserveCount")):
        return False
    sa = d.get("stableAddresses")
    if (
        not _is_obj(sa)
        or not isinstance(sa.get("firstKeptEntryId"), str)
        or not _range_ok(sa.get("cumulativeSourceRange"))
    ):
        return False
    if "recall" in sa and not isinstance(sa["recall"], str):
        return False
    if "budget" in d:
        b = d["budget"]
        if not _is_obj(b):
            return False
        strategy = b.get("strategy")
        if strategy == "adaptive":
            if not _nums(b, BASE_BUDGET_NUMBERS):
                return False
        elif strategy == "continuity":
            if not _nums(b, BASE_BUDGET_NUMBERS + CONTINUITY_NUMBERS) or b.get("bindingConstraint") not in BINDINGS:
                return False
        else:
            return False
    if not isinstance(d.get("timestamp"), str):
        return False
    return True


def js_num_value(x: Any) -> Any:
    """Integral floats become ints so any JSON encoder prints them as JavaScript does."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 2**53:
        return int(x)
    return x


def build_details(
    *,
    sections: list[str],
    source_range: dict[str, Any],
    live_range: dict[str, Any],
    counts: dict[str, Any],
    omitted_counts: dict[str, Any],
    policy: dict[str, Any],
    first_kept: str,
    budget: Any,
    timestamp: Any,
) -> dict[str, Any]:
    d: dict[str, Any] = {
        "compactor": "fabric",
        "version": 2,
        "sections": sections,
        "coverage": {"cumulativeSourceRange": dict(source_range), "liveCutRange": live_range},
        "counts": counts,
        "omittedCounts": omitted_counts,
        "instructionPolicy": dict(policy),
        "stableAddresses": {
            "firstKeptEntryId": first_kept,
            "cumulativeSourceRange": dict(source_range),
            "recall": "session-entry-id-range",
        },
    }
    if budget is not None:
        d["budget"] = {k: js_num_value(v) for k, v in budget.items()}
    if timestamp is not None:
        d["timestamp"] = timestamp
    return d
