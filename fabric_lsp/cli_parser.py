"""The command line's argparse half: the full parser of every subcommand and `serve`.

fabric_lsp/cli.py imports this only when a command needs it: a memory read a running
server answers (fabric_lsp/quick_cli.py) never loads argparse.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from fabric_lsp import __version__
from fabric_lsp.cli_base import FAST_COMMANDS, configure_logging

# name -> (help, add_arguments, run); subcommand modules register themselves here.
Subcommand = tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]


def _serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio (debugging only)")
    p.add_argument(
        "--daemon",
        action="store_true",
        help="serve only the local socket (the CLI's memory reads; docs/cli.md), in the foreground, "
        "until SIGTERM or Ctrl-C",
    )
    p.add_argument(
        "--agent-dir", metavar="DIR", help="with --daemon: Pi agent dir (default: $PI_CODING_AGENT_DIR or ~/.pi/agent)"
    )
    p.add_argument(
        "--index-dir",
        metavar="DIR",
        help="with --daemon: memory index dir (default: <agentDir>/fabric-lsp/memory-index)",
    )
    p.add_argument(
        "--cwd",
        metavar="DIR",
        help="with --daemon: project directory of requests without one (default: the current directory)",
    )
    p.add_argument(
        "--trusted",
        action="store_true",
        help="with --daemon: apply that project's .pi/fabric.json and .pi/settings.json",
    )


def _serve(args: argparse.Namespace) -> int:
    if getattr(args, "daemon", False):
        return _serve_daemon(args)
    daemon_only = [
        f"--{k.replace('_', '-')}" for k in ("agent_dir", "index_dir", "cwd", "trusted") if getattr(args, k, None)
    ]
    if daemon_only:
        print(
            f"fabric-lsp serve: {', '.join(daemon_only)} only with --daemon (the language server takes its "
            "settings from the editor)",
            file=sys.stderr,
        )
        return 2
    from fabric_lsp import preview_workers

    preview_workers.prestart()  # its start overlaps the imports below (preview_workers.py)
    from fabric_lsp.app import run_server  # lazy: only `serve` needs pygls
    from fabric_lsp.engine import alloc

    alloc.tune()  # large buffers in their own mappings (engine/alloc.py)
    return run_server(tcp=getattr(args, "tcp", None))


def _serve_daemon(args: argparse.Namespace) -> int:
    """`fabric-lsp serve --daemon`: the local socket without an editor (no pygls)."""
    if getattr(args, "tcp", None):
        print("fabric-lsp serve: --daemon serves the local socket, not TCP; drop --tcp", file=sys.stderr)
        return 2
    from fabric_lsp.commands.face import cli_config, project_dir
    from fabric_lsp.engine import alloc
    from fabric_lsp.local_socket_server import run_daemon

    alloc.tune()
    cfg = cli_config(args, "serve")
    return run_daemon(cfg, cwd=project_dir(args))


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


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter with the same width, found without importing shutil (argparse
    makes one per added argument; shutil costs a memory read's start a few ms)."""

    def __init__(
        self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None
    ) -> None:
        if width is None:  # shutil.get_terminal_size().columns - 2, as argparse does
            import os

            try:
                columns = int(os.environ["COLUMNS"])
            except (KeyError, ValueError):
                columns = 0
            if columns <= 0:
                try:
                    columns = os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
                except (AttributeError, ValueError, OSError):
                    columns = 80
            width = columns - 2
        super().__init__(prog, indent_increment, max_help_position, width)


def build_parser(
    subcommands: dict[str, Subcommand] | None = None,
    parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser,
) -> argparse.ArgumentParser:
    parser = parser_class(
        prog="fabric-lsp",
        description="Pi session compaction previews, recall and safe compaction commits.",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"fabric-lsp {__version__}")
    parser.add_argument("--log-file", metavar="PATH", help="write logs to PATH instead of stderr")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    # prog given: argparse would otherwise build a help formatter (and import shutil) to find it
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", prog=parser.prog)
    for name, (help_text, add_args, run) in (_subcommands() if subcommands is None else subcommands).items():
        p = sub.add_parser(name, help=help_text, formatter_class=_HelpFormatter)
        add_args(p)
        p.set_defaults(run=run)
    return parser


class _FastParseError(Exception):
    pass


class _FastParser(argparse.ArgumentParser):
    """The parser of one fast command; any error is left to the full parser, so its
    message and usage are exactly the full parser's."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _FastParseError(message)


def _fast_args(name: str, argv: Sequence[str]) -> argparse.Namespace | None:
    """`argv` parsed with only `name`'s module imported, or None (a parse error: the
    full parser reports it)."""
    import importlib

    module = importlib.import_module(f"fabric_lsp.commands.{FAST_COMMANDS[name]}")
    subcommands: dict[str, Subcommand] = dict(sorted(getattr(module, "SUBCOMMANDS", {}).items()))
    if name not in subcommands:
        return None
    try:
        return build_parser(subcommands, _FastParser).parse_args(list(argv))
    except _FastParseError:
        return None


class _NotServe(Exception):
    pass


class _ServeParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _NotServe(message)


def _serve_args(argv: Sequence[str]) -> argparse.Namespace | None:
    """`fabric-lsp [--log-file P] [-v] [serve [--tcp H:P]]` parsed without importing the
    subcommand modules: the editor pays for the server's start-up on every launch. Anything
    else (help, --version, other subcommands, errors) returns None for the full parser."""
    p = _ServeParser(prog="fabric-lsp", add_help=False, formatter_class=_HelpFormatter)
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


def main(argv: list[str], name: str | None) -> int:
    """The full command line; `name` is the fast command `argv` names (cli._fast_command)."""
    fast = _serve_args(argv)
    if fast is not None:
        configure_logging(fast.log_file, fast.verbose)
        return _serve(fast)
    args = _fast_args(name, argv) if name is not None else None
    if name is not None:
        from fabric_lsp.commands import face

        face.new_invocation()  # (main may run more than once in a process: tests)
    if args is None:
        from fabric_lsp.engine import alloc

        alloc.tune()  # large buffers in their own mappings (engine/alloc.py); memory reads tune when they compute
        args = build_parser().parse_args(argv)
        configure_logging(args.log_file, args.verbose)
    elif args.log_file or args.verbose:
        configure_logging(args.log_file, args.verbose)
    else:  # nothing logs until this process computes an answer itself (commands/face.py)
        from fabric_lsp.commands import face

        face.BEFORE_COMPUTE[:] = [lambda: configure_logging(None, 0)]
    run = getattr(args, "run", None)
    if run is None:  # bare `fabric-lsp` is the stdio server
        return _serve(args)
    if name is None:
        return int(run(args) or 0)
    from fabric_lsp.commands import face

    face.BEFORE_COMPUTE.append(_one_shot)  # a memory read that computes its answer here
    try:
        return int(run(args) or 0)
    finally:
        api = sys.modules.get("fabric_lsp.engine.memory.api")
        if api is not None:
            api.MemoryEngine.one_shot = False
        client = sys.modules.get("fabric_lsp.local_socket")
        if client is not None:  # a server that did not answer in time (the quick path said so already)
            from fabric_lsp.quick_cli import say_unanswered

            say_unanswered(name, client, done=True)


def _one_shot() -> None:
    """This process computes one answer and exits: its memory engine need not keep the
    disk cache tidy nor decode what the answer does not read (MemoryEngine.one_shot)."""
    from fabric_lsp.engine.memory.api import MemoryEngine

    MemoryEngine.one_shot = True
