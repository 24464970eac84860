"""Change notices for the session folders (Linux inotify), so that a long-lived engine's
listing re-reads only the project folders that changed since its last call instead of one
`lstat` per session file per call (at 1,000 sessions that was a quarter of a warm recall).

The rule stays "fresh by stat": a folder is listed and its files stat'ed again whenever
anything happened in it (a write, a rename, a create, a delete, an attribute change) since
the notices were last read, and the notices are read *before* the stats, so a change that
lands while a folder is being listed is noticed again next time. Whenever the notices
cannot vouch for a folder — no inotify (other systems, a one-shot process, the
`FABRIC_LSP_DIR_WATCH=0` switch), a folder that could not be watched (the user's watch
limit), an overflowed queue, a failed read — that folder (or every folder) is stat'ed as
before. Nothing here reads or writes the session files.

Not covered by inotify, and so not by this: a change made on another machine to a session
dir on a network filesystem, and a write through a hard link that lives in another
folder. Neither is how Pi writes its sessions; `FABRIC_LSP_DIR_WATCH=0` restores a stat per
file per call (docs/recall.md).
"""

from __future__ import annotations

import logging
import os
import struct
import sys

log = logging.getLogger(__name__)

# <sys/inotify.h>
_IN_MODIFY = 0x002
_IN_ATTRIB = 0x004
_IN_CLOSE_WRITE = 0x008
_IN_MOVED_FROM = 0x040
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_DELETE_SELF = 0x400
_IN_MOVE_SELF = 0x800
_IN_Q_OVERFLOW = 0x4000
_IN_IGNORED = 0x8000
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_MASK = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
)
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then `len` bytes of name)


def enabled() -> bool:
    """Whether this process may use notices at all (Linux, not switched off)."""
    return sys.platform.startswith("linux") and os.environ.get("FABRIC_LSP_DIR_WATCH", "1") != "0"


class DirWatch:
    """One inotify instance watching directories (not their subdirectories). `changed()`
    returns the watched paths that had any event since the previous call, or None when
    track was lost (every path must be treated as changed)."""

    def __init__(self) -> None:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        self._add = libc.inotify_add_watch
        self._add.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
        self._add.restype = ctypes.c_int
        fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self.fd: int | None = fd
        # wd -> the paths watched through it: two names of one directory (a symlinked
        # project folder beside its target) share a watch, and a change is both names'
        self._paths: dict[int, set[str]] = {}
        self._lost = False

    @classmethod
    def open(cls) -> DirWatch | None:
        """A watch, or None where notices are not available (then callers stat as before)."""
        if not enabled():
            return None
        try:
            return cls()
        except (OSError, AttributeError) as err:  # no libc symbol, no inotify, fd limit
            log.info("session folder notices unavailable (%s); listing by stat", err)
            return None

    def watch(self, path: str) -> bool:
        """Start watching `path` (a directory; a symlink to one is followed). False when it
        cannot be watched: the caller keeps listing it by stat."""
        if self.fd is None:
            return False
        wd = self._add(self.fd, os.fsencode(path), _MASK)
        if wd < 0:
            return False
        self._paths.setdefault(wd, set()).add(path)
        return True

    def changed(self) -> set[str] | None:
        """The watched paths with events since the last call; None when track was lost (a
        queue overflow or a failed read): then every path counts as changed, and watching
        goes on."""
        fd = self.fd
        if fd is None:
            return None
        out: set[str] = set()
        lost, self._lost = self._lost, False
        while True:
            try:
                data = os.read(fd, 1 << 16)
            except BlockingIOError:
                break
            except OSError:
                lost = True
                break
            if not data:
                break
            pos, end = 0, len(data)
            while pos + _EVENT.size <= end:
                wd, mask, _cookie, length = _EVENT.unpack_from(data, pos)
                pos += _EVENT.size + length
                if mask & _IN_Q_OVERFLOW:
                    lost = True
                    continue
                paths = self._paths.get(wd)
                if paths is None:
                    continue
                out |= paths
                if mask & _IN_IGNORED:  # the directory is gone (or was unmounted)
                    del self._paths[wd]
        return None if lost else out

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)
        self._paths.clear()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
