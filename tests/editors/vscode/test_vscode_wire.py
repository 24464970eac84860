"""The extension's wire test (node --test + vscode-jsonrpc against the real server)."""

from __future__ import annotations

from vscode_support import report, run_node


def test_wire_against_real_server(vscode_tools):
    proc = run_node(vscode_tools, ["--test", "--test-reporter=spec", "test/wire.test.mjs"], 180)
    assert proc.returncode == 0, report(proc)
    assert "fail 0" in proc.stdout, report(proc)
