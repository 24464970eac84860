"""The C allocator's setting for large blocks, for the process and its children.

glibc serves a block of at least M_MMAP_THRESHOLD bytes with its own mapping and returns
it on free; smaller blocks come from the heap. By default the threshold rises to the size
of the largest block freed (up to 32 MiB), so after the first few multi-megabyte buffers
(read chunks, growing columns of the recall index) every such buffer lives on the heap,
and the heap keeps the holes they leave: about 15 MB of the 165 MB a 300,000-entry hot
index build peaks at (docs/reliability.md §10.2). A fixed threshold of 256 KiB keeps large
buffers in mappings (a growing one is moved by `mremap`, not copied into a new hole);
the recall benchmark is as fast or faster with it.

`tune()` sets it in this process (glibc only; elsewhere it does nothing); child
interpreters get it through `MALLOC_MMAP_THRESHOLD_` (`child_env`), except the memory
builder children (memory/build_pool.py), which run for one batch and are faster with
glibc's own threshold, and the preview workers (fabric_lsp/preview_workers.py), which are
faster with it too and give their heap back after each task (`trim`). An explicit
`MALLOC_MMAP_THRESHOLD_` in the environment is left alone, and
`FABRIC_LSP_MMAP_THRESHOLD=0` keeps glibc's default behaviour.
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any

MMAP_THRESHOLD = 256 * 1024
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter


def threshold() -> int:
    """The threshold to use, 0 for none (the environment decides)."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or not sys.platform.startswith("linux"):
        return 0
    raw = os.environ.get("FABRIC_LSP_MMAP_THRESHOLD", "")
    try:
        value = int(raw) if raw else MMAP_THRESHOLD
    except ValueError:
        value = MMAP_THRESHOLD
    return max(0, value)


def tune() -> bool:
    """Fix this process's mmap threshold; True when the allocator took it."""
    value = threshold()
    if value <= 0:
        return False
    try:
        # the process's own symbols (libc is among them): no library search, which would
        # run `ldconfig` or a compiler at every start
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, value))


def child_environment() -> dict[str, str]:
    """What a child interpreter's environment needs for the same setting."""
    value = threshold()
    return {"MALLOC_MMAP_THRESHOLD_": str(value)} if value > 0 else {}


_trim: Any = None


def trim() -> bool:
    """Give the heap's free memory back to the system (glibc's `malloc_trim(0)`; elsewhere
    nothing). A long-lived child running with glibc's own threshold calls it after each
    task: the heap keeps the holes a large task leaves (a preview worker idled at 201 MB
    after previewing a 300 MB session twice without it, 46 MB with it)."""
    global _trim
    if not sys.platform.startswith("linux"):
        return False
    if _trim is None:
        try:
            _trim = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError):  # not glibc
            _trim = False
            return False
        _trim.argtypes = [ctypes.c_size_t]
        _trim.restype = ctypes.c_int
    if _trim is False:
        return False
    return bool(_trim(0))


# pymalloc serves requests of at most 512 bytes from 1 MiB arenas (CPython 3.10+): a bytes
# object of 470 bytes takes a block of its largest size class, about 2,000 to an arena.
_RESERVE_BLOCK_BYTES = 470
_RESERVE_KEEP_EVERY = 1024  # about two blocks kept per arena


def reserve_object_arenas(megabytes: int) -> list[bytes]:
    """Touch `megabytes` of the object allocator's arenas now and keep them: returns a few
    blocks to hold for as long as the arenas should stay.

    CPython's small-object allocator returns an arena to the system as soon as its last
    block is freed, and takes fresh (page-faulting) memory for the next. A preview worker's
    first task therefore faulted in every page of the objects it built (~13,000 minor
    faults for a 50 MB session against ~3,000 for the next task, which reuses the arenas
    the first left behind; docs/performance.md, "The first preview after start"). With a
    reserve taken at the worker's start, before any request, the first task finds those
    arenas resident like the later ones do: their other pools are free and serve blocks
    of any size. The cost is the reserve's memory, which a worker holds anyway after its
    first preview. Python without pymalloc (another implementation, `PYTHONMALLOC=malloc`)
    only spends the time: nothing is kept."""
    if megabytes <= 0 or sys.implementation.name != "cpython":
        return []
    blocks = [bytes(_RESERVE_BLOCK_BYTES) for _ in range(megabytes * (1 << 20) // 512)]
    return blocks[::_RESERVE_KEEP_EVERY]
