"""`fabric/recall`: exact recall over past sessions (rendered text uses entry references)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fabric_lsp import protocol
from fabric_lsp.handlers.registry import feature
from fabric_lsp.handlers.request_runner import run_request

if TYPE_CHECKING:
    from fabric_lsp.server import FabricServer


def recall_work(ls: FabricServer) -> Any:
    def work(params: protocol.RecallParams, cancel: Any, activity: Any) -> Any:
        return ls.engines.recall(params, ls.default_cwd(), cancel, activity)

    return work


@feature(protocol.RECALL)
async def recall(ls: FabricServer, raw: Any) -> Any:
    return await run_request(ls, protocol.RECALL, raw, recall_work(ls), title="Fabric: recall", memory=True)
