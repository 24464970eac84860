"""Markdown preview of one Pi session entry (hover on a JSONL line or on an entry
reference). Pure functions over the raw entry dict, so the same preview renders for an
open buffer and for a file on disk. Invariant: the entry's own text is always inside a
code fence longer than any backtick run in it, so it cannot break the Markdown around it.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from .fabric_payloads import trace_operation_addresses
from .references import format_reference, is_valid_entry_id, is_valid_session_id

if TYPE_CHECKING:
    from .json_types import JsonValue

EXCERPT_CHARS = 600
_BACKTICKS = re.compile(r"`+")


def _js(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=False)


def _parts_text(content: JsonValue) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    out: list[str] = []
    part: JsonValue
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            out.append(part["text"])
        elif kind == "thinking" and isinstance(part.get("thinking"), str):
            out.append("(thinking) " + part["thinking"])
        elif kind == "toolCall":
            out.append(f"{part.get('name', '?')}({_js(part.get('arguments', {}))})")
        elif kind == "image":
            out.append("[image]")
    return "\n".join(out)


def entry_text(raw: dict[str, Any]) -> str:
    """The human-readable text of an entry (untruncated)."""
    kind = raw.get("type")
    if kind == "message" and isinstance(raw.get("message"), dict):
        msg = raw["message"]
        role = msg.get("role")
        if role == "bashExecution":
            text = f"$ {msg.get('command', '')}"
            if isinstance(msg.get("output"), str) and msg["output"]:
                text += "\n" + msg["output"]
            return text
        if role in ("compactionSummary", "branchSummary"):
            return str(msg.get("summary", ""))
        text = _parts_text(msg.get("content"))
        if isinstance(msg.get("errorMessage"), str) and msg["errorMessage"]:
            text += ("\n" if text else "") + "Error: " + msg["errorMessage"]
        return text
    if kind in ("compaction", "branch_summary"):
        return str(raw.get("summary", ""))
    if kind == "custom_message":
        return _parts_text(raw.get("content"))
    if kind == "model_change":
        return f"{raw.get('provider', '?')}/{raw.get('modelId', '?')}"
    if kind == "thinking_level_change":
        return str(raw.get("thinkingLevel", ""))
    if kind == "label":
        return str(raw.get("label", ""))
    if kind == "session_info":
        return str(raw.get("name", ""))
    if kind == "custom":
        return _js(raw.get("data"))
    return ""


def _fence(text: str) -> str:
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


_PLAIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,39}")


def _code(value: Any) -> str:
    s = str(value).replace("\n", " ")
    longest = max((len(m) for m in _BACKTICKS.findall(s)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{ticks}{pad}{s}{pad}{ticks}"


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> tuple[str, bool]:
    """At most `limit` code points; never splits a surrogate pair (Python str is code points)."""
    if len(text) <= limit:
        return text, False
    return text[:limit], True


def operation_addresses(raw: dict[str, Any]) -> list[str]:
    """`{entryId}/{sequence}` addresses of the Fabric operations an entry carries."""
    entry_id = raw.get("id")
    msg: JsonValue = raw.get("message")
    if not isinstance(entry_id, str) or not isinstance(msg, dict):
        return []
    if msg.get("role") != "toolResult" or msg.get("toolName") != "fabric_exec":
        return []
    # the one Fabric trace reader, as memory indexes it: the addresses recall and expand use
    return trace_operation_addresses(entry_id, msg.get("details"))


def render_header(raw: dict[str, Any], *, line: int) -> str:
    rows = [f"**Pi session** {_code(raw.get('id', '?'))}"]
    for key in ("version", "timestamp", "cwd", "parentSession"):
        if key in raw:
            rows.append(f"- {key}: {_code(raw[key])}")
    rows.append(f"- line: {line + 1}")
    return "\n".join(rows)


def render_entry(
    raw: dict[str, Any],
    *,
    session_id: str | None,
    line: int,
    session_file: str | None = None,
    context_edit: dict[str, Any] | None = None,
) -> str:
    """Markdown preview: kind/role, time, tool, reference, operation addresses, excerpt.
    `context_edit` (`{"editId", "state"}`, session/projection.py `context_edit_marks`):
    Pi 1.x hides or replaces this entry in the model context."""
    if raw.get("type") == "session":
        return render_header(raw, line=line)
    kind = raw.get("type", "?")
    raw_msg: JsonValue = raw.get("message")
    msg: dict[str, Any] = raw_msg if isinstance(raw_msg, dict) else {}
    role = msg.get("role")
    title = f"**Pi session entry** {_code(kind)}"
    if role:
        # the file's text: a plain word as it is, anything else as code (never Markdown of ours)
        title += f" · {role}" if isinstance(role, str) and _PLAIN_WORD.fullmatch(role) else f" · {_code(role)}"
    rows = [title]
    entry_id = raw.get("id")
    if isinstance(entry_id, str):
        parent = raw.get("parentId")
        rows.append(
            f"- id: {_code(entry_id)}" + (f" (parent {_code(parent)})" if isinstance(parent, str) else " (root)")
        )
    timestamp = raw.get("timestamp") or msg.get("timestamp")
    if timestamp is not None:
        rows.append(f"- time: {_code(timestamp)}")
    tool = msg.get("toolName")
    if isinstance(tool, str) and tool:
        rows.append(f"- tool: {_code(tool)}" + (" **(error)**" if msg.get("isError") is True else ""))
    if isinstance(msg.get("model"), str):
        rows.append(f"- model: {_code(msg.get('provider', '?'))}/{_code(msg['model'])}")
    if session_id and isinstance(entry_id, str) and is_valid_session_id(session_id) and is_valid_entry_id(entry_id):
        rows.append(f"- reference: {_code(format_reference(session_id, entry_id))}")
    addresses = operation_addresses(raw)
    if addresses:
        rows.append("- operation addresses: " + ", ".join(_code(a) for a in addresses))
    if (
        kind == "context_edit"
        and "replacement" in raw
        and (raw["replacement"] is None or isinstance(raw["replacement"], dict))
    ):
        what = "hides" if raw["replacement"] is None else "replaces the content of"
        rows.append(f"- context edit: {what} {_code(raw.get('targetId'))} in the model context (Pi 1.x)")
    if context_edit is not None:
        state = "hidden from" if context_edit.get("state") == "hidden" else "replaced in"
        rows.append(
            f"- context: **{state} the model context** by context edit {_code(context_edit.get('editId'))} (Pi 1.x); shown as written"
        )
    where = f"line {line + 1}"
    if session_file:
        where += f" of {_code(session_file)}"
    rows.append(f"- {where}")
    text, cut = excerpt(entry_text(raw))
    out = "\n".join(rows)
    if text:
        out += "\n\n" + _fence(text)
        if cut:
            out += "\n\n*(excerpt; expand the entry for the full text)*"
    return out
