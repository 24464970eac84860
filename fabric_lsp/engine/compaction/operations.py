"""The operations of a compaction's events (digest §3): tool calls paired with their
results, and the small readers the projections share (quoted text, nullish fields, a
call's path). Below projections.py and qa.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..jsstr import (
    is_blank,
    js_quote,
    js_stringify,
    truncate,
)

if TYPE_CHECKING:
    from ..json_types import JsonValue

FILE_TOOLS = frozenset(("read", "edit", "write", "grep", "find", "ls"))


def quoted(text: str, max_units: int) -> str:
    return js_quote(truncate(text, max_units))


def nullish_get(obj: JsonValue, *keys: str) -> Any:
    """`obj.a ?? obj.b ?? ...` for a JSON value."""
    if not isinstance(obj, dict):
        return None
    for k in keys:
        v = obj.get(k)
        if v is not None:
            return v
    return None


def path_of(args: JsonValue) -> str | None:
    v = nullish_get(args, "path", "file", "dir")
    if isinstance(v, str) and not is_blank(v):
        return v
    return None


def custom_message_line(ev: dict[str, Any], max_units: int) -> str:
    vis = "visible" if ev["display"] else "hidden"
    suffix = ""
    if "details" in ev:
        suffix = " details=" + truncate(js_stringify(ev["details"]), 160)
    return f"custom {quoted(ev['customType'], 80)} ({vis}): {quoted(ev['text'], max_units)}{suffix}"


# --------------------------------------------------------------------- operations


class Op:
    __slots__ = (
        "index",
        "entryId",
        "address",
        "tool",
        "ref",
        "args",
        "outcome",
        "error",
        "result",
        "nested",
        "has_result",
        "is_file",
        "is_bash",
        "path",
    )

    def __init__(
        self,
        index: int,
        entry_id: Any,
        address: Any,
        tool: str | None,
        ref: str,
        *,
        args: JsonValue,
        outcome: str,
        error: str | None = None,
        result: JsonValue = None,
        nested: bool = False,
        has_result: bool = False,
    ) -> None:
        self.index = index
        self.entryId = entry_id
        self.address = address
        self.tool = tool
        self.ref = ref
        self.args = args
        self.outcome = outcome
        self.error = error
        self.result = result
        self.nested = nested
        self.has_result = has_result
        self.is_file = tool in FILE_TOOLS and (ref == tool or ref == "pi." + tool)
        self.is_bash = tool == "bash" and (ref == "bash" or ref == "pi.bash")
        self.path = path_of(args) if self.is_file else None


def collect_operations(events: list[dict[str, Any]]) -> list[Op]:
    calls: dict[str, dict[str, Any]] = {}
    for ev in events:
        if ev["type"] == "toolCall":
            calls[ev["toolCallId"]] = ev
    ops: list[Op] = []
    for ev in events:
        t = ev["type"]
        if t == "fabricOperation":
            ops.append(
                Op(
                    ev["index"],
                    ev["entryId"],
                    ev["address"],
                    ev["tool"],
                    ev["ref"],
                    args=ev["args"],
                    outcome=ev["outcome"],
                    error=ev.get("error"),
                    result=ev.get("result"),
                    nested=True,
                    has_result="result" in ev,
                )
            )
        elif t == "toolResult":
            call = calls.get(ev["toolCallId"])
            if call is None:
                continue
            err = ev["text"] if ev["isError"] and ev["text"] else None
            ops.append(
                Op(
                    ev["index"],
                    call["entryId"],
                    call["entryId"],
                    call["name"],
                    call["name"],
                    args=call["args"],
                    outcome="failed" if ev["isError"] else "succeeded",
                    error=err,
                )
            )
        elif t == "bash":
            ops.append(
                Op(
                    ev["index"],
                    ev["entryId"],
                    ev["entryId"],
                    "bash",
                    "bash",
                    args={"command": ev["command"]},
                    outcome="failed" if ev["isError"] else "succeeded",
                    error=ev.get("error"),
                )
            )
    return ops


def is_file_op(op: Op | dict[str, Any]) -> bool:
    if type(op) is Op:
        return op.is_file
    tool = op.tool if isinstance(op, Op) else op.get("tool")
    ref = op.ref if isinstance(op, Op) else op.get("ref")
    return tool in FILE_TOOLS and (ref == tool or ref == "pi." + tool)


def is_bash_op(op: Op | dict[str, Any]) -> bool:
    if type(op) is Op:
        return op.is_bash
    tool = op.tool if isinstance(op, Op) else op.get("tool")
    ref = op.ref if isinstance(op, Op) else op.get("ref")
    return tool == "bash" and ref in ("bash", "pi.bash")


def created_proof(op: Op) -> bool:
    if not op.has_result:
        return False
    r = op.result
    if not isinstance(r, dict):
        return False
    if r.get("created") is True:
        return True
    d: JsonValue = r.get("details")
    return isinstance(d, dict) and d.get("created") is True


# ---------------------------------------------------------------------------- goal
