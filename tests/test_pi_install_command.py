"""`fabric-lsp pi install`: the command it writes cannot import from the directory it runs
in, and it replaces only an earlier install of ours."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fabric_lsp import __version__

PYTHON = os.path.abspath(sys.executable)


def install(tmp: Path, agent: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "fabric_lsp", "pi", "install", "--agent-dir", str(agent)],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_installed_command_is_isolated_and_ignores_the_current_directory(tmp_path):
    agent = tmp_path / "agent"
    out = install(tmp_path, agent)
    assert out.returncode == 0, out.stderr
    command = json.loads((agent / "extensions" / "fabric-lsp" / "fabric-lsp.json").read_text())["command"]
    assert command == [PYTHON, "-I", "-m", "fabric_lsp"]
    assert f"it runs: {PYTHON} -I -m fabric_lsp pi" in out.stdout
    # run it where a project shadows fabric_lsp and json, with PYTHONPATH pointing there too
    proj = tmp_path / "proj"
    (proj / "fabric_lsp").mkdir(parents=True)
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'a').write('x')\n"
    for name in ("fabric_lsp/__init__.py", "fabric_lsp/__main__.py", "json.py"):
        (proj / name).write_text(code)
    env = dict(os.environ, PYTHONPATH=str(proj))
    old = subprocess.run(
        [PYTHON, "-m", "fabric_lsp", "--version"], cwd=proj, env=env, capture_output=True, text=True, timeout=60
    )
    assert marker.exists(), "the project does not shadow fabric_lsp for the old command: no test"
    marker.unlink()
    new = subprocess.run([*command, "--version"], cwd=proj, env=env, capture_output=True, text=True, timeout=60)
    assert new.returncode == 0 and new.stdout.strip() == f"fabric-lsp {__version__}", (new.stdout, new.stderr, old)
    assert not marker.exists()


def test_install_replaces_an_earlier_install_of_ours(tmp_path):
    agent = tmp_path / "agent"
    assert install(tmp_path, agent).returncode == 0
    target = agent / "extensions" / "fabric-lsp"
    (target / "fabric-lsp.json").write_text(json.dumps({"command": [PYTHON, "-m", "fabric_lsp"]}))
    assert install(tmp_path, agent).returncode == 0  # an earlier install of ours is replaced
    assert json.loads((target / "fabric-lsp.json").read_text())["command"][1] == "-I"


def test_install_leaves_a_directory_or_symlink_that_is_not_ours_alone(tmp_path):
    other = tmp_path / "agent2"
    mine = other / "extensions" / "fabric-lsp"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("my own extension")
    out = install(tmp_path, other)
    assert out.returncode == 1 and "is not an earlier `fabric-lsp pi install`" in out.stderr and str(mine) in out.stderr
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and (mine / "notes.txt").read_text() == "my own extension"
    # a symlink there is not followed (the directory it names keeps its files)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "package.json").write_text(json.dumps({"name": "fabric-lsp-pi"}))
    third = tmp_path / "agent3" / "extensions"
    third.mkdir(parents=True)
    (third / "fabric-lsp").symlink_to(elsewhere)
    out = install(tmp_path, tmp_path / "agent3")
    assert out.returncode == 1, out.stdout
    assert (third / "fabric-lsp").is_symlink() and [p.name for p in elsewhere.iterdir()] == ["package.json"]
