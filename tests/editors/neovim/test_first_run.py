"""README.md's first-run block, run as written on a fresh copy of the checkout, in real
Neovim 0.11: `pipx install .`, `fabric-lsp examples ~/fabric-examples`, then
`PI_CODING_AGENT_DIR=~/fabric-examples nvim ~/fabric-examples/projects/orbit/orbit/tle.py`
shows the file-history CodeLens on that source file of the examples' project.

HOME is a fresh directory; pipx comes from PyPI into a throwaway venv (as a user has it);
`~/.local/bin` (pipx's default) is on PATH as `pipx ensurepath` puts it. `nvim` on PATH is
a two-line wrapper around the real Neovim of scripts/deps/neovim.sh that plays a user who
installed the plugin (editors/neovim of the copy on the runtimepath) and, after the file
has opened, runs a check that waits (bounded) for the lens and quits. The block's VS Code
line is the one line not run here (tests/editors/vscode).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import venv
from pathlib import Path

import pytest
from test_neovim import ROOT, nvim_binary

pytestmark = [pytest.mark.editor, pytest.mark.slow]

IGNORE = shutil.ignore_patterns(
    ".git",
    ".venv",
    ".tools",
    "node_modules",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".pytest_cache",
    ".hypothesis",
    "*.so",
    "server",
)

CHECK = r"""
local buf = vim.api.nvim_get_current_buf()
local name = vim.api.nvim_buf_get_name(buf)
local function say(s) io.stdout:write(s .. '\n'); io.stdout:flush() end
say('buffer: ' .. name)
if not vim.wait(60000, function() return #vim.lsp.get_clients({ name = 'fabric', bufnr = buf }) == 1 end, 50) then
  say('not ok - no fabric client on the buffer')
  vim.cmd('cquit 1')
end
say('ok - the fabric client attached')
local lens
if not vim.wait(60000, function()
  local lenses = vim.lsp.codelens.get(buf)
  if #lenses > 0 and lenses[1].command ~= nil then lens = lenses[1]; return true end
  return false
end, 50) then
  say('not ok - no resolved CodeLens')
  vim.cmd('cquit 1')
end
say(('lens: line %d: %s (%s)'):format(lens.range.start.line, lens.command.title, lens.command.command))
vim.cmd('qa!')
"""


def first_run_block(readme: str) -> list[str]:
    """The shell lines of README.md's "First run" block (the one with `fabric-lsp examples`)."""
    section = readme.split("## First run", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "no ```sh block under ## First run"
    lines = [line.split("  #", 1)[0].rstrip() for line in block.group(1).splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    assert any(line.startswith("fabric-lsp examples ") for line in lines), lines
    return lines


@pytest.fixture(scope="module")
def pipx_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env_dir = tmp_path_factory.mktemp("pipx") / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    out = subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", "pipx"],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return env_dir / "bin"


def test_readme_first_run_shows_the_codelens_in_neovim(pipx_bin: Path, tmp_path: Path) -> None:
    clone = tmp_path / "fabric-lsp"
    shutil.copytree(ROOT, clone, ignore=IGNORE)
    lines = first_run_block((clone / "README.md").read_text())
    nvim_lines = [line for line in lines if re.search(r"(^|\s)nvim\s", line)]
    assert len(nvim_lines) == 1, lines
    run = [line for line in lines if not re.search(r"(^|\s)code\s", line)]
    home = tmp_path / "home"
    home.mkdir()
    wrapper_dir = tmp_path / "wrappers"
    wrapper_dir.mkdir()
    (tmp_path / "check.lua").write_text(CHECK)
    wrapper = wrapper_dir / "nvim"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"exec '{nvim_binary()}' --headless --clean -n -i NONE --cmd 'set rtp^={clone / 'editors' / 'neovim'}' "
        f"\"$@\" -c 'luafile {tmp_path / 'check.lua'}'\n"
    )
    wrapper.chmod(0o755)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PI_", "FABRIC_", "VIRTUAL_ENV", "PYTHON", "NVIM", "VIM", "XDG_", "PIPX_"))
    }
    env.update(
        HOME=str(home),
        PATH=os.pathsep.join(
            [str(wrapper_dir), str(pipx_bin), str(home / ".local" / "bin"), "/usr/local/bin", "/usr/bin", "/bin"]
        ),
    )
    script = "set -euo pipefail\n" + "\n".join(run) + "\n"
    proc = subprocess.run(
        ["bash", "-c", script],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    report = f"script:\n{script}\nexit {proc.returncode}\n--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-6000:]}"
    assert proc.returncode == 0, report
    assert "ok - the fabric client attached" in proc.stdout, report
    lens = re.search(r"^lens: line (\d+): (.*) \((.*)\)$", proc.stdout, re.M)
    assert lens, report
    assert lens.group(1) == "0" and lens.group(3) == "fabric.fileHistory", report
    # tle.py was read and edited in three of the orbit sessions
    assert re.match(r"Pi: 3 sessions", lens.group(2)), report
    assert f"buffer: {home}/fabric-examples/projects/orbit/orbit/tle.py" in proc.stdout, report
