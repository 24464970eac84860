"""Engine-side activity and cancellation, as plain Python objects.

The engine reports what it is doing through an `ActivitySink` callback and checks a
`CancelToken` at safe points. Neither knows about LSP: `handlers/request_runner.py` turns
activity events into `$/progress` and `fabric/activity`, and a `$/cancelRequest` sets
the token. Invariant: an engine call that observes a cancelled token raises `Cancelled`
before it writes anything durable (no partial cache records).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

# An activity event is a plain dict shaped as the `fabric/activity` notification params:
#   {"type": "progress", "message": str, "percentage"?: int}
#   {"type": "entity", "kind": str, "id": str, ...}
#   {"type": "metrics", ...}
ActivitySink = Callable[[dict[str, Any]], None]


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
    event: dict[str, Any] = {"type": "progress", "message": message}
    if percentage is not None:
        event["percentage"] = max(0, min(100, int(percentage)))
    if milestone:
        event["milestone"] = True
    sink(event)
