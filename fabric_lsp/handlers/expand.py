"""`fabric/expand`: full source text of chosen entries, with integrity checks."""

from __future__ import annotations

from typing import Any

from fabric_lsp import protocol
from fabric_lsp.handlers.progress import run_request


async def expand(ls: Any, raw: Any) -> Any:
    def work(params: protocol.ExpandParams, cancel: Any, activity: Any) -> Any:
        engine = ls.engines.memory(protocol.EXPAND)
        return engine.expand(
            protocol.params_to_dict(params), cwd=ls.default_cwd(), cancel=cancel, activity=activity
        )

    return await run_request(ls, protocol.EXPAND, raw, work, title="Fabric: expand", memory=True)


def register(server: Any) -> None:
    server.feature(protocol.EXPAND)(expand)
