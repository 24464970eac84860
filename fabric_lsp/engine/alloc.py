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
