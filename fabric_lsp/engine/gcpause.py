"""One process-wide pause of Python's cyclic garbage collector.

Reading a session, building the memory index and computing a preview allocate very many
long-lived, acyclic objects (one dict per JSON object); generational collections during
that work find no garbage and only cost time (about half of a build). The engines run
concurrently in the server's thread pools, so the pause is counted: the collector is
disabled while at least one pause is active and restored to its earlier state when the
last one ends — one engine finishing never re-enables it under another.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Generator
from contextlib import contextmanager

_lock = threading.Lock()
_active = 0
_was_enabled = False


@contextmanager
def cyclic_gc_paused() -> Generator[None, None, None]:
    """Pause the cyclic GC for the duration of the block (nestable, thread-safe)."""
    global _active, _was_enabled
    with _lock:
        if _active == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _was_enabled:
                gc.enable()
