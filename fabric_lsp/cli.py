"""Command-line face of the engine.

Every subcommand calls the engine directly. This module must never import pygls or
lsprotocol (only `serve` loads the server, lazily), so the CLI stays fast and a preview
from the CLI is the same bytes as one from the editor.

It imports nothing but `sys` itself: the memory reads (`recall`, `sessions`, `expand`,
`history`) first try the quick path (fabric_lsp/quick_cli.py: a running server answers,
no argparse), and everything else is the full parser's (fabric_lsp/cli_parser.py).
"""

from __future__ import annotations

import sys

from fabric_lsp.cli_base import FAST_COMMANDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any


def _fast_command(argv: Sequence[str]) -> str | None:
    """The subcommand of `fabric-lsp [--log-file P] [-v…] COMMAND …` when it is one of
    FAST_COMMANDS, else None (then the full parser decides)."""
    skip = False
    for token in argv:
        if skip:
            skip = False
        elif token == "--log-file":
            skip = True
        elif token.startswith("--log-file=") or token == "--verbose" or (len(token) > 1 and token.strip("v") == "-"):
            continue
        elif token.startswith("-"):
            return None
        else:
            return token if token in FAST_COMMANDS else None
    return None


def build_parser(*args: Any, **kwargs: Any) -> argparse.ArgumentParser:
    """The full parser (fabric_lsp/cli_parser.py)."""
    from fabric_lsp.cli_parser import build_parser as build

    return build(*args, **kwargs)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    name = _fast_command(argv)
    if name is not None:
        from fabric_lsp.quick_cli import run as quick

        code = quick(argv)
        if code is not None:
            return code
    from fabric_lsp import cli_parser

    return cli_parser.main(argv, name)
