"""Pi's token estimate (pi-host §7) with C-speed UTF-16 counting.

Same semantics as `fabric_lsp.engine.session.tokens.estimate_tokens` (checked by a
property test); this copy exists because the preview of a 50 MB session estimates every
message and a per-character loop dominated the run time.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from fabric_lsp.engine.session.context import build_context_messages
from fabric_lsp.engine.session.tokens import calculate_context_tokens, last_usage_index

from ..jsstr import js_stringify, utf16_len
from .loader import ToolOutput

IMAGE_CHARS = 4800


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
    role = message.get("role")
    if role == "toolResult":
        content = message.get("content")
        if content.__class__ is ToolOutput:
            return content.chars
        return _content_chars(content)
    if role in ("user", "custom"):
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
                    if "arguments" in part:
                        chars += utf16_len(js_stringify(part["arguments"]))
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
    return -(-message_chars(message) // 4)


def estimate_context_tokens(messages: Iterable[dict], estimates: Optional[list[int]] = None) -> Any:
    msgs = list(messages)
    est = estimates if estimates is not None else None
    idx = last_usage_index(msgs)
    if idx is None:
        return sum(est) if est is not None else sum(estimate_tokens(m) for m in msgs)
    base = calculate_context_tokens(msgs[idx]["usage"])
    tail = sum(est[idx + 1 :]) if est is not None else sum(estimate_tokens(m) for m in msgs[idx + 1 :])
    total = base + tail
    return int(total) if float(total).is_integer() else total


def context_tokens(path: list[dict]) -> Any:
    """Pi's `tokensBefore`: estimateContextTokens over buildSessionContext(path)."""
    return estimate_context_tokens(build_context_messages(path))
