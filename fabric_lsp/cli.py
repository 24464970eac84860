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
from fabric_lsp.engine import alloc

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


class _NotServe(Exception):
    pass


class _ServeParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _NotServe(message)


def _serve_args(argv: Sequence[str]) -> argparse.Namespace | None:
    """`fabric-lsp [--log-file P] [-v] [serve [--tcp H:P]]` parsed without importing the
    subcommand modules: the editor pays for the server's start-up on every launch. Anything
    else (help, --version, other subcommands, errors) returns None for the full parser."""
    p = _ServeParser(prog="fabric-lsp", add_help=False)
    p.add_argument("--log-file")
    p.add_argument("-v", "--verbose", action="count", default=0)
    p.add_argument("command", nargs="?")
    p.add_argument("--tcp")
    try:
        args, rest = p.parse_known_args(list(argv))
    except _NotServe:
        return None
    if rest or args.command not in (None, "serve") or (args.tcp and args.command != "serve"):
        return None
    return args


def main(argv: Sequence[str] | None = None) -> int:
    alloc.tune()  # large buffers in their own mappings (engine/alloc.py)
    fast = _serve_args(sys.argv[1:] if argv is None else argv)
    if fast is not None:
        configure_logging(fast.log_file, fast.verbose)
        return _serve(fast)
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.log_file, args.verbose)
    run = getattr(args, "run", None)
    if run is None:  # bare `fabric-lsp` is the stdio server
        return _serve(args)
    return int(run(args) or 0)
