"""Pi's token estimate, exactly (spec pi-host §7), and JavaScript string helpers.

JavaScript measures strings in UTF-16 code units and serializes with JSON.stringify;
both are reproduced here because the compaction cut and `tokensBefore` depend on them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..jsstr import js_number, js_stringify, utf16_len

if TYPE_CHECKING:
    from ..json_types import JsonValue

__all__ = [
    "IMAGE_CHARS",
    "arguments_chars",
    "assistant_chars",
    "calculate_context_tokens",
    "estimate_context_tokens",
    "estimate_context_tokens_1x",
    "estimate_tokens",
    "estimate_tokens_1x",
    "js_number",
    "js_stringify",
    "last_usage_index",
    "message_chars",
    "system_chars",
    "utf16_len",
]

IMAGE_CHARS = 4800


def _content_chars(content: JsonValue) -> int:
    if isinstance(content, str):
        return utf16_len(content)
    chars = 0
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            ptype = part.get("type")
            if ptype == "text":
                text = part.get("text")
                if isinstance(text, str):
                    chars += utf16_len(text)
            elif ptype == "image":
                chars += IMAGE_CHARS
    return chars


def message_chars(message: dict[str, Any]) -> int:
    """The character count behind Pi's estimate for one context message."""
    role = message.get("role")
    if role in ("user", "custom", "toolResult"):
        return _content_chars(message.get("content"))
    if role == "assistant":
        return assistant_chars(message)
    if role == "bashExecution":
        chars = 0
        for key in ("command", "output"):
            v = message.get(key)
            if isinstance(v, str):
                chars += utf16_len(v)
        return chars
    if role in ("branchSummary", "compactionSummary"):
        s = message.get("summary")
        return utf16_len(s) if isinstance(s, str) else 0
    return 0


def assistant_chars(message: dict[str, Any], arguments: list[Any] | None = None) -> int:
    """The estimate characters of an assistant message. With `arguments`, the tool calls'
    `JSON.stringify(arguments)` lengths are left out and their values appended to it
    instead (`arguments_chars` of them completes the count)."""
    chars = 0
    content: JsonValue = message.get("content")
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            ptype = part.get("type")
            if ptype == "text":
                t = part.get("text")
                if isinstance(t, str):
                    chars += utf16_len(t)
            elif ptype == "thinking":
                t = part.get("thinking")
                if isinstance(t, str):
                    chars += utf16_len(t)
            elif ptype == "toolCall":
                name = part.get("name")
                if isinstance(name, str):
                    chars += utf16_len(name)
                if "arguments" in part:  # JSON.stringify(undefined) has no length
                    if arguments is None:
                        chars += utf16_len(js_stringify(part["arguments"]))
                    else:
                        arguments.append(part["arguments"])
    return chars


def arguments_chars(arguments: Iterable[Any]) -> int:
    """Sum of `JSON.stringify(a).length` over tool-call argument values."""
    return sum(utf16_len(js_stringify(a)) for a in arguments)


def estimate_tokens(message: dict[str, Any]) -> int:
    """Pi 0.80.6's `estimateTokens`: ceil(chars / 4) with UTF-16 counting (a `system`
    message counts 0, as 0.80.6 has no such role)."""
    chars = message_chars(message)
    return -(-chars // 4)


def js_truthy(v: Any) -> bool:
    """JavaScript truthiness of a decoded JSON value ([] and {} are truthy)."""
    if v is None or v is False:
        return False
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v == v and v != 0  # NaN and 0 are falsy
    if isinstance(v, str):
        return v != ""
    return True


def system_chars(message: dict[str, Any]) -> int:
    """The characters Pi 1.x's `estimateTokens` counts for a `system` message: its
    content (text parts, 4800 per image), every truthy string section, and
    `JSON.stringify(toolsAdded).length` when `toolsAdded` is truthy (`toolsRemoved` is
    not counted)."""
    chars = _content_chars(message.get("content"))
    sections: JsonValue = message.get("sections")
    if isinstance(sections, dict):
        for value in sections.values():
            if isinstance(value, str):
                chars += utf16_len(value)
    tools: JsonValue = message.get("toolsAdded")
    if js_truthy(tools):
        chars += utf16_len(js_stringify(tools))
    return chars


def estimate_tokens_1x(message: dict[str, Any]) -> int:
    """Pi 1.x's `estimateTokens`: as 0.80.6's, and a `system` message counts
    (`system_chars`)."""
    if message.get("role") == "system":
        return -(-system_chars(message) // 4)
    return estimate_tokens(message)


def _num(v: Any) -> float:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def calculate_context_tokens(usage: JsonValue) -> float:
    """`usage.totalTokens` when truthy, else input + output + cacheRead + cacheWrite."""
    if not isinstance(usage, dict):
        return 0
    total = usage.get("totalTokens")
    if total:
        return _num(total)
    return (
        _num(usage.get("input"))
        + _num(usage.get("output"))
        + _num(usage.get("cacheRead"))
        + _num(usage.get("cacheWrite"))
    )


def last_usage_index(messages: list[dict[str, Any]]) -> int | None:
    """Index of the last assistant message whose usage anchors the estimate, if any.

    An assistant without `usage` counts as no checkpoint (a documented deviation from the
    reference, which fails on it)."""
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if msg.get("role") != "assistant":
            continue
        if msg.get("stopReason") in ("error", "aborted"):
            continue
        usage: JsonValue = msg.get("usage")
        if isinstance(usage, dict) and calculate_context_tokens(usage) > 0:
            return i
    return None


def estimate_context_tokens(messages: Iterable[dict[str, Any]], estimate: Any = None) -> int:
    """Pi's `estimateContextTokens`: the last valid assistant usage plus the estimates of
    the messages after it, else the sum of all estimates (`estimate`: the per-message
    estimate, default Pi 0.80.6's)."""
    est = estimate_tokens if estimate is None else estimate
    msgs = list(messages)
    idx = last_usage_index(msgs)
    if idx is None:
        return sum(est(m) for m in msgs)
    base = calculate_context_tokens(msgs[idx]["usage"])
    tail = sum(est(m) for m in msgs[idx + 1 :])
    total = base + tail
    return int(total) if float(total).is_integer() else total  # type: ignore[return-value]


def estimate_context_tokens_1x(messages: Iterable[dict[str, Any]]) -> int:
    """Pi 1.x's `estimateContextTokens` (system messages counted)."""
    return estimate_context_tokens(messages, estimate_tokens_1x)
