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


# ---- the fast loop (CONTRIBUTING.md) --------------------------------------------------------
# Every test gets the markers of what it drives, by where it lives, so `scripts/check`
# (and `pytest -m "not editor and not realpi and not postgres and not slow"`) runs the
# engine and server tests only; `scripts/test` and `.ci/run` run everything.
_BY_DIR = {"editors": "editor", "realpi": "realpi", "team": "postgres"}
# whole files that take tens of seconds each and guard install, crash and load paths
_SLOW_FILES = frozenset({
    "test_install.py", "test_crash_safety.py", "test_backpressure.py", "test_first_run.py",
})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(__file__).parent
    for item in items:
        try:
            parts = Path(str(item.fspath)).resolve().relative_to(root).parts
        except ValueError:
            continue
        if parts and parts[0] in _BY_DIR:
            item.add_marker(getattr(pytest.mark, _BY_DIR[parts[0]]))
        if parts and parts[-1] in _SLOW_FILES:
            item.add_marker(pytest.mark.slow)
