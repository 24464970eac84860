"""Back-pressure and fairness for CPU-heavy requests (compaction and branch previews).

* Heavy work runs in its own small pool (`FabricServer.heavy_executor`), so cheap
  requests (status, hover, definition, lenses) in the engine pool are never queued
  behind it. Each of its threads resolves the request and hands the computation to a
  worker process (`FabricServer.preview_pool`, engine/procpool.py), so the computation
  never holds this process' GIL: the reader and the loop keep running at full speed.
* Identical in-flight heavy requests (same method, same params but the progress token)
  are computed once and the answer is shared.
* At most `MAX_HEAVY` distinct heavy computations are queued or running; one more is
  answered at once with -32803 (RequestFailed) naming the bound, instead of a queue that
  grows without limit.
* A cancelled waiter stops waiting at once (-32800); the shared computation is cancelled
  (dropped from the queue before it runs, or stopped at its next check in the worker
  process) when its last waiter is gone.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec
from pygls.exceptions import JsonRpcException

from fabric_lsp.engine.activity import ActivityEvent, ActivitySink, CancelToken

if TYPE_CHECKING:
    from fabric_lsp.server import FabricServer

MAX_HEAVY = 16
REQUEST_FAILED = -32803


class ServerBusy(JsonRpcException):
    CODE = REQUEST_FAILED


@dataclass
class _Shared:
    future: asyncio.Future[Any]
    token: CancelToken
    waiters: int = 0
    sinks: list[ActivitySink] = field(default_factory=list)
    job: asyncio.Future[Any] | None = None

    def sink(self, event: ActivityEvent) -> None:
        for s in list(self.sinks):
            s(event)


def request_key(method: str, params: Any) -> bytes:
    """What makes two requests the same computation: the method and the params without
    the client's progress token."""
    raw = msgspec.to_builtins(params)
    if isinstance(raw, dict):
        raw.pop("workDoneToken", None)
    return method.encode() + b"\0" + msgspec.json.encode(raw, order="sorted")


async def run_heavy(
    server: FabricServer,
    method: str,
    params: Any,
    work: Callable[[Any, CancelToken, ActivitySink], Any],
    sink: ActivitySink,
) -> Any:
    """Run (or join) the heavy computation of `method` with `params`."""
    inflight: dict[bytes, _Shared] = server.heavy_inflight
    key = request_key(method, params)
    shared = inflight.get(key)
    if shared is None:
        if len(inflight) >= MAX_HEAVY:
            raise ServerBusy(
                message=f"{method}: the server is busy: {len(inflight)} previews are queued or running "
                f"(at most {MAX_HEAVY}); try again when they finish"
            )
        token = CancelToken()
        loop = asyncio.get_running_loop()
        shared = _Shared(future=loop.create_future(), token=token)
        call = functools.partial(work, params, token, shared.sink)
        job = loop.run_in_executor(server.heavy_executor, call)
        inflight[key] = shared

        def done(f: asyncio.Future[Any], s: _Shared = shared) -> None:
            if inflight.get(key) is s:
                del inflight[key]
            if s.future.done():
                return
            if f.cancelled():
                s.future.cancel()
            elif (err := f.exception()) is not None:
                s.future.set_exception(err)
            else:
                s.future.set_result(f.result())

        job.add_done_callback(done)
        shared.job = job
    shared.waiters += 1
    shared.sinks.append(sink)
    try:
        return await asyncio.shield(shared.future)
    except asyncio.CancelledError:
        shared.waiters -= 1
        if shared.waiters <= 0:
            shared.token.cancel()  # a running computation stops at its next check
            if shared.job is not None:
                shared.job.cancel()  # a queued one is dropped before it starts
            if inflight.get(key) is shared:
                del inflight[key]
        raise
    finally:
        if sink in shared.sinks:
            shared.sinks.remove(sink)
