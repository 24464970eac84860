"""Helpers for the VS Code extension tests: tool discovery and running node.

The tools come from scripts/deps/vscode.sh, which records their paths in
.tools/vscode/env.json. A missing tool is a failure naming that script, never a skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXTENSION = ROOT / "editors" / "vscode"
TOOLS_ENV = Path(os.environ.get("FABRIC_VSCODE_TOOLS", ROOT / ".tools" / "vscode")) / "env.json"
SETUP = "bash scripts/deps/vscode.sh"


def fail_missing(what: str) -> None:
    pytest.fail(f"{what}: run `{SETUP}` (it installs node 24, code-server, chromium and npm deps)", pytrace=False)


def node_env() -> dict[str, str]:
    env = dict(os.environ)
    # The server under test: this checkout's venv (the one running pytest).
    env.setdefault("FABRIC_LSP_COMMAND", json.dumps([str(Path(sys.executable).with_name("fabric-lsp"))]))
    # The Python that builds the wheel the VSIX carries (scripts/bundle-server.mjs).
    env.setdefault("FABRIC_PYTHON", sys.executable)
    return env


def run_node(tools: dict[str, str], args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    env = node_env()
    env["PATH"] = f"{Path(tools['node']).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        [tools["node"], *args],
        cwd=EXTENSION,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def report(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout[-20000:]}\n--- stderr ---\n{proc.stderr[-8000:]}"
