"""`fabric-lsp compact`, `compact-status`, `compact-cancel`: compaction intents from a shell.

`compact SESSION` records an intent in the shared intents directory
(`<agentDir>/fabric-lsp/intents`); a running fabric-lsp server picks it up and commits it
at the session's next safe boundary. With `--wait` this process commits it itself, at
the next safe boundary, and reports the outcome. No pygls import here.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Optional

import msgspec

from fabric_lsp import protocol
from fabric_lsp.commands.face import CliError, decode, given
from fabric_lsp.engines import intent_cancel, intent_request, intent_status

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_TIMEOUT = 3


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", metavar="SESSION", help="session id, absolute path or file:// URI")
    p.add_argument("--state-dir", metavar="DIR", help="intents directory (default: <agentDir>/fabric-lsp/intents)")
    p.add_argument("--json", action="store_true", help="print the protocol result object")
    from fabric_lsp.commands.face import add_settings_arguments

    add_settings_arguments(p)


def _compact_arguments(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--instructions", metavar="TEXT", help="what the summary must keep (≤ 8192 characters)")
    p.add_argument("--preserve", metavar="ITEM", action="append", help="a fact to preserve verbatim (repeatable, ≤ 16)")
    p.add_argument("--reason", metavar="TEXT", help="why compact now (recorded with the intent)")
    p.add_argument("--requested-by", metavar="NAME", default="user", help="who asks (default: user)")
    p.add_argument("--wait", action="store_true", help="commit in this process at the next safe boundary")
    p.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS", help="with --wait: give up after (600)")
    p.add_argument("--quiet-interval", type=float, metavar="SECONDS",
                   help="with --wait: how long the file must be quiet (default: compaction.commitQuietMs)")
    p.add_argument("--context-window", type=int, metavar="N", help="model window (0 = no model metadata)")
    p.add_argument("--keep-recent", type=int, metavar="N", help="Pi's keepRecentTokens")
    p.add_argument("--reserve", type=int, metavar="N", help="Pi's reserveTokens")
    p.add_argument("--ratio", type=float, metavar="R", help="Fabric's targetContextRatio")


def _setup(args: argparse.Namespace) -> tuple[Any, str, Any]:
    """(config, session path, service); raises ValueError with a message for the user.
    The settings layers and the compaction options are the server's (commands/face.py,
    engine/compaction/options.py); flags override them as request params do."""
    from fabric_lsp.commands.face import cli_config, session_ref
    from fabric_lsp.engine.compaction.options import CompactionOverrides, resolve_compaction_options
    from fabric_lsp.engine.intents.service import IntentsService, default_state_dir
    from fabric_lsp.engine.session.lease import LeaseBook
    from fabric_lsp.engines import DomainError, resolve_session_path

    command = getattr(args, "command", None) or "compact"
    cfg = cli_config(args, command)
    try:
        path = str(resolve_session_path(session_ref(args.session) or "", cfg.session_dir))
    except DomainError as err:
        if err.candidates:
            raise ValueError(f"session {args.session!r} is ambiguous: " + ", ".join(err.candidates)) from None
        raise ValueError(f"session {args.session!r} not found (looked in {cfg.session_dir})") from None
    overrides = CompactionOverrides(
        context_window=getattr(args, "context_window", None),
        reserve_tokens=getattr(args, "reserve", None),
        keep_recent_tokens=getattr(args, "keep_recent", None),
        target_context_ratio=getattr(args, "ratio", None),
    )
    options = resolve_compaction_options(cfg.compaction_settings(), overrides).kwargs()
    quiet = getattr(args, "quiet_interval", None)
    if quiet is None:
        quiet = cfg.compaction.get("commitQuietMs", 2000) / 1000.0
    service = IntentsService(
        state_dir=args.state_dir or default_state_dir(str(cfg.agent_dir)),
        quiet_interval_s=quiet,
        compaction_options_provider=lambda _p: options,
        leases=LeaseBook(cfg.agent_dir),
    )
    return cfg, path, service


def _print(args: argparse.Namespace, obj: dict[str, Any], text: str) -> None:
    if args.json:
        sys.stdout.write(msgspec.json.encode(obj).decode() + "\n")
    else:
        sys.stdout.write(text + "\n")


def _describe_intent(intent: dict[str, Any]) -> str:
    parts = [f"requested by {intent['requestedBy']}"]
    if "reason" in intent:
        parts.append(f"reason: {intent['reason']}")
    if "instructions" in intent:
        parts.append(f"instructions: {intent['instructions']}")
    if "preserve" in intent:
        parts.append(f"preserve: {len(intent['preserve'])} item(s)")
    return "; ".join(parts)


def _describe_record(record: dict[str, Any]) -> str:
    if record["status"] == "committed":
        after = record.get("estimatedTokensAfter")
        return (f"committed compaction {record.get('entryId')} ({record.get('tokensBefore')} tokens before"
                + (f", ~{after} after" if after is not None else "") + ")")
    return f"failed: {record.get('error')}"


def _run_compact(args: argparse.Namespace) -> int:
    try:
        _cfg, path, service = _setup(args)
        params = decode("compact", protocol.COMPACT_REQUEST, given({
            "session": path, "requestedBy": args.requested_by, "reason": args.reason,
            "instructions": args.instructions, "preserve": args.preserve,
        }))
        result = protocol.to_wire(intent_request(service, path, params))
    except (ValueError, CliError) as err:
        print(err.message if isinstance(err, CliError) else f"fabric-lsp compact: {err}", file=sys.stderr)
        return EXIT_USAGE
    if not args.wait:
        _print(args, result, f"pending compaction for {path}: {_describe_intent(result['pending'])}\n"
                             "a running fabric-lsp server commits it at the next safe boundary "
                             "(or run again with --wait)")
        return EXIT_OK
    holder = service.holder(path)
    if holder is not None:
        print(f"fabric-lsp compact: a live Pi (pid {holder.pid}) holds {path}: that Pi commits the compaction "
              "at its next settled boundary; waiting for it", file=sys.stderr)
    record = _wait_for_commit(service, path, result["pending"], args.timeout)
    if record is None:
        status = protocol.to_wire(intent_status(service, path))
        if status.get("pending") == result["pending"]:
            _print(args, status, f"still pending after {args.timeout:g}s: the session never reached a safe boundary")
            return EXIT_TIMEOUT
        _print(args, status, "cleared without a commit (nothing to compact, already compacted, or cancelled)")
        return EXIT_OK
    committed = msgspec.convert({"session": path, "record": record}, protocol.CompactionCommittedParams)
    _print(args, protocol.to_wire(committed), _describe_record(record))
    return EXIT_OK if record["status"] == "committed" else EXIT_FAILED


def _wait_for_commit(service: Any, path: str, intent: dict[str, Any], timeout: float) -> Optional[dict[str, Any]]:
    deadline = time.monotonic() + max(0.0, timeout)
    poll = max(0.02, min(0.5, service.quiet_interval_s / 4))
    while True:
        record = service.maybe_commit(path)
        if record is not None:
            return record
        status = service.status(path)
        if status.get("pending") != intent:
            last = status.get("last")
            # Another process (a server) may have committed it meanwhile.
            return last if last is not None and last.get("at", 0) >= intent["requestedAt"] else None
        if time.monotonic() >= deadline:
            return None
        time.sleep(poll)


def _run_status(args: argparse.Namespace) -> int:
    try:
        _cfg, path, service = _setup(args)
    except ValueError as err:
        print(f"fabric-lsp compact-status: {err}", file=sys.stderr)
        return EXIT_USAGE
    status = protocol.to_wire(intent_status(service, path))
    lines = [f"session: {path}", f"settled: {'yes' if status['settled'] else 'no'}"]
    lines.append("pending: " + (_describe_intent(status["pending"]) if "pending" in status else "none"))
    lines.append("last: " + (_describe_record(status["last"]) if "last" in status else "none"))
    if "heldBy" in status:
        held = status["heldBy"]
        lines.append(f"held by: a live Pi, pid {held['pid']} (leaf {held.get('leafId') or 'unknown'}); Pi commits")
    _print(args, status, "\n".join(lines))
    return EXIT_OK


def _run_cancel(args: argparse.Namespace) -> int:
    try:
        _cfg, path, service = _setup(args)
    except ValueError as err:
        print(f"fabric-lsp compact-cancel: {err}", file=sys.stderr)
        return EXIT_USAGE
    result = protocol.to_wire(intent_cancel(service, path))
    _print(args, result, "cancelled the pending compaction" if result["cancelled"] else "nothing was pending")
    return EXIT_OK


SUBCOMMANDS = {
    "compact": ("request a compaction of a session at its next safe boundary", _compact_arguments, _run_compact),
    "compact-status": ("show a session's pending compaction and last commit", _common, _run_status),
    "compact-cancel": ("cancel a session's pending compaction", _common, _run_cancel),
}
