"""`fabric-lsp recall`, `expand` and `sessions`: the memory engine from the command line.

The same engine calls the server makes; `--json` prints the `fabric/recall`,
`fabric/expand` and `fabric/sessions` result objects. Exit status: 0 on success, 1 on a
domain error (stale pointer, not found, ambiguous, out of bounds), 2 on invalid input.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from fabric_lsp.commands.face import (
    SERVED_COMMANDS,
    CliError,
    WireResult,
    add_settings_arguments,
    ask_server,
    cli_engines,
    decode,
    project_dir,
    session_ref,
)
from fabric_lsp.quick_cli import agent_dir_error, index_hint

__all__ = ["SUBCOMMANDS", "index_hint"]

# A running server (fabric-lsp in an editor, or `fabric-lsp serve --daemon`) answers first,
# over the local socket (fabric_lsp/local_socket.py); msgspec, the protocol and the engines
# are imported only when this process computes the answer itself.
_METHODS = {name: SERVED_COMMANDS[name] for name in ("recall", "expand", "sessions")}


def _out(data: bytes) -> None:
    try:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except BrokenPipeError:  # e.g. `| head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(0) from None


def _write(text: str) -> None:
    _out(text.encode("utf-8", "surrogatepass"))


def _emit_json(obj: Any) -> None:
    if isinstance(obj, WireResult):  # a server's answer: its bytes, as it encoded them
        _out(obj.raw + b"\n")
        return
    import msgspec

    _out(msgspec.json.encode(obj) + b"\n")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the protocol result object")
    add_settings_arguments(p)
    p.add_argument("--index-dir", metavar="DIR", help="memory index dir (default: <agentDir>/fabric-lsp/memory-index)")
    p.add_argument("--branches", choices=("active", "all"), default=None, help="branch mode (default active)")


def _range(value: str | None) -> dict | None:
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
    p.add_argument(
        "query", metavar="QUERY", nargs="?", help="literal terms (or a regex with --mode regex); omit to browse"
    )
    p.add_argument("--mode", choices=("literal", "regex"), default="literal", help="query mode (default literal)")
    p.add_argument(
        "--scope",
        default="session",
        help="session | project | global | session:<id-or-path> | team | team:<member> "
        "(team: the team database, docs/team.md; default session)",
    )
    p.add_argument("--page", type=int, default=1)
    p.add_argument("--page-size", type=int, default=25)
    p.add_argument("--range", metavar="A:B", help="with session:<…>: hydrate only entries A..B")
    p.add_argument("--expected-source-hash", metavar="HASH")
    p.add_argument("--expected-lineage-fingerprint", metavar="FP")
    _common(p)


def _sessions_phrase(n: int) -> str:
    return f"{n} session" + ("" if n == 1 else "s")


def _max_entry_chars(args: argparse.Namespace) -> int:
    from fabric_lsp.commands.face import cli_config

    served = getattr(args, "_served_settings", None)  # the settings a server resolved for us
    if served is not None and isinstance(served.get("maxEntryChars"), int):
        return int(served["maxEntryChars"])
    return int(cli_config(args, "recall", quiet=True).memory["maxEntryChars"])


def _wider_scope_hint(args: argparse.Namespace) -> str | None:
    """Which scope would search more, and how many sessions it holds."""
    wider = ["project", "global"] if args.scope.startswith("session") else ["global"] if args.scope == "project" else []
    for scope in wider:
        try:
            total = _call(args, "sessions", {"scope": scope, "pageSize": 1}, quiet=True).get("totalItems", 0)
        except ValueError:
            return None
        if total:
            return f"--scope {scope} searches {_sessions_phrase(total)}"
    return None


def _run_recall(args: argparse.Namespace) -> int:
    try:
        params: dict[str, Any] = {
            "scope": args.scope,
            "queryMode": args.mode,
            "page": args.page,
            "pageSize": args.page_size,
        }
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
    cov = result["coverage"]
    if "error" in cov:  # an invalid regex and friends are errors, never "no matches"
        if args.json:
            _emit_json(result)
        err = cov["error"]
        print(f"fabric-lsp recall: {err['code']}: {err['message']}", file=sys.stderr)
        return 2
    if args.json:
        _emit_json(result)
    else:
        reasons = [r for r in cov.get("reasons", []) if r != "max_entry_chars"]
        if result["totalItems"] == 0 and not reasons:
            import json  # (here: `--json` answers never load it)

            _write(f"No matches for {json.dumps(args.query)}" if args.query is not None else "Nothing to browse")
            _write(f" in {_sessions_phrase(cov['indexedSessions'])} of scope {args.scope}.\n")
            wider = _wider_scope_hint(args)
            if wider:
                _write(wider + "\n")
        else:
            _write(result["text"] + "\n")
        if result["hasNext"]:
            _write(
                f"\n(page {result['page']} of {result['totalItems']} items; more with --page {result['page'] + 1})\n"
            )
        if "max_entry_chars" in cov.get("reasons", []):
            limit = _max_entry_chars(args)
            _write(
                f"note: text past {limit:,} characters of an entry is not indexed "
                f"(in {_sessions_phrase(cov.get('incompleteSessions', 0))}); `fabric-lsp expand` shows it whole\n"
            )
    hint = index_hint(result["coverage"])
    if hint:
        print(f"fabric-lsp recall: {hint}", file=sys.stderr)
    return 1 if "error" in result["coverage"] else 0


def _with_expected(params: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Add the integrity expectations (a pointer's hash and lineage) the user gave."""
    if args.expected_source_hash:
        params["expectedSourceHash"] = args.expected_source_hash
    if args.expected_lineage_fingerprint:
        params["expectedLineageFingerprint"] = args.expected_lineage_fingerprint
    return params


def _call(args: argparse.Namespace, command: str, params: dict[str, Any], *, quiet: bool = False) -> dict[str, Any]:
    """One engine call, decoded as the server decodes it, with engines that live for
    this command only. Invalid arguments raise ValueError with the protocol's message;
    a missing agent dir or a scope naming a file that is no Pi session, too."""
    try:
        served = ask_server(args, command, params, quiet=quiet)
    except CliError as err:  # the server's strict decoder said so: the same message as here
        raise ValueError(err.message.split(": ", 1)[1]) from None
    if served is not None:  # the same checks, in the same order, as below
        args._served_settings = served.settings
        _check_agent_dir(str(served.settings.get("agentDir")))
        _check_scope(params.get("scope"))
        if served.value_error is not None:
            raise ValueError(served.value_error)
        return served.result()
    from fabric_lsp import protocol

    try:
        p = decode(command, _METHODS[command], params)
    except CliError as err:
        raise ValueError(err.message.split(": ", 1)[1]) from None
    engines = cli_engines(args, command, quiet=quiet)
    cfg = engines.config
    try:
        _check_agent_dir(str(cfg.agent_dir))
    except ValueError:
        engines.close()
        raise
    _check_scope(getattr(p, "scope", ""))
    try:
        return protocol.to_wire(getattr(engines, command)(p, project_dir(args)))
    finally:
        engines.close()


def _check_agent_dir(agent_dir: str) -> None:
    problem = agent_dir_error(agent_dir)
    if problem is not None:
        raise ValueError(problem)


def _check_scope(scope: Any) -> None:
    if isinstance(scope, str) and scope.startswith("session:"):
        _check_session_file(scope[len("session:") :])


def _check_session_file(ref: str) -> None:
    """A path that names an existing file must be a Pi session (a session header first)."""
    from fabric_lsp.engine.session.reader import read_header

    path = ref[len("file://") :] if ref.startswith("file://") else ref
    if os.path.isfile(path) and read_header(path) is None:
        raise ValueError(f"{path} is not a Pi session file (its first line is not a session header)")


def _list(value: str | None, kind: type) -> list | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if kind is int:
        try:
            return [int(v) for v in items]
        except ValueError:
            raise ValueError("--indices: expected comma-separated integers") from None
    return items


def _reference_params(target: str, in_session: str | None) -> dict[str, Any]:
    """`fabric-lsp expand REF`: the one reference grammar (engine/references.py)."""
    from fabric_lsp.engine.references import FORMS, ReferenceSyntaxError, parse_reference

    try:
        ref = parse_reference(target)
    except ReferenceSyntaxError as err:
        raise ValueError(
            f"{err}; or give a session with --indices, --entry-ids, --operation-addresses or --range"
        ) from None
    session = ref.session if ref.session is not None else in_session
    if session is None:
        raise ValueError(f"{target!r} names no session: add --session SESSION (references: {FORMS})")
    out: dict[str, Any] = {"session": session_ref(session)}
    if ref.operation is not None:
        out["operationAddresses"] = [f"{ref.entry}/{ref.operation}"]
    else:
        out["entryIds"] = [ref.entry]
    return out


# what the user typed names nothing (docs/cli.md: exit 2); other domain errors are 1
_NOT_FOUND = frozenset({"session_not_found", "ambiguous_session", "address_not_found"})


def _expand_status(result: dict[str, Any]) -> int:
    if "error" not in result:
        return 0
    return 2 if result["error"].get("code") in _NOT_FOUND else 1


def _expand_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "session",
        metavar="TARGET",
        help="a reference as the UIs show it (pi-entry:<session>/<entry>, <session>/<entry>, or a bare "
        "<entry> or <entry>/<n> with --session), or a session (id, id prefix, path) with a selector",
    )
    p.add_argument("--session", dest="in_session", metavar="SESSION", help="the session of a bare entry reference")
    sel = p.add_mutually_exclusive_group()
    sel.add_argument("--indices", metavar="I,J,…", help="normalized entry indices")
    sel.add_argument("--entry-ids", metavar="ID,…", help="stable entry ids")
    sel.add_argument("--operation-addresses", metavar="ADDR,…", help="Fabric operation addresses (entry/seq)")
    sel.add_argument("--range", metavar="A:B", help="inclusive index range")
    p.add_argument("--expected-source-hash", metavar="HASH")
    p.add_argument("--expected-lineage-fingerprint", metavar="FP")
    _common(p)


def _run_expand(args: argparse.Namespace) -> int:
    try:
        params: dict[str, Any] = {"session": session_ref(args.session)}
        if all(getattr(args, k) is None for k in ("indices", "entry_ids", "operation_addresses", "range")):
            params.update(_reference_params(args.session, args.in_session))
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
        return _expand_status(result)
    if "error" in result:
        err = result["error"]
        print(f"fabric-lsp expand: {err['code']}: {err['message']}", file=sys.stderr)
        for c in err.get("candidates", []):
            print(f"  {c}", file=sys.stderr)
        return _expand_status(result)
    _write(
        f"session {result['sessionId']} ({result['sessionFile']}), branches={result['branches']}\n"
        f"sourceHash {result['sourceHash']}\nlineageFingerprint {result['lineageFingerprint']}\n"
    )
    for item in result["expanded"]:
        label = item.get("role") or item.get("type")
        if item.get("toolName"):
            label += f" {item['toolName']}"
        err = " [error]" if item.get("isError") else ""
        ref = item.get("operationAddress") or item.get("entryId") or "-"
        _write(f"\n#{item['index']} [{label}]{err} {ref} (line {item['line'] + 1})\n{item['text']}\n")
    return 0


def _sessions_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scope", default="project", help="session | project | global | session:<id-or-path> (default project)"
    )
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
    from fabric_lsp.engine.jsstr import iso_ms_or_none

    for row in result["sessions"]:
        when = iso_ms_or_none(row.get("lastTs")) or "unknown time"
        _write(
            f"{row['sessionId']}  {row['tier']:4}  {row['entryCount']:6} entries  {when}  {row['cwd']}\n"
            f"    {row['sessionFile']}\n"
        )
    if not result["sessions"]:
        _write(f"No sessions in scope {args.scope}.\n")
        wider = _wider_scope_hint(args)
        if wider:
            _write(wider.replace("searches", "lists") + "\n")
    cov = result["coverage"]
    if not cov["complete"]:
        _write(f"(coverage incomplete: {', '.join(cov['reasons'])})\n")
    return 1 if "error" in cov else 0


SUBCOMMANDS = {
    "recall": ("search past Pi sessions (BM25 over hot sessions, pointers into cold ones)", _recall_args, _run_recall),
    "expand": ("print full session entries by index, entry id, operation address or range", _expand_args, _run_expand),
    "sessions": ("list Pi sessions with their memory tier and entry counts", _sessions_args, _run_sessions),
}
