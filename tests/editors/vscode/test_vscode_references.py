"""The extension's reference parser (src/references.ts, and Expand Entry…'s input through
it) against the shared table of cases tests/fixtures/references.json, in node. Needs only
node >= 22.18 (type stripping), not code-server: the node of scripts/deps/vscode.sh when it
is installed, else .tools/node22, else node on $PATH."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from vscode_support import EXTENSION, ROOT, SETUP, TOOLS_ENV, report


def _version(node: str) -> tuple[int, ...]:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
        return tuple(int(x) for x in out.lstrip("v").split("."))
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return ()


def node_binary() -> str:
    candidates = []
    if TOOLS_ENV.is_file():
        candidates.append(json.loads(TOOLS_ENV.read_text()).get("node", ""))
    candidates.append(str(ROOT / ".tools" / "node22" / "node_modules" / "node" / "bin" / "node"))
    candidates.append(shutil.which("node") or "")
    for node in candidates:
        if node and os.access(node, os.X_OK) and _version(node) >= (22, 18):
            return node
    pytest.fail(f"node >= 22.18 missing (tried {[c for c in candidates if c]}): run `{SETUP}`", pytrace=False)


def test_reference_grammar_table_in_node() -> None:
    proc = subprocess.run(
        [
            node_binary(),
            "--disable-warning=MODULE_TYPELESS_PACKAGE_JSON",
            "--test",
            "--test-reporter=spec",
            "test/references.test.mjs",
        ],
        cwd=EXTENSION,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, report(proc)
    assert "fail 0" in proc.stdout, report(proc)
    cases = json.loads((ROOT / "tests" / "fixtures" / "references.json").read_text(encoding="utf-8"))
    assert f"pass {len(cases['parse']) + len(cases['find']) + 4}" in proc.stdout, report(proc)
