"""`fabric/sessions`: the session list of a scope, newest first."""

from __future__ import annotations

from typing import Any

from fabric_lsp import protocol
from fabric_lsp.handlers.progress import run_request


async def sessions(ls: Any, raw: Any) -> Any:
    def work(params: protocol.SessionsParams, cancel: Any, activity: Any) -> Any:
        engine = ls.engines.memory(protocol.SESSIONS)
        cwd = params.cwd or ls.default_cwd()
        return engine.sessions(protocol.params_to_dict(params), cwd=cwd, cancel=cancel, activity=activity)

    return await run_request(ls, protocol.SESSIONS, raw, work, title="Fabric: listing sessions", memory=True)


def register(server: Any) -> None:
    server.feature(protocol.SESSIONS)(sessions)
