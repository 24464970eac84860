"""The fields of one session entry a memory record takes (entry_text.py's Normalizer):
its role, timestamp, the paths its arguments name, a tool call's argument summary, and
text cut to a number of Unicode scalars."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..jsstr import js_string_of as js_string
from ..jsstr import js_stringify, js_trim, parse_date_ms
from ..native import NATIVE

if TYPE_CHECKING:
    from ..json_types import JsonObject, JsonValue

_PATH_KEY = re.compile(r"(?:file|path)s?$", re.IGNORECASE)
PATH_KEY_SEARCH = _PATH_KEY.search  # (the accelerator asks it for a key that is not ASCII)
_collect_paths_c: Any = getattr(NATIVE, "collect_paths", None)
_PLAIN_ROLES = frozenset({"user", "assistant", "toolResult"})  # Normalizer._feed_plain
ARGS_SUMMARY_SCALARS = 400
# `args_summary` in C, written only up to the cut (None: not built, or FABRIC_LSP_NATIVE=0)
_args_summary_c: Any = getattr(NATIVE, "args_summary", None)


def truncate_scalars(text: str, limit: int | None) -> tuple[str, bool]:
    """Cut `text` to `limit` Unicode scalars (Python str = scalars; no pair can split)."""
    if limit is None or len(text) <= limit:
        return text, False
    return text[: max(0, limit)], True


def args_summary(arguments: Any, present: bool) -> str:
    """A tool call's arguments as a record shows them: `JSON.stringify(arguments)` cut to
    ARGS_SUMMARY_SCALARS Unicode scalars, "…" added when cut; "" without arguments."""
    if not present:
        return ""
    if _args_summary_c is not None:
        fast = _args_summary_c(arguments, ARGS_SUMMARY_SCALARS)
        if fast is not None:
            return fast
    try:
        text = js_stringify(arguments)
    except (TypeError, ValueError, OverflowError):
        text = js_string(arguments)
    if len(text) > ARGS_SUMMARY_SCALARS:
        return text[:ARGS_SUMMARY_SCALARS] + "…"
    return text


def collect_paths(value: JsonValue, key: str | None, out: dict[str, None]) -> None:
    """String values under keys ending file/files/path/paths (array items inherit the key)."""
    if key is None and _collect_paths_c is not None and _collect_paths_c(value, out, PATH_KEY_SEARCH):
        return  # (the walk below in C, for exact dicts and lists: test_normalize_fast_path.py)
    if isinstance(value, str):
        if key is not None and _PATH_KEY.search(key):
            trimmed = js_trim(value)
            if trimmed:
                out.setdefault(trimmed, None)
    elif isinstance(value, dict):
        for k, v in value.items():
            collect_paths(v, k, out)
    elif isinstance(value, list):
        for v in value:
            collect_paths(v, key, out)


def entry_timestamp(raw: JsonObject, message: JsonObject | None) -> int | float | None:
    ts = parse_date_ms(raw.get("timestamp"))
    if ts is not None:
        return ts
    if message is not None:
        mts = message.get("timestamp")
        if isinstance(mts, (int, float)) and not isinstance(mts, bool):
            return mts
        if isinstance(mts, str):
            return parse_date_ms(mts)
    return None


def role_of(raw: JsonObject, message: JsonObject | None) -> str | None:
    etype = raw.get("type")
    if etype == "message" and message is not None:  # `feed` gives a message entry a dict
        role = js_string(message.get("role")) if "role" in message else "undefined"
        return role or None
    if etype == "compaction":
        return "compaction"
    if etype == "branch_summary":
        return "branchSummary"
    if etype == "custom_message":
        return "custom"
    return None


def plain_role(raw: JsonValue) -> str | None:
    """The role of a message entry `Normalizer._plain_fields` reads (user, assistant, or a
    toolResult other than fabric_exec's, which has trace children); None for any other
    entry."""
    if type(raw) is not dict:
        return None
    if raw.get("type") != "message":
        return None
    message: JsonValue = raw.get("message")
    if type(message) is not dict:
        return None
    role: JsonValue = message.get("role")
    if type(role) is not str or role not in _PLAIN_ROLES:
        return None
    if role == "toolResult":
        tool: JsonValue = message.get("toolName")
        if type(tool) is not str or tool == "fabric_exec":
            return None
    return role
