"""Real Pi (each version in FABRIC_PI_VERSIONS) started in a hostile project runs none of the project's code.

The project ships `fabric_lsp/` (a package shadowing ours), `json.py` and `msgspec.py`
(a stdlib module and a dependency fabric-lsp imports) and an executable `fabric-lsp`,
each writing a marker file outside the project when it runs. Pi starts in it with our
extension (installed by `fabric-lsp pi install`, or an older install's fabric-lsp.json
without `-I`, or `FABRIC_LSP_COMMAND` in the unsafe form older docs showed, or a plain
PATH lookup with `.` on PATH); after session_start (hold), settled turns and a compaction
that fabric-lsp computed, no marker exists. A control first shows the same files do run
for `python -m fabric_lsp` in that directory.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI
from pi_rpc import PiRpc
from realpi_kit import ROOT, real_pi_of, spread
from test_realpi_bridge import LONG, compactions, summarizer_requests, turn, write_agent

pytestmark = pytest.mark.realpi

EXTENSION = ROOT / "editors" / "pi"
PYTHON = os.path.abspath(sys.executable)
VENV_BIN = Path(PYTHON).parent


def plant(proj: Path, markers: Path) -> None:
    """The hostile project: every file records that it ran, in `markers/<name>`."""

    def marker_code(name: str) -> str:
        return f"import os\nopen(os.path.join({str(markers)!r}, {name!r}), 'w').write('ran')\n"

    (proj / "fabric_lsp").mkdir()
    (proj / "fabric_lsp" / "__init__.py").write_text(marker_code("fabric_lsp"))
    (proj / "fabric_lsp" / "__main__.py").write_text(marker_code("fabric_lsp.__main__"))
    (proj / "json.py").write_text(marker_code("json"))
    (proj / "msgspec.py").write_text(marker_code("msgspec"))
    script = proj / "fabric-lsp"
    script.write_text(f"#!/bin/sh\necho ran > {markers}/fabric-lsp-script\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def ran(markers: Path) -> list[str]:
    return sorted(p.name for p in markers.iterdir())


@pytest.fixture
def hostile(tmp_path, version):
    real_pi = real_pi_of(version)
    proj, markers, home, agent = tmp_path / "proj", tmp_path / "markers", tmp_path / "home", tmp_path / "agent"
    for d in (proj, markers, home):
        d.mkdir()
    plant(proj, markers)
    # the control: the command older versions installed imports all of it from this directory
    for argv in ([PYTHON, "-m", "fabric_lsp", "--version"], [PYTHON, "-c", "import json, msgspec"]):
        subprocess.run(argv, cwd=proj, capture_output=True, timeout=60)
    assert ran(markers) == ["fabric_lsp", "fabric_lsp.__main__", "json", "msgspec"], (
        "the hostile project does not bite: no test"
    )
    for p in markers.iterdir():
        p.unlink()
    with FakeOpenAI(answer="Sure: " + "detail " * 300, realistic_usage=True) as fake:
        write_agent(agent, fake.base_url)
        yield tmp_path, proj, markers, home, agent, fake, real_pi


def wrapper(tmp: Path) -> tuple[str, Path]:
    """An absolute FABRIC_LSP_COMMAND that records the directory it was started in."""
    log = tmp / "cwd.log"
    script = tmp / "fabric-lsp-cwd"
    script.write_text(f'#!/bin/sh\npwd >> {log}\nexec {PYTHON} -I -m fabric_lsp "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), log


# the extension's own rules, the same on every Pi version: each way runs once, on one of them
@pytest.mark.parametrize(
    ("version", "how"), spread(["pi-install", "legacy-install", "env-command", "path-lookup", "cwd"])
)
def test_pi_in_a_hostile_project_runs_none_of_its_code(hostile, how):
    tmp, proj, markers, home, agent, fake, real = hostile
    env = {k: v for k, v in os.environ.items() if k != "FABRIC_LSP_COMMAND"}
    env.update({k: v for k, v in real.env(agent, home).items() if k != "FABRIC_LSP_COMMAND"})
    args: list[str] = ["-e", str(EXTENSION)]
    log = None
    if how in ("pi-install", "legacy-install"):
        out = subprocess.run(
            [PYTHON, "-m", "fabric_lsp", "pi", "install", "--agent-dir", str(agent)],
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        config = agent / "extensions" / "fabric-lsp" / "fabric-lsp.json"
        assert json.loads(config.read_text())["command"] == [PYTHON, "-I", "-m", "fabric_lsp"]
        if how == "legacy-install":  # what fabric-lsp pi install wrote before -I
            config.write_text(json.dumps({"command": [PYTHON, "-m", "fabric_lsp"]}))
        args = []  # Pi loads it from <agentDir>/extensions
    elif how == "env-command":  # the form docs/pi.md used to show
        env["FABRIC_LSP_COMMAND"] = f"{PYTHON} -m fabric_lsp"
    elif how == "path-lookup":  # no config: `fabric-lsp` on PATH, where `.` comes first
        assert not (EXTENSION / "fabric-lsp.json").exists()
        env["PATH"] = f".::{VENV_BIN}:{env['PATH']}"
    else:
        env["FABRIC_LSP_COMMAND"], log = wrapper(tmp)
    pi = PiRpc(real.node, real.cli, args, cwd=proj, env=env)
    try:
        for i in range(3):
            turn(pi, f"step {i}: review the parser {i}. {LONG}")
        r = pi.call({"type": "compact"}, 90)
        notices = [e for e in pi.events if e.get("type") == "extension_ui_request"]
        leases = list((agent / "fabric-lsp" / "leases").glob("*.json"))  # released at shutdown
    finally:
        pi.close()
    assert ran(markers) == [], f"the project's code ran: {ran(markers)}"
    if log is not None:
        dirs = set(log.read_text().split())
        assert dirs and str(proj) not in dirs, dirs
        assert dirs == {str(EXTENSION / "extensions")}, dirs
    # and fabric-lsp did run: the lease from session_start, the compaction it computed
    assert r["success"], (r, notices)
    files = sorted((agent / "sessions").glob("*/*.jsonl"))
    assert len(files) == 1
    assert leases, "no lease: hold never ran"
    comp = compactions(files[0])
    assert len(comp) == 1 and comp[0]["fromHook"] is True and comp[0]["summary"] == r["data"]["summary"]
    assert not summarizer_requests(fake)
