"""`fabric/compact/request|status|cancel`: the pending compaction intent of a session.
The intents engine commits at a safe boundary and calls back; the server turns that into
the `fabric/compactionCommitted` notification (fabric_lsp/engines.py)."""

from __future__ import annotations

from typing import Any

from fabric_lsp import protocol
from fabric_lsp.handlers.progress import run_request


def _intent_call(ls: Any, method: str, op: str) -> Any:
    def work(p: Any, cancel: Any, activity: Any) -> Any:
        service = ls.engines.intents()
        path = ls.engines.session_path(p.session)
        if op == "request":
            args = protocol.params_to_dict(p)
            args.pop("session", None)
            try:
                return service.request(path, args)
            except ValueError as err:  # seed 001's bounds message
                raise protocol.InvalidParams(f"{method}: {err}") from None
        return getattr(service, op)(path)

    return work


async def compact_request(ls: Any, raw: Any) -> Any:
    m = protocol.COMPACT_REQUEST
    return await run_request(ls, m, raw, _intent_call(ls, m, "request"), title="Fabric: compaction request", long=False)


async def compact_status(ls: Any, raw: Any) -> Any:
    m = protocol.COMPACT_STATUS
    return await run_request(ls, m, raw, _intent_call(ls, m, "status"), title="Fabric: compaction status", long=False)


async def compact_cancel(ls: Any, raw: Any) -> Any:
    m = protocol.COMPACT_CANCEL
    return await run_request(ls, m, raw, _intent_call(ls, m, "cancel"), title="Fabric: cancel compaction", long=False)


def register(server: Any) -> None:
    server.feature(protocol.COMPACT_REQUEST)(compact_request)
    server.feature(protocol.COMPACT_STATUS)(compact_status)
    server.feature(protocol.COMPACT_CANCEL)(compact_cancel)
