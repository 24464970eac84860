"""The one builder of Pi-shaped session files for tests: entry rows (version 3, as Pi
0.80.6 writes them) and the files under an agent dir's `sessions/<encoded cwd>/`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from fabric_lsp.engine.session.discovery import encode_cwd

MESSAGE_MS = 1_700_000_000_000  # the messages' own `timestamp` (epoch ms)


def ts(second: int) -> str:
    """An ISO entry timestamp `second` seconds after 2025-01-01T00:00:00Z (within a day)."""
    return f"2025-01-01T{second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}.000Z"


def header(sid: str, cwd: str) -> dict[str, Any]:
    return {"type": "session", "version": 3, "id": sid, "timestamp": ts(0), "cwd": cwd}


def message(eid: str, parent: str | None, msg: dict[str, Any], second: int) -> dict[str, Any]:
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": ts(second), "message": msg}


def user(eid: str, parent: str | None, text: str, second: int) -> dict[str, Any]:
    return message(eid, parent, {"role": "user", "content": text, "timestamp": MESSAGE_MS}, second)


def assistant(eid: str, parent: str | None, parts: list[Any], second: int) -> dict[str, Any]:
    return message(eid, parent, {"role": "assistant", "content": parts, "timestamp": MESSAGE_MS}, second)


def tool_result(
    eid: str,
    parent: str | None,
    call_id: str,
    tool: str,
    text: str,
    second: int,
    *,
    is_error: bool = False,
    details: Any = None,
) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": tool,
        "content": [{"type": "text", "text": text}],
        "isError": is_error,
        "timestamp": MESSAGE_MS,
    }
    if details is not None:
        msg["details"] = details
    return message(eid, parent, msg, second)


def bash(eid: str, parent: str | None, command: str, output: str, code: int | None, second: int) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "role": "bashExecution",
        "command": command,
        "output": output,
        "cancelled": False,
        "truncated": False,
        "timestamp": MESSAGE_MS,
    }
    if code is not None:
        msg["exitCode"] = code
    return message(eid, parent, msg, second)


def jsonl(rows: list[dict[str, Any]]) -> str:
    """`rows` as Pi writes them: compact JSON, one per line, each ending in a newline."""
    return "".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n" for r in rows)


def write_session(
    agent_dir: Path, cwd: str, name: str, rows: list[dict[str, Any]], mtime_s: float | None = None
) -> Path:
    """`rows` as the session file `name` of project `cwd` under `agent_dir`; its mtime set
    when `mtime_s` is given (tests that order sessions by time)."""
    folder = agent_dir / "sessions" / encode_cwd(cwd)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(jsonl(rows), encoding="utf-8")
    if mtime_s is not None:
        os.utime(path, (mtime_s, mtime_s))
    return path


def append_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(jsonl(rows))
