"""Pi's token estimate, exactly (spec pi-host §7), and JavaScript string helpers.

JavaScript measures strings in UTF-16 code units and serializes with JSON.stringify;
both are reproduced here because the compaction cut and `tokensBefore` depend on them.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any, Iterable, Optional

IMAGE_CHARS = 4800

_SURROGATE = re.compile("[\ud800-\udfff]")
_LONE_SURROGATE = re.compile("[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")


def utf16_len(s: str) -> int:
    """JavaScript's `s.length`: UTF-16 code units (an emoji counts 2)."""
    if s.isascii():
        return len(s)
    # Characters above the BMP take two code units; lone surrogates one.
    return len(s) + sum(1 for ch in s if ord(ch) > 0xFFFF)


def js_number(value: float | int) -> str:
    """Format a number as JavaScript's `String(n)` / JSON.stringify does."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if abs(value) < 10**21:
            return str(value)
        value = float(value)
    if math.isnan(value) or math.isinf(value):
        return "null"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # repr gives the shortest round-trip digits, as JavaScript's Number::toString does
    tup = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, tup.digits))
    n = len(digits) + int(tup.exponent)  # decimal point position after the first digit run
    k = len(digits)
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        es = ("+" if e >= 0 else "-") + str(abs(e))
        out = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + es
    return sign + out


def _escape_lone(m: re.Match[str]) -> str:
    return "\\u%04x" % ord(m.group(0))


def js_string(s: str) -> str:
    """JSON.stringify of a string (non-ASCII raw; lone surrogates escaped as JS does)."""
    out = json.dumps(s, ensure_ascii=False)
    if not s.isascii() and _SURROGATE.search(s):
        out = _LONE_SURROGATE.sub(_escape_lone, out)
    return out


def js_stringify(value: Any) -> Optional[str]:
    """JSON.stringify(value) with no spaces, keys in insertion order.

    Returns None where JavaScript returns undefined (a bare undefined-like value is not
    representable in Python, so only non-JSON types map to None at the top level).
    """
    parts: list[str] = []
    if not _stringify_into(value, parts):
        return None
    return "".join(parts)


def _stringify_into(value: Any, out: list[str]) -> bool:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(js_string(value))
    elif isinstance(value, (int, float)):
        out.append(js_number(value))
    elif isinstance(value, dict):
        out.append("{")
        first = True
        for k, v in value.items():
            mark = len(out)
            if not first:
                out.append(",")
            out.append(js_string(str(k)))
            out.append(":")
            if not _stringify_into(v, out):
                del out[mark:]  # JSON.stringify drops undefined-valued keys
                continue
            first = False
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, v in enumerate(value):
            if i:
                out.append(",")
            if not _stringify_into(v, out):
                out.append("null")
        out.append("]")
    else:
        return False
    return True


def _content_chars(content: Any) -> int:
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


def message_chars(message: dict) -> int:
    """The character count behind Pi's estimate for one context message."""
    role = message.get("role")
    if role in ("user", "custom", "toolResult"):
        return _content_chars(message.get("content"))
    if role == "assistant":
        chars = 0
        content = message.get("content")
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
                    args = js_stringify(part.get("arguments"))
                    if args is not None:
                        chars += utf16_len(args)
        return chars
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


def estimate_tokens(message: dict) -> int:
    """Pi's `estimateTokens`: ceil(chars / 4) with UTF-16 counting."""
    chars = message_chars(message)
    return -(-chars // 4)


def _num(v: Any) -> float:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def calculate_context_tokens(usage: Any) -> float:
    """`usage.totalTokens` when truthy, else input + output + cacheRead + cacheWrite."""
    if not isinstance(usage, dict):
        return 0
    total = usage.get("totalTokens")
    if total:
        return _num(total)
    return _num(usage.get("input")) + _num(usage.get("output")) + _num(usage.get("cacheRead")) + _num(usage.get("cacheWrite"))


def last_usage_index(messages: list[dict]) -> Optional[int]:
    """Index of the last assistant message whose usage anchors the estimate, if any.

    An assistant without `usage` counts as no checkpoint (a documented deviation from the
    reference, which fails on it)."""
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if msg.get("role") != "assistant":
            continue
        if msg.get("stopReason") in ("error", "aborted"):
            continue
        usage = msg.get("usage")
        if isinstance(usage, dict) and calculate_context_tokens(usage) > 0:
            return i
    return None


def estimate_context_tokens(messages: Iterable[dict]) -> int:
    """Pi's `estimateContextTokens`: the last valid assistant usage plus the estimates of
    the messages after it, else the sum of all estimates."""
    msgs = list(messages)
    idx = last_usage_index(msgs)
    if idx is None:
        return sum(estimate_tokens(m) for m in msgs)
    base = calculate_context_tokens(msgs[idx]["usage"])
    tail = sum(estimate_tokens(m) for m in msgs[idx + 1 :])
    total = base + tail
    return int(total) if float(total).is_integer() else total  # type: ignore[return-value]
