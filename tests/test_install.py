"""`pip install <checkout>` into a clean virtual environment, then the first-run commands
from it: what README.md promises a new user; the universal wheel (`FABRIC_LSP_PURE=1 pip
wheel`, py3-none-any); `pipx install` / `uv tool install` of the checkout and of that wheel
on each Python 3.11-3.13 on this machine; and a quiet `scripts/venv` on a fresh copy of the
checkout. Slow (venvs and wheel builds, ~3 min in all), run in CI."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

# Copy only what a checkout's package build reads; building in the checkout itself would
# leave build/ behind (and race with other work in the tree).
_IGNORE = shutil.ignore_patterns(
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
    "tests",
    "bench",
    "editors",
    "*.so",
)


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


def _python(version: str) -> str | None:
    """An interpreter of this version on the machine: pyenv's, else the system's."""
    found = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python{version}")))
    found += [p for p in (f"/usr/bin/python{version}", f"/usr/local/bin/python{version}") if os.path.exists(p)]
    for candidate in found:
        out = _run([candidate, "-c", "import sys, venv, ensurepip; print('%d.%d' % sys.version_info[:2])"])
        if out.returncode == 0 and out.stdout.strip() == version:
            return candidate
    return None


PYTHONS = ["3.11", "3.12", "3.13"]


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
    preview = _run(
        [str(installed / "fabric-lsp"), "preview", "--json", "01a18ac0"],
        env={**env, "PI_CODING_AGENT_DIR": str(agent)},
        cwd=tmp_path,
    )
    assert preview.returncode == 0, preview.stderr
    assert json.loads(preview.stdout)["outcome"] == "compacted"


def test_the_wheel_carries_the_license_and_the_examples(installed: Path) -> None:
    site = next(installed.parent.glob("lib/python3*/site-packages"))
    dist = next(site.glob("fabric_lsp-*.dist-info"))
    licenses = list(dist.rglob("LICENSE"))
    assert licenses and "MIT License" in licenses[0].read_text()
    assert len(list((site / "fabric_lsp" / "examples" / "agent" / "sessions").rglob("*.jsonl"))) == 7
    size = sum(
        p.stat().st_size for p in (site / "fabric_lsp").rglob("*") if p.is_file() and "__pycache__" not in p.parts
    )
    assert size < 4_000_000, f"installed package is {size} bytes"


def test_pi_install_from_a_clean_venv_names_that_interpreter(installed: Path, tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    out = _run(
        [str(installed / "fabric-lsp"), "pi", "install", "--agent-dir", str(agent)],
        env=_clean_env(tmp_path),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    target = agent / "extensions" / "fabric-lsp"
    assert (target / "extensions" / "fabric.ts").read_bytes() == (
        ROOT / "editors" / "pi" / "extensions" / "fabric.ts"
    ).read_bytes()
    assert json.loads((target / "package.json").read_text())["pi"] == {"extensions": ["./extensions/fabric.ts"]}
    command = json.loads((target / "fabric-lsp.json").read_text())["command"]
    assert command[0] == str(installed / "python") and command[1:] == ["-I", "-m", "fabric_lsp"]


@pytest.fixture(scope="module")
def tool_installers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway venv holding pipx and uv (from PyPI), as a user would have them."""
    env_dir = tmp_path_factory.mktemp("tools") / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    out = _run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q", "pipx", "uv"]
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return env_dir / "bin"


@pytest.fixture(scope="module")
def universal_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`FABRIC_LSP_PURE=1 pip wheel --no-deps` of a copy of the checkout (README, "Install")."""
    tmp = tmp_path_factory.mktemp("wheel")
    checkout = tmp / "checkout"
    shutil.copytree(ROOT, checkout, ignore=_IGNORE)
    out = _run(
        [
            sys_python(),
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "--disable-pip-version-check",
            "-w",
            str(tmp / "dist"),
            str(checkout),
        ],
        env={**os.environ, "FABRIC_LSP_PURE": "1"},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    wheels = list((tmp / "dist").glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def sys_python() -> str:
    import sys

    return sys.executable


def test_the_universal_wheel_is_pure_python(universal_wheel: Path) -> None:
    from fabric_lsp import __version__

    assert universal_wheel.name == f"fabric_lsp-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(universal_wheel) as z:
        names = z.namelist()
        wheel_meta = z.read(f"fabric_lsp-{__version__}.dist-info/WHEEL").decode()
    assert "Root-Is-Purelib: true" in wheel_meta and "Tag: py3-none-any" in wheel_meta
    assert not [n for n in names if n.endswith((".so", ".pyd", ".pyc")) or "__pycache__" in n], names
    assert "fabric_lsp/engine/_native.c" not in names
    assert len([n for n in names if n.startswith("fabric_lsp/examples/agent/sessions/")]) == 7


def _tool_install(
    tool: str, tool_installers: Path, spec: str, python: str, tmp_path: Path
) -> tuple[Path, dict[str, str]]:
    env = _clean_env(tmp_path)
    bin_dir = tmp_path / "bin"
    if tool == "pipx":
        env.update(PIPX_HOME=str(tmp_path / "pipx"), PIPX_BIN_DIR=str(bin_dir), PIPX_MAN_DIR=str(tmp_path / "man"))
        argv = [str(tool_installers / "pipx"), "install", "--python", python, spec]
    else:
        env.update(
            UV_TOOL_DIR=str(tmp_path / "uv-tools"),
            UV_TOOL_BIN_DIR=str(bin_dir),
            UV_CACHE_DIR=str(tmp_path / "uv-cache"),
            UV_PYTHON_DOWNLOADS="never",
        )
        argv = [str(tool_installers / "uv"), "tool", "install", "--python", python, spec]
    out = _run(argv, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    return bin_dir / "fabric-lsp", env


def _check_tool(exe: Path, version: str, env: dict[str, str], tmp_path: Path) -> None:
    out = _run([str(exe), "--version"], env=env, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.startswith("fabric-lsp "), out.stderr
    interpreter = exe.read_text().splitlines()[0].removeprefix("#!").strip().split()[0]
    ran = _run([interpreter, "-I", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], cwd=tmp_path)
    assert ran.stdout.strip() == version, (interpreter, ran.stdout, ran.stderr)
    agent = tmp_path / "agent"
    examples = _run([str(exe), "examples", str(agent)], env=env, cwd=tmp_path)
    assert examples.returncode == 0 and (agent / "projects" / "orbit" / "orbit" / "tle.py").is_file(), examples.stderr
    recall = _run(
        [str(exe), "recall", "--json", "--agent-dir", str(agent), "--scope", "global", "convert_anomaly"],
        env=env,
        cwd=tmp_path,
    )
    assert recall.returncode == 0 and json.loads(recall.stdout)["items"], recall.stderr


@pytest.mark.parametrize("version", PYTHONS)
@pytest.mark.parametrize("tool", ["pipx", "uv"])
def test_pipx_and_uv_tool_install_of_the_checkout(
    tool: str, version: str, tool_installers: Path, tmp_path: Path
) -> None:
    """README: `pipx install <checkout>` / `uv tool install <checkout>` give a working
    `fabric-lsp` in its own environment, on each Python here."""
    python = _python(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine")
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT, checkout, ignore=_IGNORE)
    exe, env = _tool_install(tool, tool_installers, str(checkout), python, tmp_path)
    _check_tool(exe, version, env, tmp_path)


@pytest.mark.parametrize("version", PYTHONS)
@pytest.mark.parametrize("tool", ["pipx", "uv"])
def test_pipx_and_uv_tool_install_of_the_universal_wheel(
    tool: str, version: str, tool_installers: Path, universal_wheel: Path, tmp_path: Path
) -> None:
    python = _python(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine")
    exe, env = _tool_install(tool, tool_installers, str(universal_wheel), python, tmp_path)
    _check_tool(exe, version, env, tmp_path)
    probe = "import importlib.util as u; print(u.find_spec('fabric_lsp.engine._native') is None)"
    interpreter = exe.read_text().splitlines()[0].removeprefix("#!").strip().split()[0]
    assert _run([interpreter, "-I", "-c", probe], cwd=tmp_path).stdout.strip() == "True"  # the pure-Python tokenizer


def test_scripts_venv_is_quiet_on_a_fresh_copy(tmp_path: Path) -> None:
    """`scripts/venv` on a fresh copy of the checkout: one line per step on stderr, nothing
    of pip's or setuptools' (no "Editable installation" block); a second run prints nothing."""
    python = next((p for p in (_python(v) for v in reversed(PYTHONS)) if p), None)
    assert python is not None
    checkout = tmp_path / "checkout"
    shutil.copytree(
        ROOT,
        checkout,
        ignore=shutil.ignore_patterns(
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
        ),
    )
    env = {**_clean_env(tmp_path), "PYTHON": python}
    first = _run([str(checkout / "scripts" / "venv")], env=env, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout == ""
    lines = first.stderr.splitlines()
    assert lines and all(line.startswith("scripts/venv: ") for line in lines), first.stderr
    assert len(lines) <= 3, first.stderr
    version = _run([str(checkout / ".venv" / "bin" / "fabric-lsp"), "--version"], env=env, cwd=tmp_path)
    assert version.returncode == 0, version.stderr
    again = _run([str(checkout / "scripts" / "venv")], env=env, cwd=tmp_path)
    assert again.returncode == 0 and again.stdout == "" and again.stderr == "", again.stderr
