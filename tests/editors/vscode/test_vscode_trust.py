"""Workspace trust in real VS Code (code-server + chromium, fresh profile): a cloned
repository whose .vscode/settings.json names fabric.indexDir, fabric.agentDir,
fabric.sessionDir, fabric.server.command and fabric.server.env reaches the server as
nothing in Restricted Mode, and as itself once trusted (editors/vscode/test/e2e/trust.mjs)."""

from __future__ import annotations

import os

import pytest
from vscode_support import report, run_node

CHECKS = (
    "untrusted: the repository opens in Restricted Mode and the server starts",
    "untrusted: the server received none of the workspace's directories",
    "untrusted: the workspace's server command never ran and its directories are untouched",
    "trusting the workspace (Workspace Trust editor) restarts the server with its settings",
    "trusted: the same workspace values reach the server",
)


@pytest.mark.editor
def test_untrusted_workspace_settings_never_reach_the_server(vscode_tools, vsix, tmp_path):
    args = [
        "test/e2e/trust.mjs",
        "--vsix",
        str(vsix),
        "--code-server",
        vscode_tools["codeServer"],
        "--chromium",
        vscode_tools["chromium"],
        "--screenshots",
        os.environ.get("FABRIC_VSCODE_SCREENSHOTS", str(tmp_path / "shots")),
    ]
    proc = run_node(vscode_tools, args, 420)
    assert proc.returncode == 0, report(proc)
    assert " 0 failed" in proc.stdout, report(proc)
    for name in CHECKS:
        assert f"ok - {name} (" in proc.stdout, f"check {name!r} did not pass\n{report(proc)}"
