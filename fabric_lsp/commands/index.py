"""`fabric-lsp index`: build the whole recall index in the foreground.

The same pass the server's background indexer runs (engine/memory/background.py), over
the same settings (commands/face.py), so a later `fabric-lsp recall` or a restarted
server finds every session indexed on disk. A progress bar goes to stderr on a terminal
and nothing when piped; the summary line goes to stdout (`--json`: the pass summary).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import msgspec

from fabric_lsp.commands.face import (
    EXIT_OK,
    CliError,
    add_settings_arguments,
    cli_engines,
    fail,
    project_dir,
)
from fabric_lsp.engine.activity import ActivityEvent, ProgressEvent


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scope",
        choices=("global", "project"),
        default="global",
        help="global: every session under the agent dir (default); project: the sessions of --cwd",
    )
    p.add_argument("--branches", choices=("active", "all"), default="active", help="branch mode (default active)")
    p.add_argument("--index-dir", metavar="DIR", help="memory index dir (default: <agentDir>/fabric-lsp/memory-index)")
    p.add_argument("--json", action="store_true", help="print the pass summary as JSON")
    add_settings_arguments(p)


class _Bar:
    """A one-line progress bar on a terminal; silent otherwise."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.live = bool(getattr(stream, "isatty", lambda: False)())
        self.shown = False

    def __call__(self, event: ActivityEvent) -> None:
        if not self.live or not isinstance(event, ProgressEvent):
            return
        pct = event.percentage or 0
        filled = pct * 30 // 100
        self.stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {pct:3d}% {event.message}\x1b[K")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


def _run(args: argparse.Namespace) -> int:
    from fabric_lsp.engine.memory.background import BackgroundIndexer

    try:
        engines = cli_engines(args, "index")
    except CliError as err:
        return fail(err)
    engine = engines.memory()
    bar = _Bar(sys.stderr)
    started = time.monotonic()
    try:
        indexer = BackgroundIndexer(engine, branches=args.branches, scope=args.scope, nice=0)
        summary = indexer.run_once(sink=bar, cwd=project_dir(args))
    except KeyboardInterrupt:
        bar.close()
        print("fabric-lsp index: interrupted; finished sessions are kept, run it again to go on", file=sys.stderr)
        return 130
    finally:
        engines.close()
    bar.close()
    summary["seconds"] = round(time.monotonic() - started, 3)
    summary["indexDir"] = engine.index_dir
    if args.json:
        sys.stdout.buffer.write(msgspec.json.encode(summary) + b"\n")
        return EXIT_OK
    total, indexed = summary["total"], summary["indexed"]
    line = (
        f"Indexed {indexed}/{total} sessions ({summary['built']} built, {summary['loaded']} from the cache"
        f"{', ' + str(summary['unavailable']) + ' unavailable' if summary['unavailable'] else ''}"
        f") in {summary['seconds']:.1f} s; index in {engine.index_dir}"
    )
    print(line)
    if summary["changed"]:
        print(f"{summary['changed']} sessions changed while indexing; run `fabric-lsp index` again to catch up")
    return EXIT_OK


SUBCOMMANDS = {
    "index": ("build the whole recall index (every session; progress on a terminal)", _args, _run),
}
