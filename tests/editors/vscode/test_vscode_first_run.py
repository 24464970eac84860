"""README.md's first run in real VS Code (code-server + chromium, test/e2e/firstrun.mjs),
once per Python 3.11-3.13 on this machine, each first on PATH: the README's
`fabric-lsp examples ~/fabric-examples` line run as written (fresh HOME), then its VS Code
line `PI_CODING_AGENT_DIR=~/fabric-examples code ~/fabric-examples/projects/orbit` played by
code-server with that variable and folder. The VSIX (built once per session) must choose
that Python, install its server offline from its own wheelhouse, show the file-history
CodeLens on orbit/tle.py and answer a recall."""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from vscode_support import ROOT, report, run_node

pytestmark = [pytest.mark.editor, pytest.mark.slow]


def _python(version: str) -> str | None:
    for candidate in sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python{version}"))):
        out = subprocess.run(
            [candidate, "-c", "import sys, venv, ensurepip; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if out.returncode == 0 and out.stdout.strip() == version:
            return candidate
    return None


def _first_run_lines() -> list[str]:
    section = (ROOT / "README.md").read_text().split("## First run", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block
    return [line.split("  #", 1)[0].rstrip() for line in block.group(1).splitlines() if line.strip()]


@pytest.mark.parametrize("version", ["3.11", "3.12", "3.13"])
def test_readme_first_run_in_vscode_with_each_python_first_on_path(vscode_tools, vsix, tmp_path: Path, version: str):
    python = _python(version)
    if python is None:
        pytest.skip(f"no pyenv Python {version} on this machine")
    lines = _first_run_lines()
    examples = [line for line in lines if line.startswith("fabric-lsp examples ")]
    code = [line for line in lines if re.search(r"\scode\s", line)]
    assert len(examples) == 1 and len(code) == 1, lines
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PI_", "FABRIC_"))}
    env.update(HOME=str(home), PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}")
    out = subprocess.run(
        ["bash", "-euc", examples[0]], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stdout + out.stderr
    # `PI_CODING_AGENT_DIR=<dir> code <folder>`, `~` as the shell expands it
    m = re.fullmatch(r"PI_CODING_AGENT_DIR=(\S+)\s+code\s+(\S+)", code[0])
    assert m, code[0]
    agent, folder = (a.replace("~", str(home), 1) if a.startswith("~") else a for a in m.groups())
    assert (Path(folder) / "orbit" / "tle.py").is_file()
    proc = run_node(
        vscode_tools,
        [
            "test/e2e/firstrun.mjs",
            "--vsix",
            str(vsix),
            "--code-server",
            vscode_tools["codeServer"],
            "--chromium",
            vscode_tools["chromium"],
            "--python",
            python,
            "--agent-dir",
            agent,
            "--folder",
            folder,
            *(
                ["--screenshots", os.environ["FABRIC_VSCODE_SCREENSHOTS"]]
                if os.environ.get("FABRIC_VSCODE_SCREENSHOTS")
                else []
            ),
        ],
        600,
    )
    assert proc.returncode == 0, report(proc)
    assert " 0 failed" in proc.stdout, report(proc)
    for name in (
        "the bundled server installs offline with the Python first on PATH",
        "orbit/tle.py of the examples' project shows the file-history CodeLens",
        "Recall… is answered by the bundled server",
    ):
        assert f"ok - {name}" in proc.stdout, report(proc)
