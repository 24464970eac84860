"""Session-entry builders for compaction tests (plain raw dicts, linked by parentId)."""

from __future__ import annotations

from typing import Any

ZERO_USAGE = {
    "input": 0,
    "output": 0,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 0,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
}


def user(text: Any) -> dict:
    return {"type": "message", "message": {"role": "user", "content": text, "timestamp": 0}}


def user_parts(text: str) -> dict:
    return {"type": "message", "message": {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 0}}


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def thinking(t: str) -> dict:
    return {"type": "thinking", "thinking": t}


def call(cid: str, name: str, args: Any) -> dict:
    return {"type": "toolCall", "id": cid, "name": name, "arguments": args}


def assistant(*parts: dict, usage: dict | None = None, stop: str = "stop") -> dict:
    return {
        "type": "message",
        "message": {
            "role": "assistant",
            "content": list(parts),
            "api": "test",
            "provider": "test",
            "model": "test",
            "usage": dict(usage) if usage is not None else dict(ZERO_USAGE),
            "stopReason": stop,
            "timestamp": 0,
        },
    }


def tool_result(cid: str, name: str, body: str, is_error: bool = False, details: Any = None) -> dict:
    msg = {
        "role": "toolResult",
        "toolCallId": cid,
        "toolName": name,
        "content": [{"type": "text", "text": body}],
        "isError": is_error,
        "timestamp": 0,
    }
    if details is not None:
        msg["details"] = details
    return {"type": "message", "message": msg}


def bash_exec(command: str, exit_code: Any, output: str) -> dict:
    return {
        "type": "message",
        "message": {
            "role": "bashExecution",
            "command": command,
            "output": output,
            "exitCode": exit_code,
            "cancelled": False,
            "truncated": False,
            "timestamp": 0,
        },
    }


def custom_message(
    custom_type: Any, content: Any, display: Any, details: Any = None, with_details: bool = False
) -> dict:
    e = {"type": "custom_message", "customType": custom_type, "content": content, "display": display}
    if details is not None or with_details:
        e["details"] = details
    return e


def plain_custom(custom_type: str, data: Any) -> dict:
    return {"type": "custom", "customType": custom_type, "data": data}


def compaction_entry(kept: str, summary: str, details: Any = None, tokens_before: int = 1000) -> dict:
    e = {"type": "compaction", "summary": summary, "firstKeptEntryId": kept, "tokensBefore": tokens_before}
    if details is not None:
        e["details"] = details
    return e


def link(
    entries: list[dict], ts: str = "2025-03-01T10:00:{n:02d}.000Z", start: int = 1, prefix: str = "e"
) -> list[dict]:
    """Assign ids e1.., parentIds to the previous entry and timestamps."""
    out = []
    prev = None
    for i, e in enumerate(entries):
        n = start + i
        e = dict(e)
        e["id"] = e.get("id") or f"{prefix}{n}"
        e["parentId"] = prev
        e["timestamp"] = ts.format(n=n)
        prev = e["id"]
        out.append(e)
    return out


def ref_ts(n: int) -> str:
    """The reference suite's timestamps: 2024-01-0{1+n/86400}T00:00:{n%60}Z."""
    return f"2024-01-0{1 + n // 86400}T00:00:{n % 60:02d}Z"


def estimate_usage_assistant(raw: int, *parts: dict, fixed: float = 6000, scale: float = 1.4) -> tuple[dict, int]:
    """An assistant whose usage reports round(fixed + scale * raw-including-itself)."""
    from fabric_lsp.engine.session import estimate_tokens

    a = assistant(*parts)
    raw += estimate_tokens(a["message"])
    ctx = round(fixed + scale * raw)
    a["message"]["usage"] = dict(a["message"]["usage"], input=ctx, totalTokens=ctx)
    return a, raw
