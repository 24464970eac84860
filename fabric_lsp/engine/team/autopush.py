"""`team.autoPush`: the server pushes the opted-in sessions in the background.

A push is asked for whenever the local background indexer finds everything indexed (at
start, and after every change it was told about): the same incremental push as
`fabric-lsp team push` (engine/team/push.py), so an unchanged agent dir costs one query
and a grown session sends only its new entries. Requests that come while a push runs
coalesce into one more push after it. A failure (database down, role refused) is logged
and reported once per distinct message through `on_error`; local recall is untouched,
and the next request tries again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class AutoPush:
    def __init__(
        self,
        push: Callable[[], Any],
        *,
        on_report: Callable[[Any], None] | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self._push = push
        self._on_report = on_report
        self._on_error = on_error
        self._wake = threading.Event()
        self._stopped = False
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._asked = 0  # requests so far
        self._served = 0  # requests covered by a finished push (it started after them)
        self.last_error: str | None = None
        self.last_report: Any = None
        self.pushes = 0
        self._said: str | None = None
        self._thread = threading.Thread(target=self._run, name="fabric-team-autopush", daemon=True)
        self._thread.start()

    def request(self) -> None:
        """Ask for a push (returns at once)."""
        with self._lock:
            if self._stopped:
                return
            self._asked += 1
        self._wake.set()

    def stop(self, timeout: float | None = 10.0) -> None:
        with self._lock:
            self._stopped = True
            self._done.notify_all()
        self._wake.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    close = stop  # (the server closes its engines by `close()`)

    def _run(self) -> None:
        while True:
            self._wake.wait()
            with self._lock:
                if self._stopped:
                    return
                self._wake.clear()
                covering = self._asked
            try:
                report = self._push()
            except Exception as err:  # reported, never raised: the server stays up
                message = str(err).strip() or type(err).__name__
                self.last_error = message
                log.warning("team autoPush failed: %s", message)
                if message != self._said and self._on_error is not None:
                    self._said = message
                    try:
                        self._on_error(message)
                    except Exception:
                        log.exception("reporting an autoPush failure failed")
            else:
                self.last_error = None
                self._said = None
                self.last_report = report
                self.pushes += 1
                if self._on_report is not None:
                    try:
                        self._on_report(report)
                    except Exception:
                        log.exception("reporting an autoPush failed")
            with self._done:
                self._served = max(self._served, covering)
                self._done.notify_all()
