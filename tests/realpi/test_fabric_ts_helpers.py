"""The Pi extension's command helpers (editors/pi/extensions/fabric.ts), run by node 22
on the file itself: which program runs fabric-lsp, with which arguments, and where."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

import pytest
from realpi_kit import NODE, ROOT

pytestmark = pytest.mark.realpi

FABRIC_TS = ROOT / "editors" / "pi" / "extensions" / "fabric.ts"
HERE = Path(__file__).resolve().parent


def call(cases: list[tuple[str, list]], *, cwd: Path) -> list[dict]:
    assert NODE.exists(), "node 22 is installed by scripts/deps/realpi.sh"
    out = subprocess.run(
        [str(NODE), "--experimental-strip-types", "--no-warnings", str(HERE / "fabric_ts_helpers.mjs"), str(FABRIC_TS)],
        input=json.dumps([{"fn": f, "args": a} for f, a in cases]),
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def executable(path: Path, mode: int = stat.S_IRWXU) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(mode)
    return path


def test_python_running_a_module_is_isolated_and_nothing_else_changes(tmp_path):
    py = "/opt/venv/bin/python"
    cases = [
        [py, "-m", "fabric_lsp"],  # what fabric-lsp pi install wrote before -I
        [py, "-I", "-m", "fabric_lsp"],
        [py, "-E", "-m", "fabric_lsp"],
        [py, "-X", "utf8", "-m", "fabric_lsp"],
        ["/usr/bin/python3.12", "-m", "fabric_lsp"],
        ["/usr/bin/pypy3", "-m", "fabric_lsp"],
        [py, "-IB", "-m", "fabric_lsp"],
        [py, "/opt/tools/run.py"],  # a script: its own directory, never the cwd, is on sys.path
        [py, "-c", "import fabric_lsp"],
        ["/opt/venv/bin/fabric-lsp"],
        ["/opt/bin/not-python", "-m", "x"],
    ]
    got = [r["ok"] for r in call([("isolatePython", [argv]) for argv in cases], cwd=tmp_path)]
    assert got == [
        [py, "-I", "-m", "fabric_lsp"],
        [py, "-I", "-m", "fabric_lsp"],
        [py, "-I", "-E", "-m", "fabric_lsp"],
        [py, "-I", "-X", "utf8", "-m", "fabric_lsp"],
        ["/usr/bin/python3.12", "-I", "-m", "fabric_lsp"],
        ["/usr/bin/pypy3", "-I", "-m", "fabric_lsp"],
        [py, "-IB", "-m", "fabric_lsp"],
        [py, "/opt/tools/run.py"],
        [py, "-c", "import fabric_lsp"],
        ["/opt/venv/bin/fabric-lsp"],
        ["/opt/bin/not-python", "-m", "x"],
    ]


def test_programs_resolve_to_absolute_paths_without_the_project_dir(tmp_path):
    proj = tmp_path / "proj"
    bin_dir = tmp_path / "bin"
    executable(proj / "fabric-lsp")  # the project's own: never chosen
    executable(proj / "sub" / "fabric-lsp")
    real = executable(bin_dir / "fabric-lsp")
    executable(tmp_path / "noexec" / "fabric-lsp", stat.S_IRUSR | stat.S_IWUSR)
    results = call(
        [
            ("resolveProgram", ["fabric-lsp", "T", f".::sub:{tmp_path / 'noexec'}:{bin_dir}"]),
            ("resolveProgram", ["fabric-lsp", "T", ".::sub"]),
            ("resolveProgram", ["./fabric-lsp", "T", str(bin_dir)]),
            ("resolveProgram", ["sub/fabric-lsp", "T", str(bin_dir)]),
            ("resolveProgram", [str(real), "T", ""]),
            ("resolveCommand", [["python3", "-m", "fabric_lsp"], "FABRIC_LSP_COMMAND"]),
            ("resolveCommand", [[], "fabric-lsp.json"]),
            ("splitCommandLine", ["'/opt/my venv/bin/python' -I -m fabric_lsp"]),
            ("spawnDir", []),
        ],
        cwd=proj,
    )
    assert results[0] == {"ok": str(real)}
    assert "not in any absolute PATH directory" in results[1]["error"]
    assert "relative path" in results[2]["error"] and "absolute path" in results[2]["error"]
    assert "relative path" in results[3]["error"]
    assert results[4] == {"ok": str(real)}
    # PATH as the test runs: the first absolute python3 on it, isolated
    assert results[5]["ok"][1:] == ["-I", "-m", "fabric_lsp"] and results[5]["ok"][0].startswith("/")
    assert "empty" in results[6]["error"]
    assert results[7] == {"ok": ["/opt/my venv/bin/python", "-I", "-m", "fabric_lsp"]}
    assert results[8] == {"ok": str(FABRIC_TS.parent)}  # never the cwd (the project)
