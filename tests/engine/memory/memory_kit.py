"""Builders for memory tests: Pi-shaped session files under a temporary agent dir."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fabric_lsp.engine.memory.api import MemoryConfig

# the one session builder (tests/support/sessions.py), re-exported: memory tests import it from here
from tests.support.sessions import assistant as assistant
from tests.support.sessions import bash as bash
from tests.support.sessions import header as header
from tests.support.sessions import tool_result as tool_result
from tests.support.sessions import ts as ts
from tests.support.sessions import user as user
from tests.support.sessions import write_session as write_session
from tests.support.wire import WireMemoryEngine

REPO = Path(__file__).resolve().parents[3]
REAL_SESSIONS = REPO / "tests" / "fixtures" / "real-sessions"


def demo_rows() -> list[dict]:
    """The session of the memory digest's worked example (§14)."""
    return [
        header("s1", "/home/user/demo"),
        user("u1", None, "Fix the auth login bug", 1),
        assistant(
            "a1",
            "u1",
            [
                {"type": "thinking", "thinking": "hmm private"},
                {"type": "text", "text": "Reading auth."},
                {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "src/auth.ts"}},
            ],
            2,
        ),
        tool_result("r1", "a1", "c1", "read", "export const login = () => auth();", 3),
        {"type": "model_change", "id": "m1", "parentId": "r1", "timestamp": ts(4), "provider": "p", "modelId": "m"},
        user("u2", "m1", "abandoned branch text", 5),
        bash("b1", "m1", "pnpm test auth", "1 failed", 1, 6),
        {
            "type": "custom_message",
            "id": "cm1",
            "parentId": "b1",
            "timestamp": ts(7),
            "customType": "note",
            "content": [{"type": "text", "text": "Auth login retry"}],
            "display": True,
        },
    ]


DEMO_MTIME = 1735689700


def engine(agent_dir: Path, **cfg: Any) -> WireMemoryEngine:
    """A memory engine whose calls answer with the wire JSON (tests/support/wire.py)."""
    return WireMemoryEngine(MemoryConfig(**cfg), agent_dir=str(agent_dir))
