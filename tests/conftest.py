from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

from tests.support.examples import DEV_DEFAULT

FIXTURES = Path(__file__).parent / "fixtures"
REAL_SESSIONS = FIXTURES / "real-sessions"
PROJECT_NODE = Path(__file__).resolve().parents[1] / ".tools" / "node22" / "node_modules" / ".bin" / "node"

# User regexes run in node (fabric_lsp/engine/memory/regex_worker.py). CI installs node
# into .tools (scripts/deps/realpi.sh) without putting it on PATH: point the engine, and
# every server process the tests start (they inherit this environment), at it.
if not os.environ.get("FABRIC_LSP_NODE") and shutil.which("node") is None and PROJECT_NODE.exists():
    os.environ["FABRIC_LSP_NODE"] = str(PROJECT_NODE)


@pytest.fixture
def real_sessions() -> Path:
    return REAL_SESSIONS


# ---- the fast loop (CONTRIBUTING.md) --------------------------------------------------------
# Every test gets the markers of what it drives, by where it lives, so test files need not.
# Plain `pytest` (no paths, no -m) is the fast loop: it deselects the editor, Pi, PostgreSQL
# and slow tests, runs on 2 workers (pytest-xdist) and uses the Hypothesis `dev` profile.
# `pytest PATH...` runs what it names (all markers); FABRIC_ALL_TESTS=1 — set by scripts/test,
# hence .ci/run — runs everything with the `ci` profile (the full example counts).
_BY_DIR = {"editors": "editor", "realpi": "realpi", "team": "postgres"}
# whole files that take tens of seconds each and guard install, crash and load paths
_SLOW_FILES = frozenset(
    {
        "test_install.py",
        "test_crash_safety.py",
        "test_backpressure.py",
        "test_first_run.py",
        "test_fast_loop.py",  # (collects the whole tree three times)
    }
)
# single tests of about ten seconds each (measured with --durations under -n 2)
_SLOW_TESTS = frozenset(
    {
        "reliability/test_concurrency.py::test_concurrent_requests_with_cancellations_equal_serial_results",
        "reliability/test_framing_lifecycle.py::test_a_too_large_length_still_gets_an_answer",
        "reliability/test_local_socket.py::test_the_cli_is_answered_by_the_server_byte_for_byte",
        "e2e/test_lsp_oversize_lines.py::test_a_line_over_the_limit_is_read_cut_and_named",
    }
)
FAST_MARKEXPR = "not editor and not realpi and not postgres and not slow"
FAST_WORKERS = 2
ALL_TESTS = os.environ.get("FABRIC_ALL_TESTS") == "1"
_FAST = pytest.StashKey[bool]()

# Hypothesis profiles: `ci` is today's settings (what Hypothesis loaded by itself: its
# defaults, or its own "ci" profile on a machine that says it is CI), `dev` the same with few
# examples; tests.support.examples.profile_examples(n) scales a test's own max_examples the
# same way. FABRIC_HYPOTHESIS_PROFILE (or pytest's --hypothesis-profile) picks one explicitly.
_TODAY = hypothesis_settings.get_profile(hypothesis_settings.get_current_profile_name())
hypothesis_settings.register_profile("ci", parent=_TODAY)
hypothesis_settings.register_profile("dev", parent=_TODAY, max_examples=DEV_DEFAULT)
hypothesis_settings.load_profile(os.environ.get("FABRIC_HYPOTHESIS_PROFILE") or ("ci" if ALL_TESTS else "dev"))


def _is_plain_run(config: pytest.Config) -> bool:
    """`pytest` with no paths and no -m (xdist workers re-read the same command line)."""
    return not ALL_TESTS and config.args_source == pytest.Config.ArgsSource.TESTPATHS and not config.option.markexpr


@pytest.hookimpl(tryfirst=True)  # before xdist's own pytest_cmdline_main reads -n
def pytest_cmdline_main(config: pytest.Config) -> None:
    fast = _is_plain_run(config)
    config.stash[_FAST] = fast
    if not fast:
        return
    config.option.markexpr = FAST_MARKEXPR
    is_worker = hasattr(config, "workerinput")
    if (
        not is_worker
        and config.pluginmanager.hasplugin("xdist")
        and config.option.numprocesses is None
        and not config.option.usepdb
        and not config.option.trace
    ):
        config.option.numprocesses = FAST_WORKERS
        if config.option.dist == "no":
            config.option.dist = "worksteal"  # long server tests do not pile up on one worker


def pytest_report_header(config: pytest.Config) -> list[str]:
    profile = f"hypothesis profile {hypothesis_settings.get_current_profile_name()}"
    if config.stash.get(_FAST, False):
        return [
            f'fabric fast loop: -m "{FAST_MARKEXPR}", {profile}; '
            "everything: scripts/test (or FABRIC_ALL_TESTS=1 pytest)"
        ]
    return [f"fabric: {profile}"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(__file__).parent
    for item in items:
        try:
            parts = Path(str(item.fspath)).resolve().relative_to(root).parts
        except ValueError:
            continue
        if parts and parts[0] in _BY_DIR:
            item.add_marker(getattr(pytest.mark, _BY_DIR[parts[0]]))
        if parts and (
            parts[-1] in _SLOW_FILES or "/".join(parts) + "::" + getattr(item, "originalname", item.name) in _SLOW_TESTS
        ):
            item.add_marker(pytest.mark.slow)
