"""`fabric/compactionPreview` and `fabric/branchSummaryPreview`: the exact summary the
Fabric engine would persist, computed from the session file without writing anything
(the same engine calls as the CLI's `preview` and `tree`: fabric_lsp/engine_owner.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fabric_lsp import protocol
from fabric_lsp.handlers.registry import feature
from fabric_lsp.handlers.request_runner import run_request

if TYPE_CHECKING:
    from fabric_lsp.server import FabricServer


@feature(protocol.COMPACTION_PREVIEW)
async def compaction_preview(ls: FabricServer, raw: Any) -> Any:
    return await run_request(
        ls,
        protocol.COMPACTION_PREVIEW,
        raw,
        ls.engines.compaction_preview,
        title="Fabric: compaction preview",
        heavy=True,
    )


@feature(protocol.BRANCH_SUMMARY_PREVIEW)
async def branch_summary_preview(ls: FabricServer, raw: Any) -> Any:
    return await run_request(
        ls,
        protocol.BRANCH_SUMMARY_PREVIEW,
        raw,
        ls.engines.branch_summary_preview,
        title="Fabric: branch summary preview",
        heavy=True,
    )
