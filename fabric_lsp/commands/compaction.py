"""`fabric-lsp preview` and `fabric-lsp tree`: deterministic compaction and branch
summary previews from the command line (the same engine calls the server makes)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any



def _resolve(ref: str) -> str:
    """A session path, file:// URI, or id (resolved in the default session dir)."""
    if ref.startswith("file://"):
        from urllib.parse import unquote, urlparse

        return unquote(urlparse(ref).path)
    if os.path.exists(ref):
        return ref
    from fabric_lsp.engine.session import default_agent_dir, default_session_dir, resolve_session

    found = resolve_session(ref, default_session_dir(default_agent_dir()))
    return os.fspath(getattr(found, "path", found))


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
    p.add_argument("--context-window", type=int, metavar="N", help="model window (default 200000; 0 = no model metadata)")
    p.add_argument("--reserve", type=int, metavar="N", help="Pi reserveTokens (default 16384)")
    p.add_argument("--keep-recent", type=int, metavar="N", help="Pi keepRecentTokens (default 20000)")
    p.add_argument("--ratio", type=float, metavar="R", help="Fabric targetContextRatio (0.25-0.85, default 0.65)")
    p.add_argument("--tokens-before", type=int, metavar="N", help="override Pi's tokensBefore")
    p.add_argument("--reason", choices=("manual", "threshold", "overflow"), default="manual")
    p.add_argument("--instructions", metavar="TEXT", help="custom instructions (plain text or a typed request)")
    p.add_argument("--preserve", action="append", metavar="ITEM", help="typed preserve item (repeatable)")
    p.add_argument("--leaf", metavar="ID", help="preview the branch ending at this entry (default: the leaf)")
    p.add_argument("--qa", action="store_true", help="include the reconstruction QA report")


def _run_preview(args: argparse.Namespace) -> int:
    from fabric_lsp.engine.compaction.api import PreviewError, preview_compaction

    try:
        path = _resolve(args.session)
        res = preview_compaction(
            path,
            instructions=args.instructions,
            preserve=args.preserve,
            reason=args.reason,
            context_window=args.context_window,
            reserve_tokens=args.reserve,
            keep_recent_tokens=args.keep_recent,
            target_context_ratio=args.ratio,
            tokens_before=args.tokens_before,
            leaf_id=args.leaf,
            include_qa=args.qa,
        )
    except PreviewError as e:
        print(f"fabric-lsp preview: {e.code}: {e.message}", file=sys.stderr)
        return 2
    except Exception as e:  # SessionNotFound / AmbiguousSession and friends
        print(f"fabric-lsp preview: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    if args.json:
        _emit_json(res)
        return 0 if res["outcome"] == "compacted" else 1
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
    print(f"{res['outcome']}: {res.get('reason', '')}", file=sys.stderr)
    return 1


def _tree_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", metavar="SESSION", help="session JSONL path, file:// URI or session id")
    p.add_argument("--to", required=True, metavar="TARGET", help="navigation target entry id")
    p.add_argument("--from", dest="from_id", metavar="LEAF", help="the leaf being left (default: the session leaf)")
    p.add_argument("--instructions", metavar="TEXT", help="custom instructions")
    p.add_argument("--preserve", action="append", metavar="ITEM", help="typed preserve item (repeatable)")
    p.add_argument("--replace-instructions", action="store_true", help="Pi replaceInstructions mode (Fabric defers)")
    p.add_argument("--json", action="store_true", help="print the fabric/branchSummaryPreview result object")


def _run_tree(args: argparse.Namespace) -> int:
    from fabric_lsp.engine.compaction.api import PreviewError, preview_branch_summary

    try:
        res = preview_branch_summary(
            _resolve(args.session),
            target_id=args.to,
            from_id=args.from_id,
            instructions=args.instructions,
            preserve=args.preserve,
            replace_instructions=args.replace_instructions,
        )
    except PreviewError as e:
        print(f"fabric-lsp tree: {e.code}: {e.message}", file=sys.stderr)
        return 2
    except Exception as e:
        print(f"fabric-lsp tree: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    if args.json:
        _emit_json(res)
        return 0 if res["outcome"] == "summarized" else 1
    if res["outcome"] == "summarized":
        _write(res["summary"])
        return 0
    print(f"{res['outcome']}: {res.get('reason', '')} ({res['entriesSummarized']} entries)", file=sys.stderr)
    return 1


SUBCOMMANDS = {
    "preview": ("preview the deterministic compaction summary of a session branch", _preview_args, _run_preview),
    "tree": ("preview the branch summary Fabric attaches when navigating away from a branch", _tree_args, _run_tree),
}
