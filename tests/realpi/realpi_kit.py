"""Real Pi 0.80.6 (installed by scripts/deps/realpi.sh). A missing Pi fails, never skips."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / ".tools"
NODE = TOOLS / "node22" / "node_modules" / ".bin" / "node"
PI_PKG = TOOLS / "pi" / "node_modules" / "@earendil-works" / "pi-coding-agent"
PI_CLI = PI_PKG / "dist" / "cli.js"
HERE = Path(__file__).resolve().parent
REAL_SESSIONS = ROOT / "tests" / "fixtures" / "real-sessions"
MODELS = ("fake-coder", "fake-coder-mini", "fake-tiny")

SUMMARY_PREFIX = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
SUMMARY_SUFFIX = "\n</summary>"


@dataclass
class RealPi:
    node: Path
    pkg: Path
    cli: Path

    def context(self, session: Path, tmp: Path) -> dict[str, Any]:
        """What Pi's own SessionManager builds from `session` (read from a copy)."""
        copy = tmp / ("pi-view-" + session.name)
        shutil.copy(session, copy)
        out = subprocess.run([str(self.node), str(HERE / "pi_context.mjs"), str(self.pkg), str(copy)],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def env(self, agent_dir: Path, home: Path) -> dict[str, str]:
        return dict(os.environ, HOME=str(home), PI_CODING_AGENT_DIR=str(agent_dir), PI_OFFLINE="1",
                    PATH=f"{self.node.parent}:{os.environ.get('PATH', '')}")

    def run(self, args: list[str], *, cwd: Path, agent_dir: Path, home: Path) -> subprocess.CompletedProcess:
        t0 = time.monotonic()
        out = subprocess.run([str(self.node), str(self.cli), *args], cwd=cwd, env=self.env(agent_dir, home),
                             capture_output=True, text=True, timeout=180)
        out.elapsed = time.monotonic() - t0  # type: ignore[attr-defined]
        return out


@pytest.fixture(scope="session")
def real_pi() -> RealPi:
    missing = [str(p) for p in (NODE, PI_CLI) if not p.exists()]
    if missing:
        pytest.fail("real Pi is not installed (missing " + ", ".join(missing) + "): run scripts/deps/realpi.sh")
    version = subprocess.run([str(NODE), str(PI_CLI), "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.strip() == "0.80.6", (version.stdout, version.stderr)
    return RealPi(NODE, PI_PKG, PI_CLI)


def write_agent_dir(agent_dir: Path, base_url: str) -> None:
    agent_dir.mkdir(parents=True, exist_ok=True)
    models = {"providers": {"fakeai": {
        "baseUrl": base_url, "api": "openai-completions", "apiKey": "dummy",
        "models": [{"id": m, "name": m, "reasoning": False, "input": ["text"], "contextWindow": 128000,
                    "maxTokens": 4096, "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}
                   for m in MODELS]}}}
    (agent_dir / "models.json").write_text(json.dumps(models))
    (agent_dir / "settings.json").write_text(json.dumps({
        "defaultProvider": "fakeai", "defaultModel": "fake-coder", "quietStartup": True,
        # Pi must not compact on its own during these runs
        "compaction": {"enabled": False}}))


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))
