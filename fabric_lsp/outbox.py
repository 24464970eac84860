"""The server's output to the client (stdout), written by one thread of its own.

pygls writes every frame with a blocking `write` + `flush` on the event loop: a client
that stops reading fills the pipe (64 KiB), the write blocks, and with it the whole
server, the reader of its input included. Here the loop only appends the frame to a
queue; the writer thread writes frames in order (several at a time when they wait).

Bound: `max_pending` bytes queued (`FABRIC_LSP_MAX_PENDING_OUTPUT`, 64 MiB by default).
Past it, while the client is not reading:

* notifications that only inform (`window/logMessage`, `fabric/activity`, `$/progress`
  reports) are dropped and counted; answers, server requests and progress begin/end are
  always queued, so no request goes unanswered and no progress is left open;
* the server stops reading its input (`wait_room`, awaited by the framing reader before
  each message) until the queue is below half the bound: output then only grows by the
  answers of the work already taken, and the client's own writes block.

Each is logged once per episode (stderr, and the client when it reads again).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import threading
from typing import BinaryIO

log = logging.getLogger("fabric_lsp.outbox")

MAX_PENDING_OUTPUT = 64 * 1024 * 1024
WRITE_BATCH = 1 << 20
EXIT_DRAIN_S = 5.0


def max_pending_from_env() -> int:
    raw = os.environ.get("FABRIC_LSP_MAX_PENDING_OUTPUT", "")
    try:
        value = int(raw)
    except ValueError:
        return MAX_PENDING_OUTPUT
    return value if value > 0 else MAX_PENDING_OUTPUT


class Outbox:
    """pygls' writer interface (`write`, `close`) over a queue and a writer thread."""

    def __init__(self, stream: BinaryIO, *, max_pending: int = MAX_PENDING_OUTPUT) -> None:
        self._stream = stream
        self.max_pending = max_pending
        self._queue: collections.deque[bytes] = collections.deque()
        self._cond = threading.Condition()
        self.pending = 0  # bytes queued or being written
        self.dropped = 0  # notifications dropped over the bound (this episode)
        self.dropped_total = 0
        self._over = False  # over the bound, until below half of it
        self._room: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._closing = False
        self._lost: str | None = None
        self._thread = threading.Thread(target=self._run, name="fabric-stdout", daemon=True)
        self._thread.start()

    # -- the loop's side ------------------------------------------------------------

    def write(self, data: bytes, *, droppable: bool = False) -> None:
        with self._cond:
            if self._lost is not None or self._closing:
                return
            if droppable and self._over:
                self.dropped += 1
                self.dropped_total += 1
                return
            self._queue.append(data)
            self.pending += len(data)
            if self.pending > self.max_pending and not self._over:
                self._over = True
                over = self.pending
            else:
                over = 0
            self._cond.notify_all()
        if over:
            log.warning(
                "output to the client: %d bytes waiting (bound %d): the client is not reading; "
                "informational notifications are dropped and input is paused until it reads",
                over,
                self.max_pending,
            )

    async def wait_room(self) -> None:
        """Return once the output is under its bound (at once, normally)."""
        with self._cond:
            if not self._over or self._lost is not None:
                return
            loop = asyncio.get_running_loop()
            fut: asyncio.Future[None] = loop.create_future()
            self._room.append((loop, fut))
        await fut

    def close(self) -> None:
        """pygls calls this on `exit`, right before it exits: write what is queued (for
        at most EXIT_DRAIN_S: the process is ending anyway), then close the stream."""
        self.drain(EXIT_DRAIN_S)
        self._close_stream()

    def drain(self, timeout: float) -> bool:
        """Wait until everything queued is written (or the stream is lost); False when
        `timeout` passed first."""
        with self._cond:
            return self._cond.wait_for(lambda: self.pending == 0 or self._lost is not None, timeout)

    # -- the writer thread ------------------------------------------------------------

    def _close_stream(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            if self.pending:
                return  # still blocked on a client that does not read: leave it to exit
        try:
            self._stream.close()
        except Exception:
            pass

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._closing)
                if not self._queue:
                    return
                parts = [self._queue.popleft()]
                size = len(parts[0])
                while self._queue and size + len(self._queue[0]) <= WRITE_BATCH:
                    part = self._queue.popleft()
                    parts.append(part)
                    size += len(part)
            try:
                self._stream.write(b"".join(parts) if len(parts) > 1 else parts[0])
                self._stream.flush()
            except (OSError, ValueError) as err:
                self._connection_lost(err)
                return
            self._written(size)

    def _written(self, size: int) -> None:
        wake: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        dropped = 0
        ended = False
        with self._cond:
            self.pending -= size
            if self._over and self.pending <= self.max_pending // 2:
                self._over, ended = False, True
                wake, self._room = self._room, []
                dropped, self.dropped = self.dropped, 0
            self._cond.notify_all()
        for loop, fut in wake:
            loop.call_soon_threadsafe(_resolve, fut)
        if ended:
            log.warning(
                "output to the client: the client reads again; %d notification(s) were dropped while it did not",
                dropped,
            )

    def _connection_lost(self, err: BaseException) -> None:
        with self._cond:
            self._lost = f"{type(err).__name__}: {err}"
            self._queue.clear()
            self.pending = 0
            wake, self._room = self._room, []
            self._cond.notify_all()
        for loop, fut in wake:
            loop.call_soon_threadsafe(_resolve, fut)
        if not self._closing:
            log.error("the connection to the client is lost (%s): output is dropped", self._lost)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
