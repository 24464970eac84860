"""`fabric-lsp recall`, `expand` and `sessions`: the memory engine from the command line.

The same engine calls the server makes; `--json` prints the `fabric/recall`,
`fabric/expand` and `fabric/sessions` result objects. Exit status: 0 on success, 1 on a
domain error (stale pointer, not found, ambiguous, out of bounds), 2 on invalid input.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Optional

import msgspec


def _out(data: bytes) -> None:
    try:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except BrokenPipeError:  # e.g. `| head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(0)


def _write(text: str) -> None:
    _out(text.encode("utf-8", "surrogatepass"))


def _emit_json(obj: Any) -> None:
    _out(msgspec.json.encode(obj) + b"\n")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the protocol result object")
    p.add_argument("--cwd", metavar="DIR", help="project directory (default: the current directory)")
    p.add_argument("--agent-dir", metavar="DIR", help="Pi agent dir (default: $PI_CODING_AGENT_DIR or ~/.pi/agent)")
    p.add_argument("--index-dir", metavar="DIR", help="memory index dir (default: <agentDir>/fabric-lsp/memory-index)")
    p.add_argument("--branches", choices=("active", "all"), default=None, help="branch mode (default active)")


def _engine(args: argparse.Namespace):
    from pathlib import Path

    from fabric_lsp.config import load_config
    from fabric_lsp.engine.memory.api import MemoryConfig, MemoryEngine

    cwd = args.cwd or os.getcwd()
    env = dict(os.environ)
    if args.agent_dir:
        env["PI_CODING_AGENT_DIR"] = args.agent_dir
    cfg = load_config(workspace_root=Path(cwd), env=env)
    for warning in cfg.warnings:
        print(f"fabric-lsp: {warning}", file=sys.stderr)
    memory = MemoryConfig.from_settings(dict(cfg.memory))
    index_dir = args.index_dir or str(cfg.index_dir)
    return MemoryEngine(memory, agent_dir=str(cfg.agent_dir), session_dir=str(cfg.session_dir), index_dir=index_dir), cwd


def _range(value: Optional[str]) -> Optional[dict]:
    if value is None:
        return None
    first, sep, last = value.partition(":")
    if not sep:
        raise ValueError("--range: expected A:B (inclusive entry indices)")
    try:
        return {"first": int(first), "last": int(last)}
    except ValueError:
        raise ValueError("--range: A and B must be integers") from None


def _recall_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", metavar="QUERY", nargs="?", help="literal terms (or a regex with --mode regex); omit to browse")
    p.add_argument("--mode", choices=("literal", "regex"), default="literal", help="query mode (default literal)")
    p.add_argument("--scope", default="session", help="session | project | global | session:<id-or-path> (default session)")
    p.add_argument("--page", type=int, default=1)
    p.add_argument("--page-size", type=int, default=25)
    p.add_argument("--range", metavar="A:B", help="with session:<…>: hydrate only entries A..B")
    p.add_argument("--expected-source-hash", metavar="HASH")
    p.add_argument("--expected-lineage-fingerprint", metavar="FP")
    _common(p)


def _run_recall(args: argparse.Namespace) -> int:
    try:
        params: dict[str, Any] = {"scope": args.scope, "queryMode": args.mode, "page": args.page, "pageSize": args.page_size}
        if args.query is not None:
            params["query"] = args.query
        if args.branches:
            params["branches"] = args.branches
        rng = _range(args.range)
        if rng is not None:
            params["entryRange"] = rng
        result = _call(args, "recall", _with_expected(params, args))
    except ValueError as err:
        print(f"fabric-lsp recall: {err}", file=sys.stderr)
        return 2
    if args.json:
        _emit_json(result)
    else:
        _write(result["text"] + "\n")
        if result["hasNext"]:
            _write(f"\n(page {result['page']} of {result['totalItems']} items; more with --page {result['page'] + 1})\n")
    return 1 if "error" in result["coverage"] else 0


def _with_expected(params: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Add the integrity expectations (a pointer's hash and lineage) the user gave."""
    if args.expected_source_hash:
        params["expectedSourceHash"] = args.expected_source_hash
    if args.expected_lineage_fingerprint:
        params["expectedLineageFingerprint"] = args.expected_lineage_fingerprint
    return params


def _call(args: argparse.Namespace, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One engine call with an engine that lives for this command only."""
    engine, cwd = _engine(args)
    try:
        return getattr(engine, method)(params, cwd=cwd)
    finally:
        engine.close()


def _list(value: Optional[str], kind: type) -> Optional[list]:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if kind is int:
        try:
            return [int(v) for v in items]
        except ValueError:
            raise ValueError("--indices: expected comma-separated integers") from None
    return items


def _expand_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", metavar="SESSION", help="session id, JSONL path or file:// URI")
    sel = p.add_mutually_exclusive_group(required=True)
    sel.add_argument("--indices", metavar="I,J,…", help="normalized entry indices")
    sel.add_argument("--entry-ids", metavar="ID,…", help="stable entry ids")
    sel.add_argument("--operation-addresses", metavar="ADDR,…", help="Fabric operation addresses (entry/seq)")
    sel.add_argument("--range", metavar="A:B", help="inclusive index range")
    p.add_argument("--expected-source-hash", metavar="HASH")
    p.add_argument("--expected-lineage-fingerprint", metavar="FP")
    _common(p)


def _run_expand(args: argparse.Namespace) -> int:
    try:
        params: dict[str, Any] = {"session": args.session}
        if args.branches:
            params["branches"] = args.branches
        if args.indices is not None:
            params["indices"] = _list(args.indices, int)
        if args.entry_ids is not None:
            params["entryIds"] = _list(args.entry_ids, str)
        if args.operation_addresses is not None:
            params["operationAddresses"] = _list(args.operation_addresses, str)
        if args.range is not None:
            params["entryRange"] = _range(args.range)
        result = _call(args, "expand", _with_expected(params, args))
    except ValueError as err:
        print(f"fabric-lsp expand: {err}", file=sys.stderr)
        return 2
    if args.json:
        _emit_json(result)
        return 1 if "error" in result else 0
    if "error" in result:
        err = result["error"]
        print(f"fabric-lsp expand: {err['code']}: {err['message']}", file=sys.stderr)
        for c in err.get("candidates", []):
            print(f"  {c}", file=sys.stderr)
        return 1
    _write(f"session {result['sessionId']} ({result['sessionFile']}), branches={result['branches']}\n"
           f"sourceHash {result['sourceHash']}\nlineageFingerprint {result['lineageFingerprint']}\n")
    for item in result["expanded"]:
        label = item.get("role") or item.get("type")
        if item.get("toolName"):
            label += f" {item['toolName']}"
        err = " [error]" if item.get("isError") else ""
        ref = item.get("operationAddress") or item.get("entryId") or "-"
        _write(f"\n#{item['index']} [{label}]{err} {ref} (line {item['line'] + 1})\n{item['text']}\n")
    return 0


def _sessions_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scope", default="project", help="session | project | global | session:<id-or-path> (default project)")
    p.add_argument("--page", type=int, default=1)
    p.add_argument("--page-size", type=int, default=50)
    _common(p)


def _run_sessions(args: argparse.Namespace) -> int:
    try:
        params: dict[str, Any] = {"scope": args.scope, "page": args.page, "pageSize": args.page_size}
        if args.branches:
            params["branches"] = args.branches
        result = _call(args, "sessions", params)
    except ValueError as err:
        print(f"fabric-lsp sessions: {err}", file=sys.stderr)
        return 2
    if args.json:
        _emit_json(result)
        return 1 if "error" in result["coverage"] else 0
    from fabric_lsp.engine.memory.jsvalues import iso_ms

    for row in result["sessions"]:
        when = iso_ms(row["lastTs"]) if row.get("lastTs") is not None else "unknown time"
        _write(f"{row['sessionId']}  {row['tier']:4}  {row['entryCount']:6} entries  {when}  {row['cwd']}\n"
               f"    {row['sessionFile']}\n")
    if not result["sessions"]:
        _write("No sessions in scope.\n")
    cov = result["coverage"]
    if not cov["complete"]:
        _write(f"(coverage incomplete: {', '.join(cov['reasons'])})\n")
    return 1 if "error" in cov else 0


SUBCOMMANDS = {
    "recall": ("search past Pi sessions (BM25 over hot sessions, pointers into cold ones)", _recall_args, _run_recall),
    "expand": ("print full session entries by index, entry id, operation address or range", _expand_args, _run_expand),
    "sessions": ("list Pi sessions with their memory tier and entry counts", _sessions_args, _run_sessions),
}
