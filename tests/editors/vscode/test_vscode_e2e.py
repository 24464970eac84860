"""End to end in real VS Code: the packaged .vsix in code-server, driven by headless
chromium through playwright-core (editors/vscode/test/e2e/run.mjs)."""

from __future__ import annotations

import os

import pytest

from vscode_support import report, run_node


@pytest.mark.editor
def test_palette_commands_in_real_vscode(vscode_tools, vsix, tmp_path):
    args = [
        "test/e2e/run.mjs",
        "--vsix", str(vsix),
        "--code-server", vscode_tools["codeServer"],
        "--chromium", vscode_tools["chromium"],
        "--screenshots", os.environ.get("FABRIC_VSCODE_SCREENSHOTS", str(tmp_path / "shots")),
    ]
    proc = run_node(vscode_tools, args, 420)
    assert proc.returncode == 0, report(proc)
    assert " 0 failed" in proc.stdout, report(proc)
