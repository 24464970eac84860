"""`fabric-lsp preview` and `fabric-lsp tree`: deterministic compaction and branch
summary previews from the command line (the same engine calls the server makes)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from fabric_lsp import protocol
from fabric_lsp.commands.face import (
    EXIT_NOT_DONE,
    EXIT_USAGE,
    CliError,
    add_settings_arguments,
    cli_engines,
    decode,
    fail,
    given,
    session_ref,
)
from fabric_lsp.engine.compaction.api import PreviewError
from fabric_lsp.engine_owner import DomainError


def _write(text: str) -> None:
    from fabric_lsp.engine.compaction.api import printable

    sys.stdout.buffer.write(printable(text))
    sys.stdout.buffer.flush()


def _emit_json(obj: Any) -> None:
    from fabric_lsp.engine.compaction.api import result_json

    sys.stdout.buffer.write(result_json(obj) + b"\n")
    sys.stdout.buffer.flush()


def _preview_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", metavar="SESSION", help="session JSONL path, file:// URI or session id")
    p.add_argument("--json", action="store_true", help="print the fabric/compactionPreview result object")
    p.add_argument(
        "--context-window", type=int, metavar="N", help="model window (default 200000; 0 = no model metadata)"
    )
    p.add_argument("--reserve", type=int, metavar="N", help="Pi reserveTokens (default 16384)")
    p.add_argument("--keep-recent", type=int, metavar="N", help="Pi keepRecentTokens (default 20000)")
    p.add_argument("--ratio", type=float, metavar="R", help="Fabric targetContextRatio (0.25-0.85, default 0.65)")
    p.add_argument("--tokens-before", type=int, metavar="N", help="override Pi's tokensBefore")
    p.add_argument("--reason", choices=("manual", "threshold", "overflow"), default="manual")
    p.add_argument("--instructions", metavar="TEXT", help="custom instructions (plain text or a typed request)")
    p.add_argument("--preserve", action="append", metavar="ITEM", help="typed preserve item (repeatable)")
    p.add_argument("--leaf", metavar="ID", help="preview the branch ending at this entry (default: the leaf)")
    p.add_argument("--qa", action="store_true", help="include the reconstruction QA report")
    add_settings_arguments(p)


def _domain_error(command: str, err: Exception) -> CliError:
    if isinstance(err, DomainError):
        lines = [f"fabric-lsp {command}: {err.code}: {err.message}"]
        lines += [f"  {c}" for c in err.candidates or []]
        return CliError("\n".join(lines), EXIT_USAGE)
    if isinstance(err, PreviewError):
        return CliError(f"fabric-lsp {command}: {err.code}: {err.message}", EXIT_USAGE)
    raise err


def _engine_call(args: argparse.Namespace, command: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Decode as the server does, then the same engine call the server's handler makes."""
    p = decode(command, method, params)
    engines = cli_engines(args, command)
    call = engines.compaction_preview if method == protocol.COMPACTION_PREVIEW else engines.branch_summary_preview
    try:
        return protocol.to_wire(call(p))
    except (DomainError, PreviewError) as err:
        raise _domain_error(command, err) from None
    finally:
        engines.close()


def _run_preview(args: argparse.Namespace) -> int:
    params = given(
        {
            "session": session_ref(args.session),
            "instructions": args.instructions,
            "preserve": args.preserve,
            "reason": args.reason,
            "contextWindow": args.context_window,
            "reserveTokens": args.reserve,
            "keepRecentTokens": args.keep_recent,
            "targetContextRatio": args.ratio,
            "tokensBefore": args.tokens_before,
            "leafId": args.leaf,
            "includeQa": args.qa or None,
        }
    )
    try:
        res = _engine_call(args, "preview", protocol.COMPACTION_PREVIEW, params)
    except CliError as err:
        return fail(err)
    if args.json:
        _emit_json(res)
        return 0 if res["outcome"] == "compacted" else EXIT_NOT_DONE
    for w in res.get("warnings", []):
        print(f"warning: {w}", file=sys.stderr)
    if res["outcome"] == "compacted":
        _write(res["summary"])
        print(
            f"firstKeptEntryId={res['firstKeptEntryId']!s} tokensBefore={res['tokensBefore']}",
            file=sys.stderr,
        )
        if "qa" in res:
            qa = res["qa"]
            print(f"qa: score={qa['score']} content={qa['contentScore']} address={qa['addressScore']}", file=sys.stderr)
            for f in qa["failures"]:
                print(f"qa failure {f['id']}: {f['reason']}", file=sys.stderr)
        return 0
    print(f"fabric-lsp preview: {res['outcome']} ({res.get('sessionFile')}): {res.get('reason', '')}", file=sys.stderr)
    return EXIT_NOT_DONE


def _tree_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", metavar="SESSION", help="session JSONL path, file:// URI or session id")
    p.add_argument("--to", required=True, metavar="TARGET", help="navigation target entry id")
    p.add_argument("--from", dest="from_id", metavar="LEAF", help="the leaf being left (default: the session leaf)")
    p.add_argument("--instructions", metavar="TEXT", help="custom instructions")
    p.add_argument("--preserve", action="append", metavar="ITEM", help="typed preserve item (repeatable)")
    p.add_argument("--replace-instructions", action="store_true", help="Pi replaceInstructions mode (Fabric defers)")
    p.add_argument("--json", action="store_true", help="print the fabric/branchSummaryPreview result object")
    add_settings_arguments(p)


def _run_tree(args: argparse.Namespace) -> int:
    params = given(
        {
            "session": session_ref(args.session),
            "targetId": args.to,
            "fromId": args.from_id,
            "instructions": args.instructions,
            "preserve": args.preserve,
            "replaceInstructions": args.replace_instructions or None,
        }
    )
    try:
        res = _engine_call(args, args.command, protocol.BRANCH_SUMMARY_PREVIEW, params)
    except CliError as err:
        return fail(err)
    if args.json:
        _emit_json(res)
        return 0 if res["outcome"] == "summarized" else EXIT_NOT_DONE
    if res["outcome"] == "summarized":
        _write(res["summary"])
        return 0
    print(
        f"fabric-lsp {args.command}: {res['outcome']}: {res.get('reason', '')} ({res['entriesSummarized']} entries)",
        file=sys.stderr,
    )
    return EXIT_NOT_DONE


SUBCOMMANDS = {
    "preview": ("preview the deterministic compaction summary of a session branch", _preview_args, _run_preview),
    "branch-summary": (
        "preview the branch summary Fabric attaches when navigating away from a branch (Pi's /tree)",
        _tree_args,
        _run_tree,
    ),
    "tree": ("the same as branch-summary (its first name, kept for scripts)", _tree_args, _run_tree),
}
