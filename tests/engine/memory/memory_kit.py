"""Builders for memory tests: Pi-shaped session files under a temporary agent dir."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from fabric_lsp.engine.memory.api import MemoryConfig, MemoryEngine
from fabric_lsp.engine.session.discovery import encode_cwd

REPO = Path(__file__).resolve().parents[3]
REAL_SESSIONS = REPO / "tests" / "fixtures" / "real-sessions"


def ts(second: int) -> str:
    return f"2025-01-01T00:00:{second:02d}.000Z"


def header(sid: str, cwd: str) -> dict:
    return {"type": "session", "version": 3, "id": sid, "timestamp": ts(0), "cwd": cwd}


def user(eid: str, parent: str | None, text: str, second: int) -> dict:
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": ts(second),
            "message": {"role": "user", "content": text, "timestamp": 1_700_000_000_000}}


def assistant(eid: str, parent: str | None, parts: list, second: int) -> dict:
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": ts(second),
            "message": {"role": "assistant", "content": parts, "timestamp": 1_700_000_000_000}}


def tool_result(eid: str, parent: str | None, call_id: str, tool: str, text: str, second: int, *, is_error=False, details=None) -> dict:
    msg: dict[str, Any] = {"role": "toolResult", "toolCallId": call_id, "toolName": tool,
                           "content": [{"type": "text", "text": text}], "isError": is_error, "timestamp": 1_700_000_000_000}
    if details is not None:
        msg["details"] = details
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": ts(second), "message": msg}


def bash(eid: str, parent: str | None, command: str, output: str, code: int | None, second: int) -> dict:
    msg: dict[str, Any] = {"role": "bashExecution", "command": command, "output": output, "cancelled": False,
                           "truncated": False, "timestamp": 1_700_000_000_000}
    if code is not None:
        msg["exitCode"] = code
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": ts(second), "message": msg}


def write_session(agent_dir: Path, cwd: str, name: str, rows: list[dict], mtime_s: float | None = None) -> Path:
    folder = agent_dir / "sessions" / encode_cwd(cwd)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    if mtime_s is not None:
        os.utime(path, (mtime_s, mtime_s))
    return path


def demo_rows() -> list[dict]:
    """The session of the memory digest's worked example (§14)."""
    return [
        header("s1", "/home/user/demo"),
        user("u1", None, "Fix the auth login bug", 1),
        assistant("a1", "u1", [
            {"type": "thinking", "thinking": "hmm private"},
            {"type": "text", "text": "Reading auth."},
            {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "src/auth.ts"}},
        ], 2),
        tool_result("r1", "a1", "c1", "read", "export const login = () => auth();", 3),
        {"type": "model_change", "id": "m1", "parentId": "r1", "timestamp": ts(4), "provider": "p", "modelId": "m"},
        user("u2", "m1", "abandoned branch text", 5),
        bash("b1", "m1", "pnpm test auth", "1 failed", 1, 6),
        {"type": "custom_message", "id": "cm1", "parentId": "b1", "timestamp": ts(7), "customType": "note",
         "content": [{"type": "text", "text": "Auth login retry"}], "display": True},
    ]


DEMO_MTIME = 1735689700


def engine(agent_dir: Path, **cfg: Any) -> MemoryEngine:
    return MemoryEngine(MemoryConfig(**cfg), agent_dir=str(agent_dir))
