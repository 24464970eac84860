"""Directories that hold our private state (intent files, the memory index, leases).

Invariant: every directory we create on the way is 0700 (`mkdir -p` would create the
missing ancestors, such as `<agentDir>/fabric-lsp/`, with 0777 & ~umask, usually 0755);
a directory that already existed is never chmodded (it is not ours to change).
"""

from __future__ import annotations

import contextlib
import os

from .owned_dir import make_dirs


def make_private_dir(path: str | os.PathLike[str]) -> None:
    """Create `path` and any missing ancestor with mode 0700 (owned_dir.make_dirs). An
    existing directory keeps its mode: we never chmod a directory we did not create.
    Raises OSError when `path` cannot be created or is not a directory."""
    path = os.path.abspath(os.fspath(path))
    make_dirs(path)
    if not os.path.isdir(path):
        raise NotADirectoryError(path)


def write_private_file(path: str | os.PathLike[str], data: bytes, *, durable: bool = False) -> None:
    """Replace `path` atomically with `data` (temp file in the same directory, mode 0600,
    rename), so a reader never sees a half-written file. `durable`: fsync the file and the
    directory too. The directory must exist (make_private_dir). Raises OSError."""
    import secrets

    path = os.fspath(path)
    folder = os.path.dirname(path) or "."
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)
    if durable:
        with contextlib.suppress(OSError):
            dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
