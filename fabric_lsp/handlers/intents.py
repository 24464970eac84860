"""`fabric/compact/request|status|cancel`: the pending compaction intent of a session.
The intents engine commits at a safe boundary and calls back; the server turns that into
the `fabric/compactionCommitted` notification (fabric_lsp/engine_owner.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fabric_lsp import protocol
from fabric_lsp.handlers.registry import feature
from fabric_lsp.handlers.request_runner import run_request

if TYPE_CHECKING:
    from fabric_lsp.server import FabricServer


@feature(protocol.COMPACT_REQUEST)
async def compact_request(ls: FabricServer, raw: Any) -> Any:
    return await run_request(
        ls, protocol.COMPACT_REQUEST, raw, ls.engines.compact_request, title="Fabric: compaction request", long=False
    )


@feature(protocol.COMPACT_STATUS)
async def compact_status(ls: FabricServer, raw: Any) -> Any:
    return await run_request(
        ls, protocol.COMPACT_STATUS, raw, ls.engines.compact_status, title="Fabric: compaction status", long=False
    )


@feature(protocol.COMPACT_CANCEL)
async def compact_cancel(ls: FabricServer, raw: Any) -> Any:
    return await run_request(
        ls, protocol.COMPACT_CANCEL, raw, ls.engines.compact_cancel, title="Fabric: cancel compaction", long=False
    )
