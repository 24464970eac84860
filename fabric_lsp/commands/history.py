"""`fabric-lsp history PATH`: what past Pi sessions did to one file (`fabric/fileHistory`).

The same decode and engine call as the server; `--json` prints the server's result
object for the same inputs. Exit status: 0 on an answer, 2 on invalid input (message on
stderr).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import msgspec

from fabric_lsp import protocol
from fabric_lsp.commands.face import CliError, add_settings_arguments, cli_engines, decode, fail, given, project_dir


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "path", metavar="PATH", help="the file (relative to the current directory, absolute, or a file: URI)"
    )
    p.add_argument("--json", action="store_true", help="print the fabric/fileHistory result object")
    p.add_argument("--scope", choices=("project", "global"), default=None, help="sessions searched (default global)")
    p.add_argument("--branches", choices=("active", "all"), default=None, help="branch mode (default active)")
    p.add_argument("--page", type=int, default=None)
    p.add_argument("--page-size", type=int, default=None)
    add_settings_arguments(p)
    p.add_argument("--index-dir", metavar="DIR", help="memory index dir (default: <agentDir>/fabric-lsp/memory-index)")


def target(value: str) -> dict[str, str]:
    """`{uri}` for a file: URI, else `{path}` made absolute against the current directory."""
    if value.startswith("file:"):
        return {"uri": value}
    return {"path": os.path.abspath(os.path.expanduser(value))}


def _write(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise SystemExit(0) from None


def render(result: dict[str, Any]) -> str:
    """The result for people: one line per session, then one per operation."""
    from fabric_lsp.engine.jsstr import iso_ms_or_none

    def when(ts: Any) -> str:
        return iso_ms_or_none(ts) or "unknown time"

    lines = [
        f"{result['path']}: {result['totalItems']} operations in {result['totalSessions']} sessions"
        f" (scope {result['scope']}, branches {result['branches']})"
    ]
    for row in result["sessions"]:
        lines.append(
            f"  {row['sessionId']}  {row['count']:4} ops  last {row['lastAction']:5} {when(row['lastTimestamp'])}"
            f"  {row['sessionFile']}"
        )
    if result["items"]:
        lines.append("")
    for item in result["items"]:
        via = f" via {item['operationRef']}" if item.get("operationRef") else ""
        lines.append(
            f"{when(item['timestamp'])}  {item['action']:5} {item['outcome']:9} #{item['index']}"
            f"  {item.get('ref') or item['sessionFile']}{via}"
        )
    if result["hasNext"]:
        lines.append(f"(page {result['page']}; more with --page {result['page'] + 1})")
    cov = result["coverage"]
    if not cov["complete"]:
        lines.append(f"(coverage incomplete: {', '.join(cov['reasons']) or 'not every session was indexed'})")
    return "\n".join(lines) + "\n"


def _run(args: argparse.Namespace) -> int:
    params = given({"scope": args.scope, "branches": args.branches, "page": args.page, "pageSize": args.page_size})
    params.update(target(args.path))
    try:
        p = decode("history", protocol.FILE_HISTORY, params)
    except CliError as err:
        return fail(err)
    engines = cli_engines(args, "history")
    try:
        result = protocol.to_wire(engines.file_history(p, project_dir(args)))
    except ValueError as err:
        print(f"fabric-lsp history: invalid arguments: {err}", file=sys.stderr)
        return 2
    finally:
        engines.close()
    if args.json:
        try:
            sys.stdout.buffer.write(msgspec.json.encode(result) + b"\n")
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            raise SystemExit(0) from None
    else:
        _write(render(result))
    return 0


SUBCOMMANDS = {
    "history": ("what past Pi sessions did to a file (reads, edits, writes)", _args, _run),
}
