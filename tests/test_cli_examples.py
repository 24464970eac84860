"""`fabric-lsp examples DIR`: the bundled agent dir written out for a new user."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fabric_lsp.engine.session import resolve_session
from fabric_lsp.examples import example_session_dir


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabric_lsp", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.jsonl"))}


def test_writes_the_bundled_sessions_and_prints_next_steps(tmp_path: Path) -> None:
    dest = tmp_path / "new" / "agent"
    out = run("examples", str(dest))
    assert out.returncode == 0, out.stderr
    assert _tree(dest / "sessions") == _tree(example_session_dir())
    assert len(_tree(dest / "sessions")) == 7
    assert f"--agent-dir {dest}" in out.stdout and f"PI_CODING_AGENT_DIR={dest}" in out.stdout
    assert "fabric-lsp preview 01a18ac0" in out.stdout
    for f in (dest / "sessions").rglob("*.jsonl"):
        assert os.access(f, os.W_OK)  # a writable copy: intents may be committed to it
        last = json.loads(f.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1])["timestamp"]
        assert abs(f.stat().st_mtime - _iso_s(last)) < 1  # mtime = last append, as Pi leaves it


def _iso_s(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_refuses_a_non_empty_dir_unless_forced(tmp_path: Path) -> None:
    dest = tmp_path / "agent"
    dest.mkdir()
    (dest / "settings.json").write_text("{}")
    out = run("examples", str(dest))
    assert out.returncode == 2
    assert "not empty" in out.stderr and "--force" in out.stderr
    assert not (dest / "sessions").exists()
    (dest / "sessions" / "--old--").mkdir(parents=True)
    (dest / "sessions" / "--old--" / "x.jsonl").write_text("{}\n")
    forced = run("examples", "--force", str(dest))
    assert forced.returncode == 0, forced.stderr
    assert _tree(dest / "sessions") == _tree(example_session_dir())  # sessions/ replaced
    assert (dest / "settings.json").read_text() == "{}"  # the rest left alone
    file_in_the_way = tmp_path / "file"
    file_in_the_way.write_text("x")
    assert run("examples", "--force", str(file_in_the_way)).returncode == 2


def test_the_printed_commands_work(tmp_path: Path) -> None:
    dest = tmp_path / "agent"
    assert run("examples", str(dest)).returncode == 0
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(dest)}
    preview = run("preview", "--json", "01a18ac0", env=env)
    assert preview.returncode == 0, preview.stderr
    result = json.loads(preview.stdout)
    assert result["outcome"] == "compacted" and result["tokensBefore"] >= 120_000
    assert result["sessionFile"] == resolve_session("01a18ac0", str(dest / "sessions"))
    sessions = run("sessions", "--agent-dir", str(dest), "--scope", "global", "--json")
    assert sessions.returncode == 0, sessions.stderr
    assert json.loads(sessions.stdout)["totalItems"] == 7


def test_session_prefixes_resolve_in_preview_and_expand(tmp_path: Path) -> None:
    dest = tmp_path / "agent"
    assert run("examples", str(dest)).returncode == 0
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(dest)}
    expand = run("expand", "--agent-dir", str(dest), "--entry-ids", "97e8c51f", "--json", "01a182b4", env=env)
    assert expand.returncode == 0, expand.stderr
    assert json.loads(expand.stdout)["sessionId"] == "01a182b4-1092-7a6b-8cc6-b138f37cc8ab"
    short = run("expand", "--agent-dir", str(dest), "--entry-ids", "97e8c51f", "--json", "01a182b", env=env)
    assert "session_not_found" in short.stdout + short.stderr  # 7 characters are never a prefix
