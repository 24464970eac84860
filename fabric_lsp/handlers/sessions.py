"""`fabric/sessions`: the session list of a scope, newest first."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fabric_lsp import protocol
from fabric_lsp.handlers.registry import feature
from fabric_lsp.handlers.request_runner import run_request

if TYPE_CHECKING:
    from fabric_lsp.server import FabricServer


@feature(protocol.SESSIONS)
async def sessions(ls: FabricServer, raw: Any) -> Any:
    def work(params: protocol.SessionsParams, cancel: Any, activity: Any) -> Any:
        return ls.engines.sessions(params, ls.default_cwd(), cancel, activity)

    return await run_request(ls, protocol.SESSIONS, raw, work, title="Fabric: listing sessions", memory=True)
