"""Child interpreters that speak length-prefixed pickles: the pieces shared by the memory
build pool (memory/build_pool.py) and the preview pool (engine/procpool.py).

A child is a plain `python -c CODE` process (no multiprocessing: the host's `__main__` is
never re-imported, nothing is forked from a threaded server) with this checkout first on
its `PYTHONPATH`. A frame is an 8-byte little-endian length followed by that many bytes of
pickle.
"""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
from typing import Any, BinaryIO

from . import alloc

_HEAD = struct.Struct("<Q")


def package_root() -> str:
    """The directory that holds the `fabric_lsp` package."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.dirname(os.path.dirname(here))


def child_env(extra: dict[str, str] | None = None, *, tuned_alloc: bool = True) -> dict[str, str]:
    env = dict(os.environ)
    if tuned_alloc:
        env.update(alloc.child_environment())  # the allocator setting of this process (alloc.py)
    env.update(extra or {})
    root = package_root()
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def spawn(
    code: str, *, env_extra: dict[str, str] | None = None, stderr: Any = subprocess.DEVNULL, tuned_alloc: bool = True
) -> subprocess.Popen[bytes]:
    """Start `python -c code` with pipes on stdin and stdout (raises OSError). `tuned_alloc`:
    the child gets this process's allocator setting (alloc.py); False leaves it glibc's."""
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=child_env(env_extra, tuned_alloc=tuned_alloc),
        close_fds=True,
    )


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Kill a child started by `spawn`, reap it (2 s at most) and close its pipes."""
    try:
        proc.kill()
    except OSError:
        pass
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        pass
    for stream in (proc.stdin, proc.stdout):
        if stream is None:
            continue
        try:
            stream.close()
        except Exception:
            pass


def pack(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEAD.pack(len(data)) + data


def read_frame(stream: BinaryIO) -> Any:
    """The next object on a blocking stream; raises EOFError at end of input."""
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError
    (n,) = _HEAD.unpack(head)
    data = stream.read(n)
    if len(data) < n:
        raise EOFError
    return pickle.loads(data)


class FrameBuffer:
    """Frames out of bytes that arrive in pieces (a non-blocking reader's side)."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, chunk: bytes) -> None:
        self._buf.extend(chunk)

    def next(self) -> tuple[bool, Any]:
        """(True, obj) for a whole frame at the front (consumed), else (False, None)."""
        if len(self._buf) < 8:
            return False, None
        (n,) = _HEAD.unpack_from(self._buf)
        if len(self._buf) < 8 + n:
            return False, None
        view = memoryview(self._buf)
        part = view[8 : 8 + n]
        try:
            obj = pickle.loads(part)
        finally:
            part.release()
            view.release()
        del self._buf[: 8 + n]
        return True, obj
