"""`fabric-lsp compact`, `compact-status`, `compact-cancel`: compaction intents from a shell.

`compact SESSION` records an intent in the shared intents directory
(`<agentDir>/fabric-lsp/intents`): a live Pi holding the session (editors/pi) commits it
at its next settled boundary; otherwise a running fabric-lsp server picks it up and
commits it at the session's next safe boundary. With `--wait` this process commits it
itself (unless a live Pi holds the session), and reports the outcome. A request with
nothing to compact is refused (exit 1). No pygls import here.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import msgspec

from fabric_lsp import protocol
from fabric_lsp.commands.face import CliError, decode, given
from fabric_lsp.engine_owner import intent_cancel, intent_request, intent_status

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
    p.add_argument(
        "--quiet-interval",
        type=float,
        metavar="SECONDS",
        help="with --wait: how long the file must be quiet (default: compaction.commitQuietMs)",
    )
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
    from fabric_lsp.engine_owner import DomainError, resolve_session_path

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
        projected, after = record.get("projectedTokensAfter"), record.get("estimatedTokensAfter")
        if projected is not None:  # the number the preview showed for this summary and cut
            tail = f", {projected} projected after"
        else:
            tail = f", ~{after} after (Pi's estimate)" if after is not None else ""
        return f"committed compaction {record.get('entryId')} ({record.get('tokensBefore')} tokens before{tail})"
    return f"failed: {record.get('error')}"


def _refused(err: BaseException) -> str | None:
    """The reason when `err` is (or wraps) the service's refusal of a request that cannot
    be honoured (nothing to compact), else None."""
    from fabric_lsp.engine.intents.service import RequestRefused

    seen: BaseException | None = err
    for _ in range(4):
        if seen is None:
            return None
        if isinstance(seen, RequestRefused):
            return str(seen)
        seen = seen.__cause__ or seen.__context__
    return None


def _holders_text(holders: list[Any]) -> str:
    return ", ".join(f"pid {h.pid}" + (f" (Pi {h.pi_version})" if h.pi_version else "") for h in holders)


def _who_commits(service: Any, path: str) -> str:
    """Who commits a pending intent on `path`, said as it is."""
    holders = service.holders(path)
    if len(holders) > 1:
        return (
            f"{len(holders)} live Pis hold this session ({_holders_text(holders)}): the one that reaches a settled "
            "boundary first commits it. Two Pis on one file fork it: each appends under its own leaf; "
            "close one of them"
        )
    if holders:
        return (
            f"the live Pi holding it (pid {holders[0].pid}) commits it at its next settled boundary "
            "(at once while it is idle)"
        )
    return (
        "no live Pi holds this session: a fabric-lsp language server for this agent dir (an editor with "
        "fabric-lsp) commits it at the next safe boundary while one runs; nothing else does — run "
        "`fabric-lsp compact --wait` to commit it here"
    )


def _run_compact(args: argparse.Namespace) -> int:
    try:
        _cfg, path, service = _setup(args)
        params = decode(
            "compact",
            protocol.COMPACT_REQUEST,
            given(
                {
                    "session": path,
                    "requestedBy": args.requested_by,
                    "reason": args.reason,
                    "instructions": args.instructions,
                    "preserve": args.preserve,
                }
            ),
        )
        result = protocol.to_wire(intent_request(service, path, params))
    except (ValueError, CliError) as err:
        refused = _refused(err)
        if refused is not None:
            print(f"fabric-lsp compact: refused, nothing was recorded: {refused}", file=sys.stderr)
            return EXIT_FAILED
        print(err.message if isinstance(err, CliError) else f"fabric-lsp compact: {err}", file=sys.stderr)
        return EXIT_USAGE
    if not args.wait:
        _print(
            args,
            result,
            f"pending compaction for {path}: {_describe_intent(result['pending'])}\n" + _who_commits(service, path),
        )
        return EXIT_OK
    said = None
    holders = {h.pid for h in service.holders(path)}
    if holders:
        said = _who_commits(service, path)
        print(f"fabric-lsp compact: {said}; waiting for it", file=sys.stderr)
    record, why = _wait_for_commit(service, path, result["pending"], args.timeout, said, holders)
    if record is None:
        status = protocol.to_wire(intent_status(service, path))
        if status.get("pending") == result["pending"]:
            _print(
                args,
                status,
                f"still pending after {args.timeout:g}s: {why or 'the session never reached a safe boundary'}",
            )
            return EXIT_TIMEOUT
        cleared = service.cleared(path)
        reason = cleared.get("reason") if cleared and cleared.get("at", 0) >= result["pending"]["requestedAt"] else None
        _print(
            args,
            status,
            f"cleared without a commit: {reason or 'the intent was replaced or cleared by another process'}",
        )
        return EXIT_FAILED
    committed = msgspec.convert({"session": path, "record": record}, protocol.CompactionCommittedParams)
    _print(args, protocol.to_wire(committed), _describe_record(record))
    return EXIT_OK if record["status"] == "committed" else EXIT_FAILED


def _waiting_for(service: Any, path: str, gone: list[int]) -> str:
    """Why a pending intent on `path` is not committed yet, as far as this process knows.
    `gone`: pids of live Pis that held the session earlier in this wait."""
    holders = service.holders(path)
    if holders:
        return _who_commits(service, path)
    why = service.why_waiting(path) or "the session is not at a safe boundary yet"
    if gone:
        pids = ", ".join(str(p) for p in gone)
        return (
            f"the Pi that held the session (pid {pids}) is gone; this process commits it once the session is at "
            f"a safe boundary: {why}"
        )
    return f"not at a safe boundary: {why}"


def _shape(text: str) -> str:
    """`text` with its numbers blanked: "written 0.12s ago" and "written 0.37s ago" say the same."""
    import re

    return re.sub(r"\d+(?:\.\d+)?", "#", text)


def _wait_for_commit(
    service: Any,
    path: str,
    intent: dict[str, Any],
    timeout: float,
    said: str | None = None,
    held_by: set[int] | None = None,
) -> tuple[dict[str, Any] | None, str | None]:
    """(the record, None) once committed or failed; (None, why it was still waiting) when
    cleared or timed out. Each new reason for waiting is said on stderr once (`said`: the
    one already said; `held_by`: the live Pis already named)."""
    deadline = time.monotonic() + max(0.0, timeout)
    poll = max(0.02, min(0.5, service.quiet_interval_s / 4))
    why: str | None = None
    gone: list[int] = []
    seen: set[int] = set(held_by or ()) | {h.pid for h in service.holders(path)}
    first = True
    while True:
        record = service.maybe_commit(path)
        if record is not None:
            return record, None
        status = protocol.to_wire(service.status(path))
        if status.get("pending") != intent:
            last = status.get("last")
            # Another process (a server, the live Pi) may have committed it meanwhile.
            return (last if last is not None and last.get("at", 0) >= intent["requestedAt"] else None), why
        holders = {h.pid for h in service.holders(path)}
        gone = sorted(seen - holders)
        seen |= holders
        why = _waiting_for(service, path, gone)
        # the first deferral of a quiet-interval wait is routine: say it only when it lasts
        if (said is None or _shape(why) != _shape(said)) and not (first and not gone and not holders):
            print(f"fabric-lsp compact: waiting: {why}", file=sys.stderr)
            said = why
        first = False
        if time.monotonic() >= deadline:
            return None, why
        time.sleep(poll)


def _branch_facts(path: str, leaf: str | None) -> tuple[dict[str, Any] | None, set[str], set[str]]:
    """(the latest compaction on the active branch ending at `leaf` or the file's leaf,
    the ids on that branch, every id in the file); empty when the file cannot be read."""
    from fabric_lsp.engine.session import SessionTree, read_session

    try:
        tree = SessionTree.from_records(read_session(path).records)
    except OSError:
        return None, set(), set()
    entries = tree.branch(leaf).entries
    latest = next((r.raw for r in reversed(entries) if r.type == "compaction"), None)
    return latest, {r.id for r in entries if r.id is not None}, set(tree.by_id)


def _status_lines(service: Any, path: str, status: dict[str, Any]) -> list[str]:
    lines = [f"session: {path}", f"settled: {'yes' if status['settled'] else 'no'}"]
    holders = service.holders(path)
    if len(holders) > 1:
        lines.append(
            f"held by {len(holders)} live Pis: {_holders_text(holders)} — two Pis on one file fork it "
            "(each appends under its own leaf, the other's turns leave the active branch): close one"
        )
    for h in holders:
        since = time.strftime("%H:%M:%S", time.localtime(h.since / 1000)) if h.since else "?"
        lines.append(
            f"held by: a live Pi, pid {h.pid}"
            + (f" (Pi {h.pi_version})" if h.pi_version else "")
            + f" since {since}, leaf {h.leaf_id or 'unknown'}; Pi commits"
        )
    lines.append("pending: " + (_describe_intent(status["pending"]) if "pending" in status else "none"))
    live_leaf = max(holders, key=lambda h: h.updated_at).leaf_id if holders else None
    latest, on_branch, in_file = _branch_facts(path, live_leaf)
    last = status.get("last")
    if last is None:
        lines.append("last: none")
    elif last["status"] == "committed" and last.get("entryId") not in on_branch:
        entry = last.get("entryId")
        where = (
            (
                "it is in the file but not on the active branch: a Pi holding the session wrote past it, so Pi "
                "never uses it (an orphan)"
            )
            if entry in in_file
            else "it is not in the session file"
        )
        lines.append(f"last: compaction {entry} was appended but is not in effect: {where}")
    else:
        lines.append("last: " + _describe_record(last))
    if latest is not None:
        who = (
            "Pi's own summary"
            if latest.get("fromHook") is not True
            else "the Fabric engine (through the Pi bridge or fabric-lsp's commit)"
        )
        when = str(latest.get("timestamp") or "?")
        lines.append(
            f"compaction in effect: {latest.get('id')} by {who}, {latest.get('tokensBefore')} tokens before, at {when}"
        )
    else:
        lines.append("compaction in effect: none on the active branch")
    cleared = service.cleared(path)
    if "pending" not in status and cleared is not None:
        lines.append(f"last request cleared without a commit: {cleared.get('reason')}")
    return lines


def _run_status(args: argparse.Namespace) -> int:
    try:
        _cfg, path, service = _setup(args)
    except ValueError as err:
        print(f"fabric-lsp compact-status: {err}", file=sys.stderr)
        return EXIT_USAGE
    status = protocol.to_wire(intent_status(service, path))
    text = "" if args.json else "\n".join(_status_lines(service, path, status))
    _print(args, status, text)
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
