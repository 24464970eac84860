from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

REAL_SESSIONS = Path(__file__).resolve().parents[2] / "fixtures" / "real-sessions"


def line(obj: dict) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


class SessionWriter:
    """Writes Pi-shaped entries to a session file (append-only, one write per line)."""

    def __init__(self, path: Path, cwd: str = "/home/user/proj") -> None:
        self.path = path
        self.n = 0
        self.leaf: str | None = None
        path.write_bytes(
            line(
                {
                    "type": "session",
                    "version": 3,
                    "id": "0190-test-session",
                    "timestamp": "2026-11-30T00:00:00.000Z",
                    "cwd": cwd,
                }
            )
        )

    def _id(self) -> str:
        self.n += 1
        return f"e{self.n:07x}"

    def entry(self, etype: str, **payload) -> str:
        eid = self._id()
        obj = {"type": etype, "id": eid, "parentId": self.leaf, "timestamp": "2026-11-30T00:00:01.000Z", **payload}
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, line(obj))
        finally:
            os.close(fd)
        self.leaf = eid
        return eid

    def user(self, text: str) -> str:
        return self.entry(
            "message", message={"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}
        )

    def assistant(self, text: str = "", stop: str = "stop", calls: list[str] | None = None) -> str:
        content: list[dict] = []
        if text:
            content.append({"type": "text", "text": text})
        for call in calls or []:
            content.append({"type": "toolCall", "id": call, "name": "bash", "arguments": {"command": "ls"}})
        usage = {
            "input": 10,
            "output": 5,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 15,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        }
        return self.entry(
            "message",
            message={
                "role": "assistant",
                "content": content,
                "api": "openai-completions",
                "provider": "fakeai",
                "model": "fake",
                "usage": usage,
                "stopReason": stop,
                "timestamp": 2,
            },
        )

    def tool_result(self, call: str, text: str = "ok") -> str:
        return self.entry(
            "message",
            message={
                "role": "toolResult",
                "toolCallId": call,
                "toolName": "bash",
                "content": [{"type": "text", "text": text}],
                "isError": False,
                "timestamp": 3,
            },
        )

    def turn(self, prompt: str, answer: str, tools: int = 0) -> None:
        self.user(prompt)
        for k in range(tools):
            call = f"call_{self.n}_{k}"
            self.assistant(stop="toolUse", calls=[call])
            self.tool_result(call, f"output {k} of {prompt}")
        self.assistant(answer)


def age(path: Path, seconds: float = 60.0) -> None:
    """Make the file look quiet for `seconds`."""
    t = time.time() - seconds
    os.utime(path, (t, t))


@pytest.fixture
def session_writer(tmp_path):
    def make(name: str = "s.jsonl") -> SessionWriter:
        return SessionWriter(tmp_path / name)

    return make
