"""The extension's node tests: the wire test (node --test + vscode-jsonrpc against the real
server) and the unit tests of its pure modules."""

from __future__ import annotations

from vscode_support import report, run_node


def test_wire_against_real_server(vscode_tools):
    proc = run_node(vscode_tools, ["--test", "--test-reporter=spec", "test/wire.test.mjs"], 180)
    assert proc.returncode == 0, report(proc)
    assert "fail 0" in proc.stdout, report(proc)


def test_unit_tests_of_the_pure_modules(vscode_tools):
    proc = run_node(
        vscode_tools,
        ["--disable-warning=MODULE_TYPELESS_PACKAGE_JSON", "--test", "--test-reporter=spec", "test/unit.test.mjs"],
        120,
    )
    assert proc.returncode == 0, report(proc)
    assert "fail 0" in proc.stdout, report(proc)
