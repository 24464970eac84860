"""The contributor's loop (CONTRIBUTING.md), checked through real pytest runs of this tree:
plain `pytest` leaves out the editor, Pi, PostgreSQL and slow tests and runs few Hypothesis
examples; a named path runs what it names; FABRIC_ALL_TESTS=1 (scripts/test, .ci/run) runs
everything with the full example counts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# a property whose own count is 200 (tests/engine/session/test_tokens.py)
PROPERTY = "tests/engine/session/test_tokens.py::test_stringify_round_trips_and_agrees_with_compact_json"


def _pytest(*args: str, **env: str) -> str:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("FABRIC_ALL_TESTS", "FABRIC_HYPOTHESIS_PROFILE", "PYTEST_ADDOPTS")
        and not k.startswith("PYTEST_XDIST")
    }
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def _collected(out: str) -> set[str]:
    return {line.split("::")[0].split("/")[1] for line in out.splitlines() if line.startswith("tests/")}


def test_plain_pytest_runs_the_engine_and_server_tests_only():
    out = _pytest("--co", "-q")
    dirs = _collected(out)
    assert {"engine", "e2e", "reliability"} <= dirs
    assert not dirs & {"editors", "realpi", "team"}, dirs
    assert "test_install.py" not in out and "test_crash_safety.py" not in out
    assert re.search(r"\d+/\d+ tests collected \(\d+ deselected\)", out)
    assert "fabric fast loop" in _pytest("--co")  # the header says what was left out


def test_a_named_path_and_the_whole_suite_run_everything():
    assert "tests/editors/neovim/" in _pytest("--co", "-q", "tests/editors/neovim")
    out = _pytest("--co", "-q", FABRIC_ALL_TESTS="1")
    assert {"editors", "realpi", "team", "engine", "e2e"} <= _collected(out)
    assert "deselected" not in out and "test_install.py" in out


def _examples_run(**env: str) -> int:
    out = _pytest("-q", "--hypothesis-show-statistics", PROPERTY, **env)
    found = re.search(r"Stopped because settings\.max_examples=(\d+)", out)
    assert found, out
    return int(found.group(1))


def test_hypothesis_runs_a_tenth_of_the_examples_in_the_fast_loop_and_all_in_ci():
    assert _examples_run() == 20
    assert _examples_run(FABRIC_ALL_TESTS="1") == 200
    assert _examples_run(FABRIC_HYPOTHESIS_PROFILE="ci") == 200
