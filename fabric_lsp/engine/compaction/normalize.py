"""Normalization (digest §2): raw session entry dicts -> a flat list of typed events.

Events are plain dicts with `type`, `index` (1-based), `entryId` (fact address) and
`sourceEntryId` (carrier entry). Only structure is read; prose is never interpreted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

from ..fabric_payloads import MISSING, read_branch_details, read_execution_trace
from ..jsstr import first_line, is_finite_number, js_number, js_stringify, js_trim, truncate, utf16_sort_key
from ..native import NATIVE
from ..session.content import content_text
from .bounds import clip_utf8, utf8_bytes
from .loader import ToolOutput

if TYPE_CHECKING:
    from ..json_types import JsonValue

    Emit = Callable[[dict[str, Any]], None]
    BranchReader = Callable[[JsonValue], dict[str, Any] | None]


class _Reject(Exception):
    pass


def read_fabric_trace(details: JsonValue) -> dict[str, Any] | None:
    """The projection trace of a fabric_exec result: the one Fabric trace reader, with the
    legacy `audits` adapter that the compactor (unlike memory) reads."""
    return read_execution_trace(details, legacy_audits=True)


_MISSING = MISSING  # absent `result` / rejected custom details
# `Normalizer.feed` of the common messages in C (None: not built, or FABRIC_LSP_NATIVE=0)
_feed_message: Any = getattr(NATIVE, "feed_message", None)


# ----------------------------------------------------------------- run display


def _display_from_object(obj: dict[str, Any]) -> dict[str, Any] | None:
    name = obj.get("name")
    desc = obj.get("description")
    out: dict[str, Any] = {}
    if isinstance(name, str):
        out["name"] = name
    if isinstance(desc, str):
        out["description"] = desc
    return out or None


def repair_display(display: JsonValue) -> dict[str, Any] | None:
    """Lenient `fabric_exec` display repair (session-format §7.1)."""
    if isinstance(display, str):
        t = js_trim(display)
        if not t:
            return None
        if t.startswith("{") and t.endswith("}"):
            parsed: JsonValue
            try:
                import json

                parsed = json.loads(t)
            except Exception:
                parsed = None
            if isinstance(parsed, dict):
                d = _display_from_object(parsed)
                if d:
                    return d
        return {"name": display}
    if isinstance(display, dict):
        return _display_from_object(display)
    return None


def run_intent(args: JsonValue) -> dict[str, Any] | None:
    if not isinstance(args, dict):
        return None
    d = repair_display(args.get("display"))
    if not d or "name" not in d:
        return None
    name = clip_utf8(js_trim(d["name"]), 256)
    if not name:
        return None
    out = {"name": name}
    if "description" in d:
        desc = clip_utf8(js_trim(d["description"]), 1024)
        if desc:
            out["description"] = desc
    return out


# ------------------------------------------------------------- custom messages


def typed_custom_message(entry: dict[str, Any]) -> bool:
    if not isinstance(entry.get("customType"), str) or not isinstance(entry.get("display"), bool):
        return False
    content: JsonValue = entry.get("content")
    if isinstance(content, str):
        return True
    if not isinstance(content, list):
        return False
    for part in content:
        if not isinstance(part, dict):
            return False
        t = part.get("type")
        if t == "text":
            if not isinstance(part.get("text"), str):
                return False
        elif t != "image":
            return False
    return True


def sanitize_custom_details(value: Any) -> Any:
    """Bounded copy of custom_message details, or _MISSING when rejected."""
    counter = [0]

    # (any Python value is checked, so a container's members are objects of any type)
    def walk(v: object, depth: int) -> Any:
        counter[0] += 1
        if counter[0] > 256:
            raise _Reject()
        if v is None or isinstance(v, bool):
            return v
        if isinstance(v, str):
            return clip_utf8(v, 1024)
        if isinstance(v, (int, float)):
            if not is_finite_number(v):
                raise _Reject()
            return v
        if isinstance(v, list):
            if depth > 12:
                raise _Reject()
            return [walk(x, depth + 1) for x in cast("list[object]", v)[:64]]
        if isinstance(v, dict):
            if depth > 12:
                raise _Reject()
            members = cast("dict[str, object]", v)
            keys = sorted(members.keys(), key=utf16_sort_key)[:64]
            return {k: walk(members[k], depth + 1) for k in keys}
        raise _Reject()

    try:
        out = walk(value, 0)
    except (_Reject, RecursionError):
        return _MISSING
    if utf8_bytes(js_stringify(out)) > 8192:
        return _MISSING
    return out


def event_text(ev: dict[str, Any]) -> str:
    """The text of an event (joined on first use for successful tool results)."""
    t = ev.get("text")
    if t is None:
        t = content_text(ev.get("_content"))
        ev["text"] = t
    return t


def transcript_text(ev: dict[str, Any]) -> str:
    """`truncate(firstLine(text), 100)` of a tool result (precomputed by the loader)."""
    line = ev.get("_line")
    if line is not None:
        return line
    return truncate(first_line(event_text(ev)), 100)


def count_erased_thinking_blocks(entries: Iterable[JsonValue]) -> int:
    n = 0
    m: JsonValue
    content: JsonValue
    for e in entries:
        if not isinstance(e, dict) or e.get("type") != "message":
            continue
        m = e.get("message")
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        content = m.get("content")
        if not isinstance(content, list):
            continue
        for p in content:
            if isinstance(p, dict) and p.get("type") == "thinking" and isinstance(p.get("thinking"), str):
                n += 1
    return n


# ------------------------------------------------------------------- normalize


class Normalizer:
    """Normalization one entry at a time, in branch order (`feed`): `events` receives each
    entry's events (contiguous, in order; `normalize` assigns `index`), `thinking` counts
    the erased thinking blocks seen, and `calls` maps a tool-call id to the latest
    toolCall event fed (what a later tool result pairs with)."""

    __slots__ = ("events", "calls", "thinking", "branch_reader")

    def __init__(self, branch_reader: BranchReader | None = None, calls: dict[str, Any] | None = None) -> None:
        if branch_reader is None:
            branch_reader = read_branch_details
        self.events: list[dict[str, Any]] = []
        self.calls: dict[str, Any] = {} if calls is None else calls
        self.thinking = 0
        self.branch_reader = branch_reader

    def feed(self, entry: JsonValue) -> None:
        if not isinstance(entry, dict):
            return
        emit = self.events.append
        etype = entry.get("type")
        eid = entry.get("id")
        if etype == "message":
            msg: JsonValue = entry.get("message")
            if not isinstance(msg, dict):
                return
            if _feed_message is not None:  # the common roles in C (test_native_feed.py)
                seen = _feed_message(msg, eid, self.calls, self.events, ToolOutput)
                if seen is not None:
                    self.thinking += seen
                    return
            role = msg.get("role")
            if role == "assistant":
                content: JsonValue = msg.get("content")
                if not isinstance(content, list):
                    return
                for part in content:
                    if not isinstance(part, dict):
                        continue
                    pt = part.get("type")
                    if pt == "text":
                        if isinstance(part.get("text"), str):
                            emit({"type": "assistantText", "entryId": eid, "sourceEntryId": eid, "text": part["text"]})
                    elif pt == "toolCall":
                        cid = part.get("id")
                        name = part.get("name")
                        if isinstance(cid, str) and isinstance(name, str):
                            args = part.get("arguments")
                            if args is None:
                                args = {}
                            ev: dict[str, Any] = {
                                "type": "toolCall",
                                "entryId": eid,
                                "sourceEntryId": eid,
                                "toolCallId": cid,
                                "name": name,
                                "args": args,
                            }
                            self.calls[cid] = ev  # has entryId, name and args
                            emit(ev)
                    elif pt == "thinking":
                        if isinstance(part.get("thinking"), str):
                            self.thinking += 1
            elif role == "toolResult":
                _tool_result(entry, msg, eid, self.calls, emit)
            elif role == "user":
                emit({"type": "user", "entryId": eid, "sourceEntryId": eid, "text": content_text(msg.get("content"))})
            elif role == "bashExecution":
                code = msg.get("exitCode")
                exit_code = code if is_finite_number(code) or (isinstance(code, float) and math.isnan(code)) else None
                if isinstance(code, bool):
                    exit_code = None
                is_error = exit_code is not None and exit_code != 0
                command = msg.get("command")
                ev = {
                    "type": "bash",
                    "entryId": eid,
                    "sourceEntryId": eid,
                    "toolCallId": "",
                    "command": command if isinstance(command, str) else "",
                    "isError": is_error,
                    "exitCode": exit_code,
                }
                out = msg.get("output")
                if is_error and isinstance(out, str) and out:
                    ev["error"] = out
                emit(ev)
        elif etype == "custom_message":
            try:
                if not typed_custom_message(entry):
                    return
                ev = {
                    "type": "customMessage",
                    "entryId": eid,
                    "sourceEntryId": eid,
                    "customType": entry["customType"],
                    "text": content_text(entry["content"]),
                    "display": entry["display"],
                }
                if "details" in entry:
                    d = sanitize_custom_details(entry["details"])
                    if d is not _MISSING:
                        ev["details"] = d
                emit(ev)
            except Exception:
                return
        elif etype == "branch_summary":
            env = self.branch_reader(entry.get("details"))
            if env is None:
                return
            for fact in env["facts"]:
                _emit_fact(fact, eid, emit)


def number_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Assign each event its 1-based `index`."""
    for i, ev in enumerate(events, 1):
        ev["index"] = i
    return events


def normalize(
    entries: Iterable[JsonValue],
    check: Callable[[], object] | None = None,
    branch_reader: BranchReader | None = None,
    stats: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Typed events for `entries` (any iterable of entry dicts) in order (digest §2).
    When `stats` is given, its "thinking" key receives
    `count_erased_thinking_blocks(entries)`."""
    nz = Normalizer(branch_reader)
    feed = nz.feed
    for n, entry in enumerate(entries):
        if check is not None and (n & 1023) == 0:
            check()
        feed(entry)
    if stats is not None:
        stats["thinking"] = nz.thinking
    return number_events(nz.events)


def _emit_fact(fact: dict[str, Any], carrier: Any, emit: Emit) -> None:
    kind = fact.get("kind")
    base = {"entryId": fact["entryId"], "sourceEntryId": carrier}
    if kind == "user":
        emit({"type": "user", **base, "text": fact["text"]})
    elif kind == "customMessage":
        ev = {
            "type": "customMessage",
            **base,
            "customType": fact["customType"],
            "text": fact["text"],
            "display": fact["display"],
        }
        if "details" in fact:
            ev["details"] = fact["details"]
        emit(ev)
    elif kind == "phase":
        emit(
            {
                "type": "fabricPhase",
                **base,
                "subordinal": fact["subordinal"],
                "address": fact["address"],
                "phase": fact["phase"],
            }
        )
    elif kind == "fabricRun":
        sub = fact["subordinal"]
        ev = {
            "type": "fabricRun",
            **base,
            "toolCallId": sub[5:] if sub.startswith("call:") else sub,
            "subordinal": sub,
            "address": fact["address"],
            "name": fact["name"],
            "outcome": fact["outcome"],
            "source": "branch",
        }
        if "description" in fact:
            ev["description"] = fact["description"]
        emit(ev)
    elif kind == "operation":
        ev = {
            "type": "fabricOperation",
            **base,
            "subordinal": fact["subordinal"],
            "address": fact["address"],
            "ref": fact["ref"],
            "tool": fact["tool"],
            "args": fact["args"],
            "outcome": fact["outcome"],
            "source": "branch",
        }
        for k in ("provider", "action", "error", "result"):
            if k in fact:
                ev[k] = fact[k]
        emit(ev)


def _tool_result(entry: dict[str, Any], msg: dict[str, Any], eid: Any, calls: dict[str, Any], emit: Emit) -> None:
    tcid = msg.get("toolCallId")
    tcid = tcid if isinstance(tcid, str) else ""
    tname = msg.get("toolName")
    tname = tname if isinstance(tname, str) else ""
    is_error = msg.get("isError") is True
    content: JsonValue | ToolOutput = msg.get("content")
    stub = content if type(content) is ToolOutput else None
    if not isinstance(content, list):
        content = None
    # the text of a successful result is only ever shown in the transcript window, so it
    # is joined lazily (see `event_text`)
    text = content_text(content) if (is_error and content is not None) else None
    pending = calls.get(tcid)
    if tname == "bash":
        cmd = ""
        if pending is not None and isinstance(pending["args"], dict):
            c = pending["args"].get("command")
            if isinstance(c, str):
                cmd = c
        ev = {
            "type": "bash",
            "entryId": eid,
            "sourceEntryId": eid,
            "toolCallId": tcid,
            "command": cmd,
            "isError": is_error,
            "exitCode": None,
        }
        if is_error and text:
            ev["error"] = text
        emit(ev)
    else:
        ev = {
            "type": "toolResult",
            "entryId": eid,
            "sourceEntryId": eid,
            "toolCallId": tcid,
            "toolName": tname,
            "isError": is_error,
            "text": text if text is not None else "",
        }
        if stub is not None:
            ev["text"] = None
            ev["_line"] = stub.line
        elif text is None and content is not None:
            ev["text"] = None
            ev["_content"] = content
        emit(ev)
    if tname != "fabric_exec":
        return
    nested = read_fabric_trace(msg.get("details"))
    intent = None
    if pending is not None and pending["name"] == "fabric_exec":
        intent = run_intent(pending["args"])
    if pending is not None and intent is not None:  # an intent is only read from a pending call
        outcome = (
            nested["outcome"]
            if nested is not None and nested["outcome"] is not None
            else ("failed" if is_error else "succeeded")
        )
        sub = "call:" + tcid
        ev = {
            "type": "fabricRun",
            "entryId": pending["entryId"],
            "sourceEntryId": eid,
            "toolCallId": tcid,
            "subordinal": sub,
            "address": f"{pending['entryId']}/{sub}",
            "name": intent["name"],
            "outcome": outcome,
            "source": nested["source"] if nested is not None else "result",
        }
        if "description" in intent:
            ev["description"] = intent["description"]
        emit(ev)
    if nested is None:
        return
    for i, phase in enumerate(nested["phases"]):
        emit(
            {
                "type": "fabricPhase",
                "entryId": eid,
                "sourceEntryId": eid,
                "subordinal": f"phase:{i}",
                "address": f"{eid}/phase:{i}",
                "phase": phase,
            }
        )
    for op in nested["operations"]:
        sub = js_number(op["sequence"])
        ev = {
            "type": "fabricOperation",
            "entryId": eid,
            "sourceEntryId": eid,
            "subordinal": sub,
            "address": f"{eid}/{sub}",
            "ref": op["ref"],
            "tool": op["tool"],
            "args": op["args"],
            "outcome": op["outcome"],
            "source": nested["source"],
        }
        if op["provider"] is not None:
            ev["provider"] = op["provider"]
        if op["action"] is not None:
            ev["action"] = op["action"]
        if op["error"] is not None:
            ev["error"] = op["error"]
        if op["result"] is not _MISSING:
            ev["result"] = op["result"]
        emit(ev)
