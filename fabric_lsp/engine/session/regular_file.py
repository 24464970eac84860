"""Reading a file a client named by URI, without trusting what the name points at.

Invariant: only a regular file is ever read (never a device such as /dev/zero, a FIFO
or a socket: opening never blocks, reading never streams forever), and never more than
`max_bytes` of it, whatever it grows to while being read.
"""

from __future__ import annotations

import os
import stat


class NotReadable(ValueError):
    """The path is not a regular file, or is larger than the bound."""


def read_regular_file(path: str, max_bytes: int) -> bytes:
    """All bytes of `path` when it is a regular file of at most `max_bytes` bytes.

    Raises `NotReadable` (not a regular file, too large) or `OSError` (absent,
    permission). The type and size are checked on the opened descriptor, so a file
    swapped for a FIFO or a device after the first `stat` is refused too; the open is
    non-blocking, so a FIFO without a writer cannot wedge the caller."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotReadable(f"{path} is not a regular file")
    if st.st_size > max_bytes:
        raise NotReadable(f"{path} is larger than {max_bytes} bytes")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotReadable(f"{path} is not a regular file")
        if st.st_size > max_bytes:
            raise NotReadable(f"{path} is larger than {max_bytes} bytes")
        chunks: list[bytes] = []
        total = 0
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:
            raise NotReadable(f"{path} grew past {max_bytes} bytes while being read")
        return b"".join(chunks)
    finally:
        os.close(fd)
