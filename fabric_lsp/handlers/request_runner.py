"""Work-done progress, `fabric/activity`, cancellation and error mapping for every request.

`run_request` is the one body every handler shares: decode params strictly → run the
engine call in the engine executor with a CancelToken and an activity sink → return
plain JSON. Invariants: exactly one `end` per `begin` (also on error and cancellation),
no `report` after `end`, and `$/cancelRequest` answers -32800 promptly while the token
tells the engine to stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcRequestCancelled,
)

from fabric_lsp import protocol
from fabric_lsp.engine.activity import ActivityEvent, ActivitySink, Cancelled, CancelToken, ProgressEvent
from fabric_lsp.engine_owner import DomainError
from fabric_lsp.handlers.scheduling import run_heavy
from fabric_lsp.server import EncodedResult

if TYPE_CHECKING:
    from fabric_lsp.server import FabricServer

log = logging.getLogger("fabric_lsp.requests")

_token_ids = itertools.count(1)

CREATE_TIMEOUT_S = 5.0
SETTINGS_WAIT_S = 10.0
REPORT_INTERVAL_S = 0.05


class RequestProgress:
    """One request's `$/progress` stream plus its `fabric/activity` notifications.

    Engine events arrive from worker threads through `sink` and are replayed on the event
    loop; events before `begin` is sent are buffered, events after `end` are dropped.
    """

    def __init__(self, server: FabricServer, method: str, title: str, token: Any, *, create: bool) -> None:
        self.server = server
        self.method = method
        self.title = title
        self.token = token
        self._create = create and token is None and server.client_supports("window", "work_done_progress")
        self._started: asyncio.Task[Any] | None = None
        self._begun = False
        self._ended = False
        self._buffer: list[ProgressEvent] = []
        self._last_report = 0.0
        self._last_message: str | None = None
        self._last_pct = 0
        self._last_activity = float("-inf")
        # events from worker threads waiting for the loop (`sink`, `_drain`)
        self._lock = threading.Lock()
        self._queue: list[ProgressEvent] = []
        self._posted = False
        self._last_drain = float("-inf")

    def start(self) -> None:
        if self.token is None and not self._create:
            return
        self._started = asyncio.ensure_future(self._begin())

    async def _begin(self) -> None:
        if self.token is None:
            token = f"fabric-lsp/{next(_token_ids)}"
            # The create request must outlive this request: its answer may arrive after a
            # cancellation, and pygls fails on answers to requests whose future was
            # cancelled. So shield it, and forget the token if it ends up unused.
            creating = asyncio.ensure_future(self.server.work_done_progress.create_async(token))
            creating.add_done_callback(lambda done, t=token: self._created(done, t))
            try:
                await asyncio.wait_for(asyncio.shield(creating), CREATE_TIMEOUT_S)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the client refused or never answered: no progress
                log.info("window/workDoneProgress/create failed for %s: %s", self.method, err)
                return
            self.token = token
        if self._ended:
            return
        self.server.work_done_progress.begin(
            self.token, types.WorkDoneProgressBegin(title=self.title, cancellable=False, percentage=0)
        )
        self._begun = True
        for event in self._buffer:
            self._report(event, force=True)
        self._buffer.clear()

    def _created(self, done: asyncio.Future[Any], token: str) -> None:
        if not done.cancelled():
            done.exception()  # retrieved: a refusal is already logged by _begin
        if not self._begun:
            self.server.work_done_progress.tokens.pop(token, None)

    # called from worker threads
    def sink(self, event: ActivityEvent) -> None:
        """Queue an engine event for the loop. The loop is woken at most once per report
        interval (an indexing call reports every session it builds): a plain report replaces
        the plain one still waiting, a milestone or the end of a count is always kept."""
        if not isinstance(event, ProgressEvent):  # (an indexing event belongs to BackgroundProgress)
            return
        with self._lock:
            queue = self._queue
            last = queue[-1] if queue else None
            if last is not None and not (last.milestone or last.percentage == 100 or event.milestone):
                queue[-1] = event
            else:
                queue.append(event)
            if self._posted:
                return
            self._posted = True
            delay = max(0.0, self._last_drain + REPORT_INTERVAL_S - time.monotonic())
        self.server.call_in_loop(self._drain_after, delay)

    def _drain_after(self, delay: float) -> None:
        loop = self.server.loop
        if delay <= 0 or loop is None:
            self._drain()
        else:
            loop.call_later(delay, self._drain)

    def _drain(self) -> None:
        with self._lock:
            events, self._queue, self._posted = self._queue, [], False
            self._last_drain = time.monotonic()
        for event in events:
            self._on_event(event)

    def _on_event(self, event: ProgressEvent) -> None:
        if self._ended:
            return
        now = time.monotonic()
        # at most every 50 ms, but a milestone and the end of a count always go out
        if event.milestone or event.percentage == 100 or now - self._last_activity >= REPORT_INTERVAL_S:
            self._last_activity = now
            activity = protocol.ActivityProgress(
                message=event.message,
                percentage=event.percentage,
                milestone=True if event.milestone else None,
                request=self.method,
            )
            self.server.protocol.notify(protocol.ACTIVITY, protocol.to_wire(activity))
        if not self._begun:
            self._buffer = [event]  # only the latest matters before begin
            return
        self._report(event, force=event.milestone)

    def _report(self, event: ProgressEvent, *, force: bool = False) -> None:
        now = time.monotonic()
        message = event.message
        pct = event.percentage
        if not force and now - self._last_report < REPORT_INTERVAL_S and pct != 100:
            return
        if message == self._last_message and pct is None:
            return
        self._last_report = now
        self._last_message = message
        value = types.WorkDoneProgressReport(message=message or None)
        if isinstance(pct, (int, float)) and not isinstance(pct, bool):
            # never goes backwards within one request (phases restart their own counts)
            self._last_pct = max(self._last_pct, min(100, int(pct)))
            value.percentage = self._last_pct
        self.server.work_done_progress.report(self.token, value)

    async def end(self, message: str) -> None:
        if self._ended:
            return
        self._drain()  # (what the engine reported before it answered goes out first)
        if self._started is not None and not self._started.done():
            if message == "cancelled":  # answer promptly: never wait for the client here
                self._started.cancel()
            else:
                try:
                    await asyncio.shield(self._started)
                except BaseException:
                    pass
        self._ended = True
        if self._begun:
            self.server.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message=message))
            self.server.work_done_progress.tokens.pop(self.token, None)


class BackgroundProgress:
    """`$/progress` for server-initiated work: the background indexer's passes.

    Each pass with work is one server-created token (`window/workDoneProgress/create` when
    the client supports it, as `RequestProgress` does), `begin` … "Indexing N/M sessions"
    reports … `end`, paired even when the pass stops early. The end also goes out as a
    `fabric/activity` metrics event (`request: "fabric/backgroundIndex"`, `indexedSessions`,
    `eligibleSessions`) for clients without work-done progress.
    """

    METHOD = "fabric/backgroundIndex"
    TITLE = "Indexing sessions"

    def __init__(self, server: FabricServer) -> None:
        self.server = server
        self.current: RequestProgress | None = None

    def sink(self, event: ActivityEvent) -> None:  # from the indexer's thread
        self.server.call_in_loop(self._on_event, event)

    def _on_event(self, event: ActivityEvent) -> None:
        if isinstance(event, ProgressEvent):
            if self.current is not None:
                self.current._on_event(event)
            return
        if event.phase == "idle":  # nothing left to index: partial answers may be refreshed
            self.server.protocol.notify(
                protocol.ACTIVITY,
                {
                    "type": "metrics",
                    "request": self.METHOD,
                    "complete": True,
                    "indexedSessions": event.indexed,
                    "eligibleSessions": event.total,
                },
            )
            return
        if event.phase == "begin":
            if self.current is not None:  # never two open passes
                asyncio.ensure_future(self.current.end("done"))
            self.current = RequestProgress(self.server, self.METHOD, self.TITLE, None, create=True)
            self.current.start()
            return
        current, self.current = self.current, None
        total, indexed = event.total, event.indexed
        message = f"Indexed {indexed}/{total} sessions" + (" (stopped)" if event.cancelled else "")
        if current is not None:
            asyncio.ensure_future(current.end(message))
        self.server.protocol.notify(
            protocol.ACTIVITY,
            {
                "type": "metrics",
                "request": self.METHOD,
                "indexedSessions": indexed,
                "eligibleSessions": total,
            },
        )


def _internal_error(method: str, err: BaseException) -> JsonRpcInternalError:
    log.error("%s failed", method, exc_info=(type(err), err, err.__traceback__))
    return JsonRpcInternalError(message=f"{method} failed: {type(err).__name__}: {err}")


def decode(method: str, raw: Any) -> Any:
    try:
        return protocol.decode_params(method, raw)
    except protocol.InvalidParams as err:
        raise JsonRpcInvalidParams(message=str(err)) from None


async def run_request(
    server: FabricServer,
    method: str,
    raw_params: Any,
    work: Callable[[Any, CancelToken, ActivitySink], Any],
    *,
    title: str,
    long: bool = True,
    params: Any = None,
    memory: bool = False,
    heavy: bool = False,
    encode: bool = True,
) -> Any:
    """Decode, run `work(params, cancel, activity)` in the engine executor, map errors.

    `long` requests get a server-created progress token when the client sent none;
    `memory` requests run in the memory engine's own pool; `heavy` ones (previews) in
    their own bounded pool, identical ones computed once (handlers/scheduling.py).
    """
    if params is None:
        params = decode(method, raw_params)
    token = CancelToken()
    msg_id = server.protocol.msg_id  # (the message being dispatched: read before any await)
    if msg_id is not None:
        server.cancel_tokens[msg_id] = token
    progress = RequestProgress(server, method, title, getattr(params, "work_done_token", None), create=long)
    progress.start()
    outcome = "failed"
    try:
        pulled = server.settings_pulled
        if pulled is not None and not pulled.is_set():
            # An editor's first requests come right behind `initialized`: they are answered
            # with the client's settings (budgets, hot sessions), which that handler is
            # asking for now (at most SETTINGS_WAIT_S: the pull has its own timeout).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(pulled.wait(), SETTINGS_WAIT_S)
        loop = asyncio.get_running_loop()
        if heavy:
            result = await run_heavy(server, method, params, work, progress.sink)
        else:
            call = functools.partial(work, params, token, progress.sink)
            pool = server.memory_executor if memory else server.engine_executor
            result = await loop.run_in_executor(pool, call)
        outcome = "done"
        # A result Struct goes out as its JSON (server.EncodedResult: pygls would never
        # answer a Struct); with `encode=False` as the Struct itself, for a handler that
        # reads the result (symbols, CodeLens) and answers with LSP types of its own.
        if isinstance(result, msgspec.Struct) and encode:
            return EncodedResult(result)
        return result
    except asyncio.CancelledError:
        token.cancel()
        outcome = "cancelled"
        raise
    except Cancelled:
        outcome = "cancelled"
        raise JsonRpcRequestCancelled(message=f"{method} was cancelled") from None
    except DomainError as err:
        outcome = "done"
        return err.to_result()
    except JsonRpcException:
        raise
    except protocol.InvalidParams as err:
        raise JsonRpcInvalidParams(message=str(err)) from None
    except ValueError as err:  # engines reject semantically invalid params this way
        log.info("%s: invalid params: %s", method, err)
        raise JsonRpcInvalidParams(message=f"{method}: {err}") from None
    except Exception as err:
        raise _internal_error(method, err) from None
    finally:
        if msg_id is not None:
            server.cancel_tokens.pop(msg_id, None)
        await progress.end(outcome)
