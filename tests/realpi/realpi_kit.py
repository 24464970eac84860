"""Real Pi, every version in FABRIC_PI_VERSIONS (installed by scripts/deps/realpi.sh).

`FABRIC_PI_VERSIONS` (default "0.80.6,1.6.0": the release the bridge was first built on
and the current one) selects the Pi versions the real-Pi tests run against; the
`real_pi` fixture is parametrized over them, so every test that takes it runs once per
version (test ids end in `[pi-0.80.6]`, `[pi-1.6.0]`). A missing Pi fails, never skips.

What differs between the versions lives in ONE place: `PiFacts` below. A test asks
`real_pi.facts.<fact>`; it never compares version strings.
"""

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
HERE = Path(__file__).resolve().parent
REAL_SESSIONS = ROOT / "tests" / "fixtures" / "real-sessions"
MODELS = ("fake-coder", "fake-coder-mini", "fake-tiny")

VERSIONS_ENV = "FABRIC_PI_VERSIONS"
DEFAULT_VERSIONS = "0.80.6,1.6.0"

SUMMARY_PREFIX = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
SUMMARY_SUFFIX = "\n</summary>"


@dataclass(frozen=True)
class PiFacts:
    """The facts the tests rely on that differ between Pi versions (the one place)."""

    # the session file holds `message` entries with role "system" (prompt sections, tools)
    system_messages: bool
    # Pi appends `context_edit` entries itself (auto-retry, overflow recovery)
    context_edits: bool
    # `turn_end` / `agent_before_settle` accept entry drafts (a compaction among them), so
    # the bridge commits there without `ctx.compact()`
    boundary_drafts: bool
    # the file exists once the first user message is in it (else: at the first assistant)
    file_at_first_user: bool
    # an RPC `prompt` sent while a manual compaction runs is refused ("Cannot submit a
    # prompt while compaction is in progress"); 0.80.6 starts it
    prompt_refused_while_compacting: bool
    # RPC `prompt` responses carry `data.disposition`
    prompt_disposition: bool
    # Pi's `session_compact_failed` event exists
    compact_failed_event: bool
    # the first words of Pi's default system prompt (what the model is sent)
    system_prompt_start: str


FACTS: dict[str, PiFacts] = {
    "0.80.6": PiFacts(
        system_messages=False,
        context_edits=False,
        boundary_drafts=False,
        file_at_first_user=False,
        prompt_refused_while_compacting=False,
        prompt_disposition=False,
        compact_failed_event=False,
        system_prompt_start="You are an expert coding assistant",
    ),
    "1.6.0": PiFacts(
        system_messages=True,
        context_edits=True,
        boundary_drafts=True,
        file_at_first_user=True,
        prompt_refused_while_compacting=True,
        prompt_disposition=True,
        compact_failed_event=True,
        system_prompt_start="You are a coding assistant running inside pi",
    ),
}


def pi_versions() -> list[str]:
    """The versions FABRIC_PI_VERSIONS names (comma-separated), in order, each known here."""
    raw = os.environ.get(VERSIONS_ENV, "").strip() or DEFAULT_VERSIONS
    versions = [v.strip() for v in raw.split(",") if v.strip()]
    unknown = [v for v in versions if v not in FACTS]
    if unknown or not versions:
        raise pytest.UsageError(
            f"{VERSIONS_ENV}={raw!r}: no facts for {unknown or 'an empty list'} in "
            f"tests/realpi/realpi_kit.py FACTS (known: {', '.join(FACTS)})"
        )
    return versions


def pi_dir(version: str) -> Path:
    """Where scripts/deps/realpi.sh installs `version` (0.80.6: .tools/pi; X.Y.Z: .tools/piXYZ)."""
    return TOOLS / ("pi" if version == "0.80.6" else "pi" + version.replace(".", ""))


def pi_pkg(version: str) -> Path:
    return pi_dir(version) / "node_modules" / "@earendil-works" / "pi-coding-agent"


@dataclass
class RealPi:
    version: str
    facts: PiFacts
    node: Path
    pkg: Path
    cli: Path

    def context(self, session: Path, tmp: Path) -> dict[str, Any]:
        """What Pi's own SessionManager builds from `session` (read from a copy)."""
        copy = tmp / ("pi-view-" + session.name)
        shutil.copy(session, copy)
        out = subprocess.run(
            [str(self.node), str(HERE / "pi_context.mjs"), str(self.pkg), str(copy)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def env(self, agent_dir: Path, home: Path) -> dict[str, str]:
        return dict(
            os.environ,
            HOME=str(home),
            PI_CODING_AGENT_DIR=str(agent_dir),
            PI_OFFLINE="1",
            PI_SKIP_VERSION_CHECK="1",
            PI_TELEMETRY="0",
            PATH=f"{self.node.parent}:{os.environ.get('PATH', '')}",
        )

    def run(self, args: list[str], *, cwd: Path, agent_dir: Path, home: Path) -> subprocess.CompletedProcess:
        t0 = time.monotonic()
        out = subprocess.run(
            [str(self.node), str(self.cli), *args],
            cwd=cwd,
            env=self.env(agent_dir, home),
            capture_output=True,
            text=True,
            timeout=180,
        )
        out.elapsed = time.monotonic() - t0  # type: ignore[attr-defined]
        return out


_checked: dict[str, RealPi] = {}


def real_pi_of(version: str) -> RealPi:
    """The installed Pi `version`, checked once per run (it starts and says its version)."""
    if version in _checked:
        return _checked[version]
    pkg = pi_pkg(version)
    cli = pkg / "dist" / "cli.js"
    missing = [str(p) for p in (NODE, cli) if not p.exists()]
    if missing:
        pytest.fail(
            f"real Pi {version} is not installed (missing {', '.join(missing)}): run scripts/deps/realpi.sh "
            f"(it installs {VERSIONS_ENV}, default {DEFAULT_VERSIONS})"
        )
    out = subprocess.run([str(NODE), str(cli), "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == version, (version, out.stdout, out.stderr)
    _checked[version] = RealPi(version, FACTS[version], NODE, pkg, cli)
    return _checked[version]


def version_params(only: tuple[str, ...] | None = None) -> list[Any]:
    """pytest params over the selected versions (ids `pi-<version>`), optionally only those in `only`."""
    return [pytest.param(v, id=f"pi-{v}") for v in pi_versions() if only is None or v in only]


def spread(variants: list[str] | tuple[str, ...]) -> list[Any]:
    """pytest params `(version, variant)` that run each variant once, the selected versions
    taken in turn (the newest first): for a slow test whose variants do not depend on Pi's
    version, every version still runs it, and the suite does not run it once per version."""
    versions = pi_versions()[::-1]
    return [
        pytest.param(versions[i % len(versions)], v, id=f"pi-{versions[i % len(versions)]}-{v}")
        for i, v in enumerate(variants)
    ]


@pytest.fixture(scope="session", params=version_params())
def real_pi(request) -> RealPi:
    return real_pi_of(request.param)


def write_agent_dir(agent_dir: Path, base_url: str) -> None:
    agent_dir.mkdir(parents=True, exist_ok=True)
    models = {
        "providers": {
            "fakeai": {
                "baseUrl": base_url,
                "api": "openai-completions",
                "apiKey": "dummy",
                "models": [
                    {
                        "id": m,
                        "name": m,
                        "reasoning": False,
                        "input": ["text"],
                        "contextWindow": 128000,
                        "maxTokens": 4096,
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                    }
                    for m in MODELS
                ],
            }
        }
    }
    (agent_dir / "models.json").write_text(json.dumps(models))
    (agent_dir / "settings.json").write_text(
        json.dumps(
            {
                "defaultProvider": "fakeai",
                "defaultModel": "fake-coder",
                "quietStartup": True,
                # Pi must not compact on its own during these runs
                "compaction": {"enabled": False},
            }
        )
    )


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))
