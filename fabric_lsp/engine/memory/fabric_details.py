"""Strict readers for the Fabric payloads memory turns into child records:
`FabricExecutionTraceV1` on `fabric_exec` results (session-format §7.3) and the
branch-summary details envelopes v1 and v2 (compaction digest §11).

Both are all-or-nothing: anything outside the contract makes the payload absent, and
nothing is ever recovered from prose.
"""

from __future__ import annotations

import math
from typing import Any, Optional

from .jsvalues import js_stringify_bytes_len

OUTCOMES = frozenset({"succeeded", "failed", "aborted", "timed_out"})
FAILURE_STAGES = frozenset({"resolve", "prepare", "validate", "approve", "invoke", "guard"})
_MAX_SAFE = 2**53 - 1


def _safe_int(v: Any, minimum: int = 0) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return minimum <= v <= _MAX_SAFE
    if isinstance(v, float):
        return math.isfinite(v) and v.is_integer() and minimum <= v <= _MAX_SAFE
    return False


def _json_value(v: Any, depth: int, max_depth: int) -> bool:
    if depth > max_depth:
        return False
    if v is None or isinstance(v, (str, bool)):
        return True
    if isinstance(v, (int, float)):
        return not isinstance(v, float) or math.isfinite(v)
    if isinstance(v, list):
        return all(_json_value(x, depth + 1, max_depth) for x in v)
    if isinstance(v, dict):
        return all(isinstance(k, str) and _json_value(x, depth + 1, max_depth) for k, x in v.items())
    return False


_TRACE_KEYS = frozenset({"kind", "version", "outcome", "phases", "operations", "counts", "error"})
_COUNT_KEYS = frozenset({"droppedValues", "truncatedValues", "redactedValues", "droppedOperations"})
_OP_KEYS = frozenset(
    {"type", "sequence", "ref", "provider", "action", "args", "outcome", "failureStage", "error", "result"}
)


def split_ref(ref: str, provider: Any, action: Any) -> tuple[Optional[str], Optional[str], Optional[str]]:
    """(provider, action, tool) from explicit fields or a split of `ref` at its first dot."""
    if not isinstance(provider, str) or not isinstance(action, str):
        dot = ref.find(".")
        if 0 < dot < len(ref) - 1:
            provider = provider if isinstance(provider, str) else ref[:dot]
            action = action if isinstance(action, str) else ref[dot + 1 :]
    provider = provider if isinstance(provider, str) else None
    action = action if isinstance(action, str) else None
    if provider == "pi":
        tool = action
    else:
        tool = action if action is not None else ref
    return provider, action, tool


def read_execution_trace(details: Any) -> Optional[list[dict]]:
    """Operations of a valid `FabricExecutionTraceV1` under `details.trace`, else None.

    Memory ignores the legacy `audits` adapter (digest §2.4)."""
    if not isinstance(details, dict) or "trace" not in details:
        return None
    trace = details["trace"]
    try:
        if not isinstance(trace, dict) or not set(trace) <= _TRACE_KEYS:
            return None
        if trace.get("kind") != "pi-fabric.execution":
            return None
        version = trace.get("version")
        if isinstance(version, bool) or version != 1:
            return None
        if trace.get("outcome") not in OUTCOMES:
            return None
        phases = trace.get("phases")
        if not isinstance(phases, list) or not all(isinstance(p, str) for p in phases):
            return None
        counts = trace.get("counts")
        if not isinstance(counts, dict) or set(counts) != _COUNT_KEYS:
            return None
        if not all(_safe_int(counts[k]) for k in _COUNT_KEYS):
            return None
        if "error" in trace and not isinstance(trace["error"], str):
            return None
        ops = trace.get("operations")
        if not isinstance(ops, list):
            return None
        last_seq = -1
        for op in ops:
            if not isinstance(op, dict) or not set(op) <= _OP_KEYS:
                return None
            if op.get("type") != "call" or not _safe_int(op.get("sequence")):
                return None
            if op["sequence"] <= last_seq:
                return None
            last_seq = op["sequence"]
            if not isinstance(op.get("ref"), str):
                return None
            for key in ("provider", "action", "error"):
                if key in op and not isinstance(op[key], str):
                    return None
            if not isinstance(op.get("args"), dict):
                return None
            if op.get("outcome") not in OUTCOMES:
                return None
            if "failureStage" in op and op["failureStage"] not in FAILURE_STAGES:
                return None
        if not _json_value(trace, 0, 14):
            return None
        if js_stringify_bytes_len(trace) > 524288:
            return None
    except (RecursionError, TypeError, ValueError):
        return None
    return ops


# ---- branch-summary details -------------------------------------------------------------

_ENVELOPE_KEYS = frozenset({"kind", "version", "source", "facts", "omittedFacts", "sections", "request"})
_SOURCE_KEYS = frozenset({"firstEntryId", "lastEntryId", "entryCount", "oldLeafId"})
_REQUEST_KEYS = frozenset({"text", "sourceBytes", "truncated"})
_FACT_KEYS = {
    "user": frozenset({"text"}),
    "customMessage": frozenset({"customType", "text", "display", "details"}),
    "phase": frozenset({"phase"}),
    "operation": frozenset({"ref", "provider", "action", "tool", "args", "outcome", "error", "result"}),
    "fabricRun": frozenset({"name", "description", "outcome"}),
}
_COMMON_FACT_KEYS = frozenset({"kind", "entryId", "subordinal", "address"})


class _Budget:
    __slots__ = ("nodes",)

    def __init__(self) -> None:
        self.nodes = 0


def _bounded_json(v: Any, depth: int, budget: _Budget) -> bool:
    budget.nodes += 1
    if budget.nodes > 4096 or depth > 16:
        return False
    if v is None or isinstance(v, (str, bool)):
        return True
    if isinstance(v, (int, float)):
        return not isinstance(v, float) or math.isfinite(v)
    if isinstance(v, list):
        return len(v) <= 256 and all(_bounded_json(x, depth + 1, budget) for x in v)
    if isinstance(v, dict):
        return len(v) <= 256 and all(isinstance(k, str) and _bounded_json(x, depth + 1, budget) for k, x in v.items())
    return False


def _utf8_len(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


def _valid_fact(fact: Any, version: int) -> bool:
    if not isinstance(fact, dict):
        return False
    kind = fact.get("kind")
    allowed = _FACT_KEYS.get(kind)
    if allowed is None or (kind == "fabricRun" and version != 2):
        return False
    if not set(fact) <= (_COMMON_FACT_KEYS | allowed):
        return False
    entry_id, sub, address = fact.get("entryId"), fact.get("subordinal"), fact.get("address")
    if not (isinstance(entry_id, str) and isinstance(sub, str) and isinstance(address, str)):
        return False
    if address != entry_id + "/" + sub:
        return False
    if kind == "user":
        return isinstance(fact.get("text"), str)
    if kind == "customMessage":
        return (
            isinstance(fact.get("customType"), str)
            and isinstance(fact.get("text"), str)
            and isinstance(fact.get("display"), bool)
        )
    if kind == "phase":
        return isinstance(fact.get("phase"), str)
    if kind == "operation":
        for key in ("ref", "tool"):
            if not isinstance(fact.get(key), str):
                return False
        for key in ("provider", "action", "error"):
            if key in fact and not isinstance(fact[key], str):
                return False
        return isinstance(fact.get("args"), dict) and fact.get("outcome") in OUTCOMES
    # fabricRun
    name = fact.get("name")
    if not (sub.startswith("call:") and len(sub) > 5):
        return False
    if not isinstance(name, str) or not name.strip() or _utf8_len(name) > 256:
        return False
    if "description" in fact and (not isinstance(fact["description"], str) or _utf8_len(fact["description"]) > 1024):
        return False
    return fact.get("outcome") in OUTCOMES


def read_branch_details(details: Any) -> Optional[list[dict]]:
    """Facts of a valid branch-summary envelope (v2 first, then v1), else None."""
    try:
        if not isinstance(details, dict) or not set(details) <= _ENVELOPE_KEYS or set(details) != _ENVELOPE_KEYS:
            return None
        if details["kind"] != "pi-fabric.branch-summary":
            return None
        version = details["version"]
        if isinstance(version, bool) or version not in (1, 2):
            return None
        version = int(version)
        source = details["source"]
        if not isinstance(source, dict) or not set(source) <= _SOURCE_KEYS:
            return None
        if not isinstance(source.get("firstEntryId"), str) or not isinstance(source.get("lastEntryId"), str):
            return None
        if not _safe_int(source.get("entryCount")):
            return None
        if "oldLeafId" in source and not (source["oldLeafId"] is None or isinstance(source["oldLeafId"], str)):
            return None
        facts = details["facts"]
        if not isinstance(facts, list) or len(facts) > 256:
            return None
        if not _safe_int(details["omittedFacts"]):
            return None
        sections = details["sections"]
        if not isinstance(sections, list) or len(sections) > 64 or not all(isinstance(s, str) for s in sections):
            return None
        request = details["request"]
        if not isinstance(request, dict) or not set(request) <= _REQUEST_KEYS:
            return None
        if "text" in request and not isinstance(request["text"], str):
            return None
        if "sourceBytes" in request and not _safe_int(request["sourceBytes"]):
            return None
        if "truncated" in request and not isinstance(request["truncated"], bool):
            return None
        if not all(_valid_fact(f, version) for f in facts):
            return None
        if not _bounded_json(details, 0, _Budget()):
            return None
        if js_stringify_bytes_len(details) > 131072:
            return None
    except (RecursionError, TypeError, ValueError, KeyError):
        return None
    return facts
