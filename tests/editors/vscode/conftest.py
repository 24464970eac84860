"""Fixtures for the VS Code extension tests (helpers in vscode_support.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vscode_support import EXTENSION, TOOLS_ENV, fail_missing, report, run_node


@pytest.fixture(scope="session")
def vscode_tools() -> dict[str, str]:
    if not TOOLS_ENV.is_file():
        fail_missing(f"{TOOLS_ENV} missing")
    tools = json.loads(TOOLS_ENV.read_text())
    for key in ("node", "codeServer", "chromium"):
        if not Path(tools[key]).exists():
            fail_missing(f"{key} missing at {tools[key]}")
    if not (EXTENSION / "node_modules" / "vscode-jsonrpc").is_dir():
        fail_missing("editors/vscode/node_modules missing")
    return tools


@pytest.fixture(scope="session")
def vsix(vscode_tools: dict[str, str]) -> Path:
    """Type-check, then package the extension from the current sources the way the README
    says (`npm run package`: vsce runs `vscode:prepublish`, which bundles the extension and
    puts the fabric-lsp wheel and its wheelhouse into server/)."""
    modules = EXTENSION / "node_modules"
    check = run_node(vscode_tools, [str(modules / "typescript" / "bin" / "tsc"), "--noEmit", "-p", "."], 180)
    assert check.returncode == 0, f"tsc failed\n{report(check)}"
    out = EXTENSION / "dist" / "fabric-lsp.vsix"
    # `npm run package` is `vsce package …`; run that vsce with node 24 (vsce itself runs
    # `npm run vscode:prepublish`, with the npm on PATH).
    script = json.loads((EXTENSION / "package.json").read_text())["scripts"]["package"].split()
    assert script[:2] == ["vsce", "package"], script
    package = run_node(vscode_tools, [str(modules / "@vscode" / "vsce" / "vsce"), *script[1:]], 300)
    assert package.returncode == 0 and out.is_file(), f"npm run package failed\n{report(package)}"
    return out
