"""THE reader of Fabric's typed payloads, for both engines (session-format §7.3,
compaction digest §11): `FabricExecutionTraceV1` on `fabric_exec` results, the legacy
`details.audits` adapter, branch-summary details envelopes v1/v2 and their facts, and
operation identity (provider / action / tool from a ref).

Every reader is all-or-nothing: anything outside the contract makes the payload absent,
any exception during validation counts as invalid, and nothing is recovered from prose.
The compactor and the memory engine call these same functions, so an operation the
preview lists is one recall and expand can find. The one place the reference's engines
really differ is a parameter: memory ignores the legacy audits
(`read_execution_trace(..., legacy_audits=False)`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from .jsstr import is_blank, is_finite_number, is_safe_int, js_stringify_utf8_len

if TYPE_CHECKING:
    from .json_types import JsonValue

OUTCOMES = ("succeeded", "failed", "aborted", "timed_out")
FAILURE_STAGES = ("resolve", "prepare", "validate", "approve", "invoke", "guard")

TRACE_KIND = "pi-fabric.execution"
TRACE_MAX_BYTES = 524288
TRACE_JSON_MAX_DEPTH = 14  # `args` and `result` of an operation, each counted from 0
LEGACY_ARGS_MAX_DEPTH = 16

BRANCH_KIND = "pi-fabric.branch-summary"
MAX_FACTS = 256
MAX_ENVELOPE_BYTES = 131072
MAX_NODES = 4096
MAX_DEPTH = 16
MAX_MEMBERS = 256
MAX_SECTIONS = 64


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:  # pragma: no cover
        return "<missing>"


MISSING: Any = _Missing()
"""An absent optional value (an operation without `result`), distinct from JSON null."""


# ----------------------------------------------------------------- JSON value checks


def is_json_value(value: object, max_depth: int, depth: int = 0) -> bool:
    """null, string, boolean, finite number, array or plain object, with no value deeper
    than `max_depth` (the value itself is at `depth`)."""
    if depth > max_depth:
        return False
    if value is None or isinstance(value, (str, bool)):
        return True
    if isinstance(value, (int, float)):
        return is_finite_number(value)
    # (any Python value is checked, so a container's members are objects of any type)
    if isinstance(value, list):
        return all(is_json_value(v, max_depth, depth + 1) for v in cast("list[object]", value))
    if isinstance(value, dict):
        return all(is_json_value(v, max_depth, depth + 1) for v in cast("dict[object, object]", value).values())
    return False


# ----------------------------------------------------------------- operation identity


def operation_identity(ref: str, provider: Any, action: Any) -> tuple[str | None, str | None, str | None]:
    """(provider, action, tool) of an operation. provider/action are the explicit string
    fields, else a lexical split of `ref` at its FIRST dot when the dot is neither first
    nor last (`mcp.github.search` -> `mcp`, `github.search`). `tool` is `action` when the
    provider is `pi` (None when a `pi` operation has no action), otherwise `action ?? ref`."""
    if not isinstance(provider, str) or not isinstance(action, str):
        i = ref.find(".")
        if 0 < i < len(ref) - 1:
            if not isinstance(provider, str):
                provider = ref[:i]
            if not isinstance(action, str):
                action = ref[i + 1 :]
    prov = provider if isinstance(provider, str) else None
    act = action if isinstance(action, str) else None
    if prov == "pi":
        return prov, act, act
    return prov, act, act if act is not None else ref


# ------------------------------------------------------------------ execution trace


_TRACE_KEYS = frozenset(("kind", "version", "outcome", "phases", "operations", "counts", "error"))
_COUNT_KEYS = ("droppedValues", "truncatedValues", "redactedValues", "droppedOperations")
_OP_KEYS = frozenset(
    ("type", "sequence", "ref", "provider", "action", "args", "outcome", "failureStage", "error", "result")
)


def valid_trace_v1(trace: JsonValue) -> bool:
    """The strict `FabricExecutionTraceV1` validator (session-format §7.3)."""
    if not isinstance(trace, dict):
        return False
    if any(k not in _TRACE_KEYS for k in trace):
        return False
    if trace.get("kind") != TRACE_KIND:
        return False
    version = trace.get("version")
    if isinstance(version, bool) or not isinstance(version, (int, float)) or version != 1:
        return False
    if trace.get("outcome") not in OUTCOMES:
        return False
    phases: JsonValue = trace.get("phases")
    if not isinstance(phases, list) or not all(isinstance(p, str) for p in phases):
        return False
    counts: JsonValue = trace.get("counts")
    if not isinstance(counts, dict) or any(k not in _COUNT_KEYS for k in counts):
        return False
    for k in _COUNT_KEYS:
        v = counts.get(k)
        if not is_safe_int(v) or v < 0:
            return False
    if "error" in trace and not isinstance(trace["error"], str):
        return False
    ops: JsonValue = trace.get("operations")
    if not isinstance(ops, list):
        return False
    prev = -1
    for op in ops:
        if not isinstance(op, dict) or any(k not in _OP_KEYS for k in op):
            return False
        if op.get("type") != "call":
            return False
        seq = op.get("sequence")
        if not is_safe_int(seq) or seq < 0 or seq <= prev:
            return False
        prev = seq
        if not isinstance(op.get("ref"), str):
            return False
        for k in ("provider", "action", "error"):
            if k in op and not isinstance(op[k], str):
                return False
        args: JsonValue = op.get("args")
        if not isinstance(args, dict) or not is_json_value(args, TRACE_JSON_MAX_DEPTH):
            return False
        if op.get("outcome") not in OUTCOMES:
            return False
        if "failureStage" in op and op["failureStage"] not in FAILURE_STAGES:
            return False
        if "result" in op and not is_json_value(op["result"], TRACE_JSON_MAX_DEPTH):
            return False
    return js_stringify_utf8_len(trace) <= TRACE_MAX_BYTES


def _operation(
    sequence: Any, ref: str, provider: Any, action: Any, *, args: dict[str, Any], outcome: str, error: Any, result: Any
) -> dict[str, Any]:
    prov, act, tool = operation_identity(ref, provider, action)
    return {
        "sequence": sequence,
        "ref": ref,
        "provider": prov,
        "action": act,
        "tool": tool,
        "args": args,
        "outcome": outcome,
        "error": error,
        "result": result,
    }


def read_execution_trace(details: JsonValue, *, legacy_audits: bool) -> dict[str, Any] | None:
    """The projection trace of a `fabric_exec` result's `details`:
    `{source: "trace"|"legacy", outcome (None for legacy), phases, operations}`, else None.

    Each operation is `{sequence, ref, provider, action, tool, args, outcome, error,
    result}` with None for an absent provider/action/tool/error and `MISSING` for an
    absent result. A `trace` key is validated strictly and never falls back to audits.
    Without one, the legacy `audits` adapter is read only when `legacy_audits` (the
    compactor reads it, memory does not: session-format §7.3)."""
    if not isinstance(details, dict):
        return None
    try:
        if "trace" in details:
            trace = details["trace"]
            if not valid_trace_v1(trace):
                return None
            ops = [
                _operation(
                    op["sequence"],
                    op["ref"],
                    op.get("provider"),
                    op.get("action"),
                    args=op["args"],
                    outcome=op["outcome"],
                    error=op.get("error"),
                    result=op["result"] if "result" in op else MISSING,
                )
                for op in trace["operations"]
            ]
            return {"source": "trace", "outcome": trace["outcome"], "phases": list(trace["phases"]), "operations": ops}
        if not legacy_audits:
            return None
        audits: JsonValue = details.get("audits")
        if not isinstance(audits, list):
            return None
        ops: list[dict[str, Any]] = []
        for i, rec in enumerate(audits):
            if not isinstance(rec, dict):
                return None
            ref = rec.get("ref")
            args: JsonValue = rec.get("args")
            success = rec.get("success")
            if not isinstance(ref, str) or not isinstance(args, dict) or not is_json_value(args, LEGACY_ARGS_MAX_DEPTH):
                return None
            if not isinstance(success, bool):
                return None
            if "error" in rec and not isinstance(rec["error"], str):
                return None
            ops.append(
                _operation(
                    i,
                    ref,
                    None,
                    None,
                    args=args,
                    outcome="succeeded" if success else "failed",
                    error=rec.get("error"),
                    result=MISSING,
                )
            )
        return {"source": "legacy", "outcome": None, "phases": [], "operations": ops}
    except Exception:  # any exception during validation counts as invalid
        return None


def trace_operation_addresses(entry_id: str, details: JsonValue) -> list[str]:
    """`{entryId}/{sequence}` of the operations memory indexes for a `fabric_exec` result
    (the addresses recall and expand use)."""
    from .jsstr import js_number

    nested = read_execution_trace(details, legacy_audits=False)
    if nested is None:
        return []
    return [f"{entry_id}/{js_number(op['sequence'])}" for op in nested["operations"]]


# ------------------------------------------------------------ branch-summary envelope


_ENVELOPE_KEYS = frozenset(("kind", "version", "source", "facts", "omittedFacts", "sections", "request"))
_SOURCE_KEYS = frozenset(("firstEntryId", "lastEntryId", "entryCount", "oldLeafId"))
_REQUEST_KEYS = frozenset(("text", "sourceBytes", "truncated"))
_BASE = ("kind", "entryId", "subordinal", "address")
FACT_KEYS = {
    "user": frozenset(_BASE + ("text",)),
    "customMessage": frozenset(_BASE + ("customType", "text", "display", "details")),
    "phase": frozenset(_BASE + ("phase",)),
    "operation": frozenset(_BASE + ("ref", "provider", "action", "tool", "args", "outcome", "error", "result")),
    "fabricRun": frozenset(_BASE + ("name", "description", "outcome")),
}


class _Bad(Exception):
    pass


def _check_json(value: object, counter: list[int], depth: int) -> None:
    counter[0] += 1
    if counter[0] > MAX_NODES or depth > MAX_DEPTH:
        raise _Bad()
    if value is None or isinstance(value, (str, bool)):
        return
    if isinstance(value, (int, float)):
        if not is_finite_number(value):
            raise _Bad()
        return
    # (any Python value is checked, so a container's members are objects of any type)
    if isinstance(value, list):
        items = cast("list[object]", value)
        if len(items) > MAX_MEMBERS:
            raise _Bad()
        for v in items:
            _check_json(v, counter, depth + 1)
        return
    if isinstance(value, dict):
        members = cast("dict[object, object]", value)
        if len(members) > MAX_MEMBERS:
            raise _Bad()
        for v in members.values():
            _check_json(v, counter, depth + 1)
        return
    raise _Bad()


def _utf8_len(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


def valid_fact(f: JsonValue, version: int) -> bool:
    """One typed branch fact of an envelope of `version` (fabricRun facts are v2 only)."""
    if not isinstance(f, dict):
        return False
    kind = f.get("kind")
    allowed = FACT_KEYS.get(kind) if isinstance(kind, str) else None
    if allowed is None or (kind == "fabricRun" and version < 2):
        return False
    if any(k not in allowed for k in f):
        return False
    eid, sub, addr = f.get("entryId"), f.get("subordinal"), f.get("address")
    if not (isinstance(eid, str) and isinstance(sub, str) and isinstance(addr, str)) or addr != f"{eid}/{sub}":
        return False
    if kind == "user":
        return isinstance(f.get("text"), str)
    if kind == "customMessage":
        return (
            isinstance(f.get("customType"), str)
            and isinstance(f.get("text"), str)
            and isinstance(f.get("display"), bool)
        )
    if kind == "phase":
        return isinstance(f.get("phase"), str)
    if kind == "operation":
        for k in ("provider", "action", "error"):
            if k in f and not isinstance(f[k], str):
                return False
        return (
            isinstance(f.get("ref"), str)
            and isinstance(f.get("tool"), str)
            and isinstance(f.get("args"), dict)
            and f.get("outcome") in OUTCOMES
        )
    # fabricRun
    name = f.get("name")
    if not sub.startswith("call:") or len(sub) <= 5:
        return False
    if not isinstance(name, str) or is_blank(name) or _utf8_len(name) > 256:
        return False
    if "description" in f and (not isinstance(f["description"], str) or _utf8_len(f["description"]) > 1024):
        return False
    return f.get("outcome") in OUTCOMES


def _read_envelope(details: JsonValue, version: int) -> dict[str, Any] | None:
    d = details
    src: JsonValue
    facts: JsonValue
    secs: JsonValue
    req: JsonValue
    if not isinstance(d, dict) or any(k not in _ENVELOPE_KEYS for k in d):
        return None
    if d.get("kind") != BRANCH_KIND or isinstance(d.get("version"), bool) or d.get("version") != version:
        return None
    src = d.get("source")
    if not isinstance(src, dict) or any(k not in _SOURCE_KEYS for k in src):
        return None
    if not isinstance(src.get("firstEntryId"), str) or not isinstance(src.get("lastEntryId"), str):
        return None
    if not is_safe_int(src.get("entryCount")) or src["entryCount"] < 0:
        return None
    if "oldLeafId" in src and not (src["oldLeafId"] is None or isinstance(src["oldLeafId"], str)):
        return None
    facts = d.get("facts")
    if not isinstance(facts, list) or len(facts) > MAX_FACTS:
        return None
    if not is_safe_int(d.get("omittedFacts")) or d["omittedFacts"] < 0:
        return None
    secs = d.get("sections")
    if not isinstance(secs, list) or len(secs) > MAX_SECTIONS or not all(isinstance(s, str) for s in secs):
        return None
    req = d.get("request")
    if not isinstance(req, dict) or any(k not in _REQUEST_KEYS for k in req):
        return None
    if (
        not isinstance(req.get("text"), str)
        or not is_finite_number(req.get("sourceBytes"))
        or not isinstance(req.get("truncated"), bool)
    ):
        return None
    try:
        _check_json(d, [0], 0)
    except (_Bad, RecursionError):
        return None
    if js_stringify_utf8_len(d) > MAX_ENVELOPE_BYTES:
        return None
    if not all(valid_fact(f, version) for f in facts):
        return None
    return d


def read_branch_details(details: JsonValue) -> dict[str, Any] | None:
    """The envelope itself when `details` is a valid v2 envelope, else a valid strict v1
    envelope, else None (a v1 envelope is never read as v2; its facts are `["facts"]`)."""
    try:
        return _read_envelope(details, 2) or _read_envelope(details, 1)
    except Exception:
        return None
