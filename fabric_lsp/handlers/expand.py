"""`fabric/expand`: full source text of chosen entries, with integrity checks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fabric_lsp import protocol
from fabric_lsp.handlers.registry import feature
from fabric_lsp.handlers.request_runner import run_request

if TYPE_CHECKING:
    from fabric_lsp.server import FabricServer


@feature(protocol.EXPAND)
async def expand(ls: FabricServer, raw: Any) -> Any:
    def work(params: protocol.ExpandParams, cancel: Any, activity: Any) -> Any:
        return ls.engines.expand(params, ls.default_cwd(), cancel, activity)

    return await run_request(ls, protocol.EXPAND, raw, work, title="Fabric: expand", memory=True)
