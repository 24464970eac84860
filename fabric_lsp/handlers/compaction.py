"""`fabric/compactionPreview` and `fabric/branchSummaryPreview`: the exact summary the
Fabric engine would persist, computed from the session file without writing anything."""

from __future__ import annotations

from typing import Any

from fabric_lsp import protocol
from fabric_lsp.handlers.engines import resolve_session_ref
from fabric_lsp.handlers.progress import run_request


def _pick(value: Any, default: Any) -> Any:
    return default if value is None else value


async def compaction_preview(ls: Any, raw: Any) -> Any:
    method = protocol.COMPACTION_PREVIEW

    def work(p: protocol.CompactionPreviewParams, cancel: Any, activity: Any) -> Any:
        preview = ls.engines.compaction(method, "preview_compaction")
        path = resolve_session_ref(ls.engines, method, p.session)
        cfg = ls.config
        return preview(
            str(path),  # the engine streams and hashes the same bytes (lower peak memory)
            session_path=str(path),
            instructions=p.instructions,
            preserve=p.preserve,
            reason=p.reason,
            context_window=_pick(p.context_window, cfg.compaction["contextWindow"]),
            reserve_tokens=_pick(p.reserve_tokens, cfg.reserve_tokens),
            keep_recent_tokens=_pick(p.keep_recent_tokens, cfg.keep_recent_tokens),
            target_context_ratio=_pick(p.target_context_ratio, cfg.compaction["targetContextRatio"]),
            tokens_before=p.tokens_before,
            leaf_id=p.leaf_id,
            include_qa=p.include_qa,
            settings=dict(cfg.compaction),
            cancel=cancel,
            activity=activity,
        )

    return await run_request(ls, method, raw, work, title="Fabric: compaction preview")


async def branch_summary_preview(ls: Any, raw: Any) -> Any:
    method = protocol.BRANCH_SUMMARY_PREVIEW

    def work(p: protocol.BranchSummaryPreviewParams, cancel: Any, activity: Any) -> Any:
        preview = ls.engines.compaction(method, "preview_branch_summary")
        path = resolve_session_ref(ls.engines, method, p.session)
        return preview(
            str(path),  # the engine streams and hashes the same bytes (lower peak memory)
            session_path=str(path),
            target_id=p.target_id,
            from_id=p.from_id,
            instructions=p.instructions,
            preserve=p.preserve,
            replace_instructions=bool(p.replace_instructions),
            settings=dict(ls.config.compaction),
            cancel=cancel,
            activity=activity,
        )

    return await run_request(ls, method, raw, work, title="Fabric: branch summary preview")


def register(server: Any) -> None:
    server.feature(protocol.COMPACTION_PREVIEW)(compaction_preview)
    server.feature(protocol.BRANCH_SUMMARY_PREVIEW)(branch_summary_preview)
