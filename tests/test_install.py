"""`pip install <checkout>` into a clean virtual environment, then the first-run commands
from it: what README.md promises a new user (pipx and uv install the same package the
same way). Slow-ish (a venv and a wheel build, ~10 s), run in CI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

# Copy only what a checkout's package build reads; building in the checkout itself would
# leave build/ behind (and race with other work in the tree).
_IGNORE = shutil.ignore_patterns(".git", ".venv", ".tools", "node_modules", "build", "dist", "*.egg-info",
                                 "__pycache__", ".pytest_cache", ".hypothesis", "tests", "bench", "editors", "*.so")


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL, **kw)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("install")
    checkout = tmp / "checkout"
    shutil.copytree(ROOT, checkout, ignore=_IGNORE)
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    py = env_dir / "bin" / "python"
    out = _run([str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q", str(checkout)])
    assert out.returncode == 0, out.stdout + out.stderr
    return env_dir / "bin"


def _clean_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PI_", "FABRIC_", "VIRTUAL_ENV", "PYTHON"))}
    env["HOME"] = str(tmp / "home")
    return env


def test_version_from_a_clean_venv(installed: Path, tmp_path: Path) -> None:
    out = _run([str(installed / "fabric-lsp"), "--version"], env=_clean_env(tmp_path), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    from fabric_lsp import __version__

    assert out.stdout.strip() == f"fabric-lsp {__version__}"


def test_the_install_builds_the_tokenizer_accelerator(installed: Path, tmp_path: Path) -> None:
    """setup.py's optional C extension is compiled by the install (gcc and Python's headers
    are on this machine) and used by the tokenizer."""
    probe = "from fabric_lsp.engine.memory import tokenize; print(tokenize._native.__name__)"
    out = _run([str(installed / "python"), "-c", probe], env=_clean_env(tmp_path), cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "fabric_lsp.engine._native", out.stdout + out.stderr


def test_examples_and_preview_from_a_clean_venv(installed: Path, tmp_path: Path) -> None:
    env = _clean_env(tmp_path)
    agent = tmp_path / "agent"
    out = _run([str(installed / "fabric-lsp"), "examples", str(agent)], env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "Wrote 7 example sessions" in out.stdout
    preview = _run([str(installed / "fabric-lsp"), "preview", "--json", "01a18ac0"],
                   env={**env, "PI_CODING_AGENT_DIR": str(agent)}, cwd=tmp_path)
    assert preview.returncode == 0, preview.stderr
    assert json.loads(preview.stdout)["outcome"] == "compacted"


def test_the_wheel_carries_the_license_and_the_examples(installed: Path) -> None:
    site = next(installed.parent.glob("lib/python3*/site-packages"))
    dist = next(site.glob("fabric_lsp-*.dist-info"))
    licenses = list(dist.rglob("LICENSE"))
    assert licenses and "MIT License" in licenses[0].read_text()
    assert len(list((site / "fabric_lsp" / "examples" / "agent" / "sessions").rglob("*.jsonl"))) == 7
    size = sum(p.stat().st_size for p in (site / "fabric_lsp").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    assert size < 4_000_000, f"installed package is {size} bytes"


def test_pi_install_from_a_clean_venv_names_that_interpreter(installed: Path, tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    out = _run([str(installed / "fabric-lsp"), "pi", "install", "--agent-dir", str(agent)], env=_clean_env(tmp_path),
               cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    target = agent / "extensions" / "fabric-lsp"
    assert (target / "extensions" / "fabric.ts").read_bytes() == (ROOT / "editors" / "pi" / "extensions" / "fabric.ts").read_bytes()
    assert json.loads((target / "package.json").read_text())["pi"] == {"extensions": ["./extensions/fabric.ts"]}
    command = json.loads((target / "fabric-lsp.json").read_text())["command"]
    assert command[0] == str(installed / "python") and command[1:] == ["-I", "-m", "fabric_lsp"]


@pytest.fixture(scope="module")
def tool_installers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway venv holding pipx and uv (from PyPI), as a user would have them."""
    env_dir = tmp_path_factory.mktemp("tools") / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    out = _run([str(env_dir / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q",
                "pipx", "uv"])
    assert out.returncode == 0, out.stdout + out.stderr
    return env_dir / "bin"


@pytest.mark.parametrize("tool", ["pipx", "uv"])
def test_pipx_and_uv_tool_install_of_the_checkout(tool: str, tool_installers: Path, tmp_path: Path) -> None:
    """README: `pipx install <checkout>` / `uv tool install <checkout>` give a working
    `fabric-lsp` in its own environment."""
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT, checkout, ignore=_IGNORE)
    env = _clean_env(tmp_path)
    bin_dir = tmp_path / "bin"
    if tool == "pipx":
        env.update(PIPX_HOME=str(tmp_path / "pipx"), PIPX_BIN_DIR=str(bin_dir))
        argv = [str(tool_installers / "pipx"), "install", str(checkout)]
    else:
        env.update(UV_TOOL_DIR=str(tmp_path / "uv-tools"), UV_TOOL_BIN_DIR=str(bin_dir),
                   UV_CACHE_DIR=str(tmp_path / "uv-cache"))
        argv = [str(tool_installers / "uv"), "tool", "install", str(checkout)]
    out = _run(argv, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    version = _run([str(bin_dir / "fabric-lsp"), "--version"], env=env, cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("fabric-lsp "), version.stderr
    agent = tmp_path / "agent"
    examples = _run([str(bin_dir / "fabric-lsp"), "examples", str(agent)], env=env, cwd=tmp_path)
    assert examples.returncode == 0 and (agent / "sessions").is_dir(), examples.stderr
