"""Directories of derived state that fabric-lsp owns, and the only file operations in them.

A directory is ours when it carries our marker file (`MARKER`), which we write only into a
directory we created or found empty (or, for caches written before the marker existed, one
that holds nothing but names we write). Every removal, chmod and write goes through this
module and acts only:

* inside a directory that carries the marker,
* on a name the caller's `is_ours(name)` accepts (its own record pattern),
* on a regular file, looked at with `lstat` and opened with `O_NOFOLLOW`, relative to a
  descriptor of the directory itself (`dir_fd`) where the platform has it, so a symlink
  (to the directory, or in place of a record) is never followed.

Nothing here ever removes a directory or recurses into one, and only a directory this
module created is ever chmodded.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat as _stat
from collections.abc import Callable, Generator, Iterable

MARKER = "fabric-lsp-index"
MARKER_BODY = b"fabric-lsp derived state; safe to delete with this directory\nformat 1\n"

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)
# dir_fd-relative calls where the platform has them (not on Windows): path-based otherwise
_AT = os.open in os.supports_dir_fd and os.unlink in os.supports_dir_fd and os.stat in os.supports_dir_fd


class DirRefused(Exception):
    """A directory we will not use: `str(err)` names the directory, why, and what to do."""


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(os.path.expanduser(path)))


def _is_within(inner: str, outer: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip(os.sep) + os.sep)


def check_not_reserved(
    path: str,
    *,
    setting: str,
    reserved: Iterable[tuple[str, str]],
    no_ancestor_of: Iterable[tuple[str, str]],
    not_inside: Iterable[tuple[str, str]] = (),
) -> str:
    """The real path of `path`, or DirRefused when it is one of `reserved` ((label, path)
    pairs), `$HOME`, the filesystem root, an ancestor of one of `no_ancestor_of`, or inside
    one of `not_inside`. Pure path logic (symlinks resolved); touches nothing."""
    real = _real(path)
    home = _real("~")
    reserved = [*reserved, ("your home directory", home)]
    for label, other in reserved:
        if real == _real(other):
            raise DirRefused(
                f"{setting} {path} is {label}; fabric-lsp keeps its derived state only in a directory of its own "
                f"(leave {setting} unset for <agentDir>/fabric-lsp/memory-index, or name a new or empty directory)"
            )
    if os.path.dirname(real) == real:
        raise DirRefused(f"{setting} {path} is the filesystem root; name a new or empty directory")
    for label, other in no_ancestor_of:
        if _is_within(_real(other), real):
            raise DirRefused(f"{setting} {path} contains {label} ({other}); name a new or empty directory outside it")
    for label, other in not_inside:
        if _is_within(real, _real(other)):
            raise DirRefused(f"{setting} {path} is inside {label} ({other}); name a directory outside it")
    return real


def make_dirs(path: str) -> list[str]:
    """Create `path` and its missing ancestors with mode 0700 (no umask widening); the
    directories created, outermost first. Existing directories are left as they are."""
    missing: list[str] = []
    cur = path
    while not os.path.lexists(cur):
        missing.append(cur)
        parent = os.path.dirname(cur)
        if parent == cur:
            break
        cur = parent
    created: list[str] = []
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            continue  # made by someone else meanwhile: not ours to chmod
        created.append(p)
        with contextlib.suppress(OSError):
            os.chmod(p, 0o700)  # ours: mkdir's mode is masked by the umask
    return created


def claim(path: str, *, setting: str, is_ours: Callable[[str], bool]) -> str:
    """Make `path` (absolute, already checked by `check_not_reserved`) a directory we own,
    or raise DirRefused. A missing directory is created (0700) and marked; an existing one
    must be a real directory (not a symlink) that carries the marker, is empty, or holds
    only regular files whose names `is_ours` accepts (a cache written before the marker
    existed): then the marker is added. Its mode is never changed. Returns `path`."""
    if not os.path.lexists(path):
        try:
            make_dirs(path)
        except OSError as err:
            raise DirRefused(f"{setting} {path} cannot be created ({err.strerror}); name a writable directory") from err
    try:
        with _dir(path) as fd:
            if _inspect(fd, path, setting=setting, is_ours=is_ours):
                _create_file(fd, path, MARKER, MARKER_BODY)
    except DirRefused:
        raise
    except OSError as err:
        raise _refusal(path, setting, err) from err
    return path


def refusal(path: str, *, setting: str, is_ours: Callable[[str], bool]) -> str | None:
    """Why `claim` would refuse `path` (read-only: nothing is created or written), or None."""
    if not os.path.lexists(path):
        return None
    try:
        with _dir(path) as fd:
            _inspect(fd, path, setting=setting, is_ours=is_ours)
    except DirRefused as err:
        return str(err)
    except OSError as err:
        return str(_refusal(path, setting, err))
    return None


def _refusal(path: str, setting: str, err: OSError) -> DirRefused:
    try:
        st = os.lstat(path)
    except OSError:
        return DirRefused(f"{setting} {path} cannot be used ({err.strerror}); name a writable directory")
    if _stat.S_ISLNK(st.st_mode):
        return DirRefused(f"{setting} {path} is a symbolic link; name the directory itself")
    if not _stat.S_ISDIR(st.st_mode):
        return DirRefused(f"{setting} {path} is not a directory; name a new or empty directory")
    return DirRefused(f"{setting} {path} cannot be used ({err.strerror}); name a writable directory")


def _inspect(fd: int | None, path: str, *, setting: str, is_ours: Callable[[str], bool]) -> bool:
    """Raise DirRefused when the open directory holds anything we did not write and no
    marker; True when it needs the marker added, False when it has it."""
    if _is_regular(fd, path, MARKER):
        return False
    names = os.listdir(fd if fd is not None else path)
    foreign = [n for n in names if not (is_ours(n) and _is_regular(fd, path, n))]
    if foreign:
        shown = ", ".join(sorted(foreign)[:3]) + (", …" if len(foreign) > 3 else "")
        raise DirRefused(
            f"{setting} {path} already holds files fabric-lsp did not create ({shown}) and no "
            f"{MARKER} marker; nothing there was touched. Name a new or empty directory for {setting}"
        )
    return True


def owns(path: str) -> bool:
    """True when `path` is a real directory that carries our marker as a regular file."""
    try:
        with _dir(path) as fd:
            return _is_regular(fd, path, MARKER)
    except OSError:
        return False


@contextlib.contextmanager
def _dir(path: str) -> Generator[int | None, None, None]:
    """A descriptor of the directory `path` itself (never through a final symlink), or
    None where the platform has no dir_fd calls (then `path` is checked with lstat)."""
    if not _AT:
        st = os.lstat(path)
        if not _stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(path)
        yield None
        return
    fd = os.open(path, _DIR_FLAGS)
    try:
        yield fd
    finally:
        os.close(fd)


def _lstat(fd: int | None, folder: str, name: str) -> os.stat_result:
    if fd is not None:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    return os.lstat(os.path.join(folder, name))


def _is_regular(fd: int | None, folder: str, name: str) -> bool:
    try:
        return _stat.S_ISREG(_lstat(fd, folder, name).st_mode)
    except OSError:
        return False


def _open(fd: int | None, folder: str, name: str, flags: int, mode: int = 0o600) -> int:
    flags |= _NOFOLLOW | _CLOEXEC | _BINARY
    if fd is not None:
        return os.open(name, flags, mode, dir_fd=fd)
    return os.open(os.path.join(folder, name), flags, mode)


def _create_file(fd: int | None, folder: str, name: str, data: bytes) -> None:
    out = _open(fd, folder, name, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        _write_all(out, data)
    finally:
        os.close(out)


def _write_all(out: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(out, view) :]


class OwnedDir:
    """File operations in one directory we own: writes, reads and removals of names
    `is_ours` accepts, each refused (False / None) when the directory lacks our marker."""

    TEMP_PREFIX = ".tmp-"
    TEMP_SUFFIX = ".part"

    def __init__(self, path: str, is_ours: Callable[[str], bool]) -> None:
        self.path = path
        self._is_ours = is_ours

    def is_ours(self, name: str) -> bool:
        return name != MARKER and os.sep not in name and "/" not in name and (self._is_ours(name) or self.is_temp(name))

    @classmethod
    def is_temp(cls, name: str) -> bool:
        return name.startswith(cls.TEMP_PREFIX) and name.endswith(cls.TEMP_SUFFIX) and "/" not in name

    @contextlib.contextmanager
    def _owned(self) -> Generator[int | None, None, None]:
        with _dir(self.path) as fd:
            if not _is_regular(fd, self.path, MARKER):
                raise PermissionError(f"{self.path} carries no {MARKER} marker")
            yield fd

    def write(self, name: str, data: bytes | bytearray | memoryview | Iterable[object]) -> bool:
        """Replace `name` atomically (temp file + rename, mode 0600); False on any failure
        (the directory not ours included). `data`: bytes, or an iterable of byte pieces."""
        if not self.is_ours(name):
            return False
        try:
            with self._owned() as fd:
                try:
                    if not _stat.S_ISREG(_lstat(fd, self.path, name).st_mode):
                        return False  # a directory or a link in its place is not ours to replace
                except FileNotFoundError:
                    pass
                tmp = f"{self.TEMP_PREFIX}{secrets.token_hex(6)}{self.TEMP_SUFFIX}"
                out = _open(fd, self.path, tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
                try:
                    try:
                        pieces = (data,) if isinstance(data, (bytes, bytearray, memoryview)) else data
                        for piece in pieces:
                            _write_all(out, piece)  # pyright: ignore[reportArgumentType]
                    finally:
                        os.close(out)
                    if fd is not None:
                        os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
                    else:
                        os.replace(os.path.join(self.path, tmp), os.path.join(self.path, name))
                    tmp = None
                finally:
                    if tmp is not None:
                        self._unlink(fd, tmp)
            return True
        except (OSError, TypeError):
            return False

    def read(self, name: str, max_bytes: int) -> bytes | None:
        """The bytes of the regular file `name` (never through a symlink), or None when it is
        missing, not a regular file, larger than `max_bytes`, or the directory is not ours."""
        if not self.is_ours(name):
            return None
        try:
            with self._owned() as fd:
                handle = _open(fd, self.path, name, os.O_RDONLY)
                with open(handle, "rb", closefd=True) as fh:
                    st = os.fstat(fh.fileno())
                    if not _stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
                        return None
                    return fh.read()
        except OSError:
            return None

    def remove(self, name: str) -> bool:
        """Unlink `name` when it is ours and a regular file; never a directory or a link."""
        if not self.is_ours(name):
            return False
        try:
            with self._owned() as fd:
                if not _is_regular(fd, self.path, name):
                    return False
                return self._unlink(fd, name)
        except OSError:
            return False

    def _unlink(self, fd: int | None, name: str) -> bool:
        try:
            if fd is not None:
                os.unlink(name, dir_fd=fd)
            else:
                os.unlink(os.path.join(self.path, name))
            return True
        except OSError:
            return False

    def listing(self) -> list[tuple[str, os.stat_result]] | None:
        """(name, lstat) of every entry whose name is ours, sorted by name; None when the
        directory is missing or not ours. Other entries are not looked at."""
        try:
            with self._owned() as fd:
                out: list[tuple[str, os.stat_result]] = []
                for name in sorted(os.listdir(fd if fd is not None else self.path)):
                    if not self.is_ours(name):
                        continue
                    try:
                        out.append((name, _lstat(fd, self.path, name)))
                    except OSError:
                        continue
                return out
        except OSError:
            return None
