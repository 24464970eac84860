"""Every CLI error goes to stderr, names the command and what is wrong, and exits with
the documented code (docs/cli.md); nothing is presented as "no matches"."""

from __future__ import annotations

import atexit
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from fabric_lsp.examples import copy_example_agent_dir

# a copy: the CLI writes its index under the agent dir, never into the package
_TMP = Path(tempfile.mkdtemp(prefix="fabric-cli-errors-"))
atexit.register(shutil.rmtree, _TMP, True)  # removed when the test run ends
EXAMPLES = str(copy_example_agent_dir(_TMP / "agent"))


def run(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fabric_lsp", *args], capture_output=True, text=True, timeout=60, cwd=cwd
    )


@pytest.fixture(scope="module")
def not_pi(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("notpi") / "notes.jsonl"
    path.write_text(json.dumps({"a": 1}) + "\n")
    return str(path)


CASES = [
    # (argv, exit code, words stderr must hold)
    (
        ["recall", "([", "--mode", "regex", "--scope", "global", "--agent-dir", EXAMPLES],
        2,
        ["fabric-lsp recall", "invalid_regex"],
    ),
    (
        ["recall", "x", "--agent-dir", "/nonexistent/agent"],
        2,
        ["fabric-lsp recall", "/nonexistent/agent", "does not exist"],
    ),
    (["sessions", "--agent-dir", "/nonexistent/agent"], 2, ["fabric-lsp sessions", "does not exist"]),
    (["recall", "x", "--page-size", "0", "--agent-dir", EXAMPLES], 2, ["pageSize", ">= 1"]),
    (["recall", "x", "--page-size", "-5", "--agent-dir", EXAMPLES], 2, ["pageSize", ">= 1"]),
    (["recall", "x", "--page-size", "1000000000", "--agent-dir", EXAMPLES], 2, ["pageSize", "<= 100"]),
    (["sessions", "--page-size", "201", "--agent-dir", EXAMPLES], 2, ["pageSize", "<= 200"]),
    (["expand", "19db38cf", "--agent-dir", EXAMPLES], 2, ["fabric-lsp expand", "--session"]),
    (["preview", "no-such-session", "--agent-dir", EXAMPLES], 2, ["fabric-lsp preview", "session_not_found"]),
    (["preview", "--ratio", "2", "01a184f4", "--agent-dir", EXAMPLES], 2, ["targetContextRatio", "<= 0.85"]),
    (
        ["branch-summary", "01a184f4", "--to", "nope0000", "--agent-dir", EXAMPLES],
        2,
        ["fabric-lsp branch-summary", "entry_not_found"],
    ),
    (["tree", "01a184f4", "--to", "nope0000", "--agent-dir", EXAMPLES], 2, ["fabric-lsp tree", "entry_not_found"]),
    (["compact", "no-such-session", "--agent-dir", EXAMPLES], 2, ["fabric-lsp compact", "not found"]),
]


@pytest.mark.parametrize("argv,code,words", CASES, ids=[" ".join(c[0][:2]) + f"-{i}" for i, c in enumerate(CASES)])
def test_cli_error_table(argv, code, words):
    out = run(*argv)
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    for word in words:
        assert word in out.stderr, (word, out.stderr)
    assert "Traceback" not in out.stderr


def test_a_file_that_is_no_pi_session_is_an_error(not_pi):
    out = run("recall", "x", "--scope", f"session:{not_pi}", "--agent-dir", EXAMPLES)
    assert out.returncode == 2 and "not a Pi session file" in out.stderr, out.stderr
    out = run("preview", not_pi, "--agent-dir", EXAMPLES)
    # exit 2 (docs/cli.md: a file that is not a Pi session is invalid input), refused before it is read
    assert out.returncode == 2 and not out.stdout and not_pi in out.stderr and "not a Pi session" in out.stderr


def test_an_empty_answer_says_what_it_searched_and_what_would_search_more(tmp_path):
    out = run("recall", "zzzqqqnomatch", "--agent-dir", EXAMPLES, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "in 0 sessions of scope session" in out.stdout and "--scope global searches 7 sessions" in out.stdout


def test_truncation_is_information_not_a_failure():
    out = run("recall", "test", "--scope", "global", "--agent-dir", EXAMPLES, "--page-size", "1")
    assert out.returncode == 0
    assert "coverage incomplete" not in out.stdout + out.stderr
    assert "not indexed" in out.stdout and "expand" in out.stdout
