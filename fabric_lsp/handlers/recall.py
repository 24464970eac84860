"""`fabric/recall`: exact recall over past sessions (rendered text uses entry references)."""

from __future__ import annotations

from typing import Any

from fabric_lsp import protocol
from fabric_lsp.handlers.progress import run_request


def recall_work(ls: Any, method: str = protocol.RECALL) -> Any:
    def work(params: protocol.RecallParams, cancel: Any, activity: Any) -> Any:
        engine = ls.engines.memory(method)
        cwd = params.cwd or ls.default_cwd()
        return engine.recall(protocol.params_to_dict(params), cwd=cwd, cancel=cancel, activity=activity)

    return work


async def recall(ls: Any, raw: Any) -> Any:
    return await run_request(ls, protocol.RECALL, raw, recall_work(ls), title="Fabric: recall", memory=True)


def register(server: Any) -> None:
    server.feature(protocol.RECALL)(recall)
