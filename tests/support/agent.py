"""Agent dirs for tests: copies of the bundled examples and of the real Pi 0.80.6 sessions,
owned by the test (files the user may write, as Pi leaves them)."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from fabric_lsp.commands.examples import last_timestamp_ms

REPO = Path(__file__).resolve().parents[2]
EXAMPLES_AGENT = REPO / "fabric_lsp" / "examples" / "agent"  # what `fabric-lsp examples` uses
REAL_SESSIONS = REPO / "tests" / "fixtures" / "real-sessions"  # written by real Pi 0.80.6


def examples_agent(dest: Path) -> Path:
    """A copy of the bundled examples' agent dir at `dest` (created; must not exist), each
    session's mtime its last entry's timestamp, as `fabric-lsp examples` writes them: the
    hot tier (the newest sessions) is then the same on every checkout, not whatever order
    git wrote the files in."""
    shutil.copytree(EXAMPLES_AGENT, dest)
    for f in sorted(dest.rglob("*.jsonl")):
        ms = last_timestamp_ms(f.read_bytes())
        if ms is not None:
            os.utime(f, ns=(ms * 1_000_000, ms * 1_000_000))
    return dest


def real_sessions_agent(root: Path, project_folder: str) -> Path:
    """`<root>/agent/sessions/<project_folder>/*.jsonl` from the real Pi fixtures, each
    file read-write for the user."""
    agent = root / "agent"
    folder = agent / "sessions" / project_folder
    folder.mkdir(parents=True)
    for src in sorted(REAL_SESSIONS.glob("*.jsonl")):
        dst = folder / src.name
        shutil.copyfile(src, dst)
        os.chmod(dst, stat.S_IRUSR | stat.S_IWUSR)
    return agent
