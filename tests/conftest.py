from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
REAL_SESSIONS = FIXTURES / "real-sessions"
PROJECT_NODE = Path(__file__).resolve().parents[1] / ".tools" / "node22" / "node_modules" / ".bin" / "node"

# User regexes run in node (fabric_lsp/engine/memory/regex_worker.py). CI installs node
# into .tools (scripts/deps/realpi.sh) without putting it on PATH: point the engine, and
# every server process the tests start (they inherit this environment), at it.
if not os.environ.get("FABRIC_LSP_NODE") and shutil.which("node") is None and PROJECT_NODE.exists():
    os.environ["FABRIC_LSP_NODE"] = str(PROJECT_NODE)


@pytest.fixture
def real_sessions() -> Path:
    return REAL_SESSIONS
