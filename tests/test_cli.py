"""The CLI face: version, help, and the rule that it never imports pygls."""

from __future__ import annotations

import subprocess
import sys

from fabric_lsp import __version__
from tests.support.cli import run_cli


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, timeout=60)


def test_version() -> None:
    out = run("--version")
    assert out.returncode == 0
    assert out.stdout.strip() == f"fabric-lsp {__version__}"


def test_help_lists_serve() -> None:
    out = run("--help")
    assert out.returncode == 0
    assert "serve" in out.stdout


def test_cli_and_every_subcommand_module_do_not_import_pygls() -> None:
    code = (
        "import sys\n"
        "from fabric_lsp import cli\n"
        "cli.build_parser()\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pygls', 'lsprotocol'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_engine_never_imports_pygls() -> None:
    code = (
        "import sys, pkgutil, importlib, fabric_lsp.engine as e\n"
        "for m in pkgutil.walk_packages(e.__path__, 'fabric_lsp.engine.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pygls', 'lsprotocol'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
