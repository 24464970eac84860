"""Engine-side activity and cancellation: typed events and a token.

The engine reports what it is doing through an `ActivitySink` callback and checks a
`CancelToken` at safe points. Neither knows about LSP: `handlers/request_runner.py` turns
activity events into `$/progress` and `fabric/activity`, and a `$/cancelRequest` sets
the token. Invariant: an engine call that observes a cancelled token raises `Cancelled`
before it writes anything durable (no partial cache records).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal

import msgspec


class ProgressEvent(msgspec.Struct, frozen=True, kw_only=True):
    """What an engine call is doing now: `$/progress` reports and `fabric/activity`
    progress events (protocol.ActivityProgress) are made of it."""

    message: str
    percentage: int | None = None  # 0..100
    milestone: bool = False  # a phase began: sent even within the server's 50 ms throttle


class IndexingEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A pass of the background indexer (memory/background.py): `begin`, `end`, and `idle`
    when nothing is left to index (editors refresh partial answers then)."""

    phase: Literal["begin", "end", "idle"]
    total: int
    indexed: int
    built: int = 0
    cancelled: bool = False


ActivityEvent = ProgressEvent | IndexingEvent
ActivitySink = Callable[[ActivityEvent], None]


class Cancelled(Exception):
    """Raised by `CancelToken.check()` once the caller asked to stop."""


class CancelToken:
    """A thread-safe flag set by the caller and polled by engine loops."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        if self._event.is_set():
            raise Cancelled()


def check(token: CancelToken | None) -> None:
    """Raise `Cancelled` when `token` is set; a missing token never cancels."""
    if token is not None and token.cancelled:
        raise Cancelled()


def report(sink: ActivitySink | None, message: str, percentage: int | None = None, *, milestone: bool = False) -> None:
    """Send one progress event to `sink` (no-op without a sink). A `milestone` marks the
    start of a phase a client may wait for (the regex handed to its worker): the server
    sends it even within its 50 ms throttle."""
    if sink is None:
        return
    pct = None if percentage is None else max(0, min(100, int(percentage)))
    sink(ProgressEvent(message=message, percentage=pct, milestone=milestone))
