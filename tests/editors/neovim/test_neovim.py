"""The Neovim plugin (editors/neovim) in real headless Neovim 0.11.

Each `specs/*.lua` runs in its own `nvim --headless --clean` with only the plugin on the
runtimepath, against the real `fabric-lsp` server of this venv and real Pi sessions copied
into a temporary agent dir. A spec prints `ok - …` / `not ok - …` lines and
`N passed, N failed`; it exits 0 only when every check passed. Every wait inside a spec is
bounded, and the whole run has a timeout, so a hang is a failure, never a stalled CI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fabric_lsp.engine.session import encode_cwd

pytestmark = pytest.mark.editor

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
PLUGIN = ROOT / "editors" / "neovim"
FIXTURES = ROOT / "tests" / "fixtures" / "real-sessions"
EXAMPLE_SESSIONS = ROOT / "fabric_lsp" / "examples" / "agent" / "sessions"
SPECS = sorted((HERE / "specs").glob("*.lua"))
RUN_TIMEOUT_S = 240

# Sessions of the test project (their header cwd is rewritten to it) and of another project.
PROJECT_SESSIONS = (
    "01-print-default-tools.jsonl",
    "03-rpc-all-entry-types-branch-compaction.jsonl",
    "05-rpc-overflow-auto-compaction-split-turn.jsonl",
)
OTHER_SESSIONS = ("06-rpc-extension-hook-compaction-fromHook.jsonl",)
OTHER_CWD = "/home/user/other"


def nvim_binary() -> Path:
    """The Neovim 0.11 that scripts/deps/neovim.sh installs; missing is a failure."""
    override = os.environ.get("FABRIC_NVIM")
    candidates = [Path(override)] if override else [ROOT / ".tools" / "bin" / "nvim"]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    pytest.fail(f"Neovim 0.11 missing at {candidates[0]}: run scripts/deps/neovim.sh")


def server_binary() -> Path:
    path = Path(sys.executable).with_name("fabric-lsp")
    if not path.is_file():
        pytest.fail(f"fabric-lsp console script missing at {path}: run scripts/venv")
    return path


def _copy_session(src: Path, dest_dir: Path, cwd: str) -> Path:
    dest_dir.mkdir(parents=True, exist_ok=True)
    lines = src.read_bytes().split(b"\n")
    header = json.loads(lines[0])
    header["cwd"] = cwd
    lines[0] = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    dest = dest_dir / src.name
    dest.write_bytes(b"\n".join(lines))
    return dest


@pytest.fixture
def workspace(tmp_path: Path) -> dict[str, Path]:
    project = tmp_path / "proj"
    project.mkdir()
    agent = tmp_path / "agent"
    sessions = agent / "sessions"
    for name in PROJECT_SESSIONS:
        _copy_session(FIXTURES / name, sessions / encode_cwd(str(project)), str(project))
    for name in OTHER_SESSIONS:
        _copy_session(FIXTURES / name, sessions / encode_cwd(OTHER_CWD), OTHER_CWD)
    # The bundled example agent dir's sessions (other projects), as shipped.
    for folder in sorted(p for p in EXAMPLE_SESSIONS.iterdir() if p.is_dir()):
        shutil.copytree(folder, sessions / folder.name)
    return {"tmp": tmp_path, "project": project, "agent": agent, "sessions": sessions}


def run_spec(spec: Path, ws: dict[str, Path]) -> subprocess.CompletedProcess[str]:
    nvim = nvim_binary()
    server = server_binary()
    tmp = ws["tmp"]
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("NVIM", "VIM", "XDG_", "PI_", "FABRIC_"))
    }
    env.update(
        HOME=str(tmp / "home"),
        XDG_CONFIG_HOME=str(tmp / "xdg" / "config"),
        XDG_DATA_HOME=str(tmp / "xdg" / "data"),
        XDG_STATE_HOME=str(tmp / "xdg" / "state"),
        XDG_CACHE_HOME=str(tmp / "xdg" / "cache"),
        PATH=f"{server.parent}{os.pathsep}{env.get('PATH', '')}",
        PI_CODING_AGENT_DIR=str(ws["agent"]),
        FABRIC_TEST_HARNESS=str(HERE / "harness.lua"),
        FABRIC_TEST_PROJECT=str(ws["project"]),
        FABRIC_TEST_AGENT=str(ws["agent"]),
        FABRIC_TEST_SESSIONS=str(ws["sessions"]),
        # The server's background indexer reports its own progress and makes cold sessions
        # hot-built while it runs; specs of one request's progress or of cold pointers turn
        # it off. A spec opts in with `-- env: FABRIC_LSP_BACKGROUND_INDEX=1`.
        FABRIC_LSP_BACKGROUND_INDEX="0",
    )
    (tmp / "home").mkdir(exist_ok=True)
    # A spec may ask for Ex commands that run before plugins load: `-- cmd: <command>` lines
    # at its top (e.g. to set vim.g.fabric before plugin/fabric.lua reads it).
    # `-- rtp: none` leaves the plugin off the runtimepath: the spec puts it there itself,
    # as a plugin manager does (FABRIC_TEST_PLUGIN is its directory).
    early: list[str] = []
    on_rtp = True
    for line in spec.read_text(encoding="utf-8").splitlines():
        if not line.startswith("--"):
            break
        if line.startswith("-- cmd: "):
            early += ["--cmd", line[len("-- cmd: ") :]]
        if line.strip() == "-- rtp: none":
            on_rtp = False
        if line.startswith("-- env: "):
            key, _, value = line[len("-- env: ") :].strip().partition("=")
            env[key] = value
    env["FABRIC_TEST_PLUGIN"] = str(PLUGIN)
    argv = [
        str(nvim),
        "--headless",
        "--clean",
        "-n",
        "-i",
        "NONE",
        *early,
        *(["--cmd", f"set rtp^={PLUGIN}"] if on_rtp else []),
        "-l",
        str(spec),
    ]
    try:
        return subprocess.run(
            argv,
            cwd=ws["project"],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"{spec.name}: nvim did not finish in {RUN_TIMEOUT_S} s\nstdout:\n{exc.stdout}\nstderr:\n{exc.stderr}"
        )


def test_neovim_is_0_11() -> None:
    out = subprocess.run([str(nvim_binary()), "--version"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    assert out.stdout.startswith("NVIM v0.11."), out.stdout


def test_specs_exist() -> None:
    assert len(SPECS) >= 1  # the parametrized test below must not be empty


@pytest.mark.parametrize("spec", SPECS, ids=[s.stem for s in SPECS])
def test_spec(spec: Path, workspace: dict[str, Path]) -> None:
    result = run_spec(spec, workspace)
    report = f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    assert result.returncode == 0, report
    assert " 0 failed" in result.stdout, report
    assert "not ok - " not in result.stdout, report
