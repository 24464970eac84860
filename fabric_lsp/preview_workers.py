"""The language server's preview workers: which engine function they run, whether they
run at all, and their start before the server's own imports.

Previews are computed in child interpreters (engine/procpool.py) so they never hold the
server's GIL. `prestart()` is called by `fabric-lsp serve` before it imports pygls: the
first child's interpreter start and imports overlap the server's, so the first preview
after start does not wait for them (docs/performance.md). `FABRIC_LSP_PREVIEW_POOL=0`
turns the workers off: previews then run in the server's heavy threads.

The children keep glibc's own mmap threshold, not the server's fixed one (engine/alloc.py):
a preview reads its file in multi-megabyte chunks and builds its columns anew each time,
and with the fixed threshold each of those is a fresh mapping the kernel zeroes again
(50 MB session, one child, four previews: 0.64–0.78 s against 0.58–0.63 s each, the same
peak RSS). A child trims its heap after each task (`alloc.trim`), so an idle one does not
keep a finished preview's memory (300 MB session: 46 MB idle, 201 MB without the trim).

Each child keeps `RESERVE_MB` of the object allocator's arenas from its start
(`alloc.reserve_object_arenas`): the first preview after start then finds its memory
resident, as every later one does, instead of faulting in ~13,000 fresh pages for a 50 MB
session (docs/performance.md, "The first preview after start"). An idle child holds
about as much after its first preview anyway.
"""

from __future__ import annotations

import os
from typing import Any

TASKS = "fabric_lsp.engine.compaction.tasks:run_task"
TUNED_ALLOC = False
RESERVE_MB = 32


def enabled() -> bool:
    return os.environ.get("FABRIC_LSP_PREVIEW_POOL", "1").strip() != "0"


def size() -> int:
    """min(2, CPUs) children: the second starts when two previews run at once."""
    return min(2, os.cpu_count() or 1)


def prestart() -> None:
    """Start the first preview child now (a no-op when the workers are off)."""
    if enabled():
        from fabric_lsp.engine.procpool import prestart as start

        start(TASKS, tuned_alloc=TUNED_ALLOC, reserve_mb=RESERVE_MB)


def pool_from_env() -> Any:
    """The previews' worker-process pool (its first child the prestarted one, if any, else
    started right after `initialized`), or None when the workers are off."""
    if not enabled():
        return None
    from fabric_lsp.engine.procpool import ProcessPool

    return ProcessPool(TASKS, size=size(), tuned_alloc=TUNED_ALLOC, reserve_mb=RESERVE_MB)
