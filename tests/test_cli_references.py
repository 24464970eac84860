"""`fabric-lsp expand` takes every reference form the UIs show (docs/protocol.md,
"Entry references"), resolved by the one grammar (engine/references.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fabric_lsp.examples import copy_example_agent_dir

SESSION = "01a184f4-f0ec-7323-b6a1-d54253189157"
ENTRY = "19db38cf"


import atexit
import shutil
import tempfile

# a copy: the CLI writes its index under the agent dir, never into the package
_TMP = Path(tempfile.mkdtemp(prefix="fabric-cli-refs-"))
atexit.register(shutil.rmtree, _TMP, True)  # removed when the test run ends
AGENT = copy_example_agent_dir(_TMP / "agent")


def expand(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fabric_lsp", "expand", *args, "--agent-dir", str(AGENT), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_every_reference_form_expands_the_same_entry():
    forms = [
        [f"pi-entry:{SESSION}/{ENTRY}"],
        [f"{SESSION}/{ENTRY}"],
        [f"{SESSION[:8]}/{ENTRY}"],
        [ENTRY, "--session", SESSION[:8]],
        [SESSION, "--entry-ids", ENTRY],
    ]
    results = []
    for form in forms:
        out = expand(*form)
        assert out.returncode == 0, (form, out.stderr)
        results.append(json.loads(out.stdout))
    assert all(r == results[0] for r in results)
    assert [e["entryId"] for e in results[0]["expanded"]] == [ENTRY]


def test_a_bare_entry_without_a_session_is_an_error_that_says_what_to_add():
    out = expand(ENTRY)
    assert out.returncode == 2 and "--session" in out.stderr and not out.stdout, out.stderr
    out = expand("not a reference at all")
    assert out.returncode == 2 and "reference" in out.stderr, out.stderr
