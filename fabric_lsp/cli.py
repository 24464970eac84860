"""Command-line face of the engine.

Every subcommand calls the engine directly. This module must never import pygls or
lsprotocol (only `serve` loads the server, lazily), so the CLI stays fast and a preview
from the CLI is the same bytes as one from the editor.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Callable, Sequence

from fabric_lsp import __version__

# name -> (help, add_arguments, run); subcommand modules register themselves here.
Subcommand = tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]


def _serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio (debugging only)")


def _serve(args: argparse.Namespace) -> int:
    from fabric_lsp.server import run_server  # lazy: only `serve` needs pygls

    return run_server(tcp=getattr(args, "tcp", None))


def _subcommands() -> dict[str, Subcommand]:
    commands: dict[str, Subcommand] = {
        "serve": ("run the language server over stdio (the default)", _serve_arguments, _serve),
    }
    try:
        from fabric_lsp import commands as _commands_pkg  # noqa: F401
    except ImportError:
        return commands
    for name, sub in sorted(_commands_pkg.registry().items(), key=lambda kv: kv[0]):
        commands[name] = sub
    return commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fabric-lsp",
        description="Pi session compaction previews, recall and safe compaction commits.",
    )
    parser.add_argument("--version", action="version", version=f"fabric-lsp {__version__}")
    parser.add_argument("--log-file", metavar="PATH", help="write logs to PATH instead of stderr")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_text, add_args, run) in _subcommands().items():
        p = sub.add_parser(name, help=help_text)
        add_args(p)
        p.set_defaults(run=run)
    return parser


def configure_logging(log_file: str | None, verbosity: int) -> None:
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    handler: logging.Handler
    if log_file:
        handler = logging.FileHandler(log_file, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)  # never stdout: it carries JSON-RPC
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.log_file, args.verbose)
    run = getattr(args, "run", None)
    if run is None:  # bare `fabric-lsp` is the stdio server
        return _serve(args)
    return int(run(args) or 0)
