"""`fabric/compact/request|status|cancel`: the pending compaction intent of a session.
The intents engine commits at a safe boundary and calls back; the server turns that into
the `fabric/compactionCommitted` notification (fabric_lsp/engines.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fabric_lsp import protocol
from fabric_lsp.handlers.progress import run_request

if TYPE_CHECKING:
    from fabric_lsp.server import FabricServer


async def compact_request(ls: "FabricServer", raw: Any) -> Any:
    return await run_request(ls, protocol.COMPACT_REQUEST, raw, ls.engines.compact_request,
                             title="Fabric: compaction request", long=False)


async def compact_status(ls: "FabricServer", raw: Any) -> Any:
    return await run_request(ls, protocol.COMPACT_STATUS, raw, ls.engines.compact_status,
                             title="Fabric: compaction status", long=False)


async def compact_cancel(ls: "FabricServer", raw: Any) -> Any:
    return await run_request(ls, protocol.COMPACT_CANCEL, raw, ls.engines.compact_cancel,
                             title="Fabric: cancel compaction", long=False)


def register(server: "FabricServer") -> None:
    server.feature(protocol.COMPACT_REQUEST)(compact_request)
    server.feature(protocol.COMPACT_STATUS)(compact_status)
    server.feature(protocol.COMPACT_CANCEL)(compact_cancel)
