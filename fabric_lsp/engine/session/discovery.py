"""Where Pi keeps sessions, and how a session reference resolves to a file.

Pi's layout: ``<agentDir>/sessions/<encoded cwd>/<timestamp>_<sessionId>.jsonl``; the
agent dir is ``$PI_CODING_AGENT_DIR`` or ``~/.pi/agent``. The cwd encoding loses
information, so the real cwd comes from each file's header.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import unquote, urlparse

import msgspec

from .reader import read_header

# A session id prefix shorter than this never resolves. The first 8 hex digits of a Pi
# (UUIDv7) id change every ~65 s, so 8 characters usually pick one session; when they do
# not, the error lists the candidates.
MIN_SESSION_PREFIX = 8


class SessionNotFound(LookupError):
    code = "session_not_found"

    def __init__(self, ref: str) -> None:
        super().__init__(f"Session not found: {ref}")
        self.ref = ref


class NotASession(SessionNotFound):
    """A path outside the sessions dir that does not start with a Pi session header."""

    def __init__(self, ref: str, path: str, session_dir: str) -> None:
        super().__init__(ref)
        self.args = (
            f"Session not found: {path} is not a Pi session file: it is outside the Pi sessions dir "
            f"({session_dir}) and does not start with a Pi session header (a first line with "
            '"type":"session"); name a Pi session file',
        )


class AmbiguousSession(LookupError):
    code = "ambiguous_session"

    def __init__(self, ref: str, candidates: list[str], *, prefix_of: list[str] | None = None) -> None:
        if prefix_of:
            shown = ", ".join(prefix_of[:10]) + (f", … ({len(prefix_of) - 10} more)" if len(prefix_of) > 10 else "")
            message = f'Session id prefix "{ref}" matches {len(prefix_of)} sessions: {shown}; use more characters.'
        else:
            message = f'Session id "{ref}" is ambiguous; use an exact session file path.'
        super().__init__(message)
        self.ref = ref
        self.candidates = candidates


class SessionRef(msgspec.Struct, kw_only=True):
    """A session file as discovery sees it (header id, else the file stem)."""

    id: str
    file: str
    cwd: str
    mtime: float  # stat mtime in ms, 0 when unknown


def expand_path(p: str) -> str:
    return os.path.expanduser(p)


def default_agent_dir(env: Mapping[str, str] | None = None) -> str:
    """``$PI_CODING_AGENT_DIR`` (``~`` expanded), else ``~/.pi/agent``."""
    e = os.environ if env is None else env
    configured = e.get("PI_CODING_AGENT_DIR")
    if configured:
        return os.path.abspath(expand_path(configured))
    return os.path.join(os.path.expanduser("~"), ".pi", "agent")


def default_session_dir(agent_dir: str) -> str:
    return os.path.join(agent_dir, "sessions")


def encode_cwd(cwd: str) -> str:
    """Pi's per-cwd folder name: resolved path, one leading separator dropped, every
    ``/``, ``\\`` and ``:`` replaced by ``-``, wrapped in ``--``."""
    resolved = os.path.abspath(cwd)
    if resolved[:1] in ("/", "\\"):
        resolved = resolved[1:]
    for ch in ("/", "\\", ":"):
        resolved = resolved.replace(ch, "-")
    return f"--{resolved}--"


def jsonl_stats(folder: str) -> list[tuple[str, os.stat_result]]:
    """The session files of one project folder with their stats: regular `*.jsonl` files,
    never symlinks (the one listing rule of every face: sessions, recall, the resolver).
    One `lstat` per file (the directory entry tells symlinks apart), not three calls."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    out: list[tuple[str, os.stat_result]] = []
    for entry in entries:
        if not entry.name.endswith(".jsonl") or entry.is_symlink():
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            out.append((entry.path, st))
    return out


def jsonl_files(folder: str) -> list[str]:
    """The paths of `jsonl_stats(folder)`."""
    return [path for path, _ in jsonl_stats(folder)]


def list_session_files(session_dir: str, cwd: str | None = None) -> list[str]:
    """Session files of one project (`cwd`) or of all projects (one folder level deep,
    as Pi's listAll), sorted by path."""
    if cwd is not None:
        return sorted(jsonl_files(os.path.join(session_dir, encode_cwd(cwd))))
    files: list[str] = []
    try:
        subdirs = sorted(os.listdir(session_dir))
    except OSError:
        return []
    for sub in subdirs:
        full = os.path.join(session_dir, sub)
        if os.path.isdir(full):
            files.extend(jsonl_files(full))
    return sorted(files)


def session_ref(path: str) -> SessionRef:
    header = read_header(path)
    try:
        mtime = os.stat(path).st_mtime_ns / 1e6
    except OSError:
        mtime = 0.0
    sid = str(header.get("id")) if header is not None and header.get("id") is not None else Path(path).stem
    cwd = str(header.get("cwd", "")) if header is not None and header.get("cwd") is not None else ""
    return SessionRef(id=sid, file=path, cwd=cwd, mtime=mtime)


def by_recency(refs: list[SessionRef]) -> list[SessionRef]:
    """mtime descending, then file path ascending."""
    return sorted(refs, key=lambda r: (-r.mtime, r.file))


def _as_path(ref: str) -> str | None:
    if ref.startswith("file://"):
        return unquote(urlparse(ref).path)
    return None


def _inside(path: str, folder: str) -> bool:
    """`path` really lies below `folder` (links resolved: a link in the sessions dir to a
    file elsewhere is elsewhere)."""
    real, base = os.path.realpath(path), os.path.realpath(folder)
    return real.startswith(base.rstrip(os.sep) + os.sep)


def resolve_session(ref: str, session_dir: str) -> str:
    """Resolve a session id, absolute path or ``file://`` URI to an existing file.

    A path (or URI) must name an existing file; one that is not really inside
    `session_dir` (a link there counts where it points) must start with a Pi session
    header, else `NotASession` (a `SessionNotFound`). An id matches header ids first, then
    file stems (and the ``<timestamp>_<id>`` file-name suffix), then, for a reference of
    at least `MIN_SESSION_PREFIX` characters, id prefixes; more than one match raises
    `AmbiguousSession` with the candidate files, none raises `SessionNotFound`. An exact
    id always wins over a prefix it shares with longer ids.
    """
    target = ref.strip()
    if not target:
        raise SessionNotFound(ref)
    as_path = _as_path(target)
    if as_path is not None or os.path.isabs(target) or target.endswith(".jsonl"):
        p = os.path.abspath(expand_path(as_path if as_path is not None else target))
        if os.path.isfile(p):
            if not _inside(p, session_dir) and read_header(p) is None:
                raise NotASession(ref, p, session_dir)
            return p
        raise SessionNotFound(ref)
    files = list_session_files(session_dir)
    by_header = [f for f in files if (h := read_header(f)) is not None and str(h.get("id")) == target]
    if len(by_header) > 1:
        raise AmbiguousSession(target, by_header)
    if by_header:
        return by_header[0]
    by_stem = [f for f in files if Path(f).stem == target or Path(f).stem.endswith("_" + target)]
    if len(by_stem) > 1:
        raise AmbiguousSession(target, by_stem)
    if by_stem:
        return by_stem[0]
    if len(target) >= MIN_SESSION_PREFIX:
        found = select_by_prefix(target, [(f, _file_session_id(f)) for f in files])
        if found is not None:
            return found
    raise SessionNotFound(ref)


def select_by_prefix(prefix: str, sessions: Iterable[tuple[str, str]]) -> str | None:
    """The one file of `sessions` (``(file, session id)`` pairs) whose id starts with
    `prefix`, None when none does or `prefix` is shorter than `MIN_SESSION_PREFIX`.
    Several matches raise `AmbiguousSession` listing the files (sorted) and naming the ids.
    The one prefix rule of every resolver (this module's and the memory engine's)."""
    if len(prefix) < MIN_SESSION_PREFIX:
        return None
    matches = sorted({(f, sid) for f, sid in sessions if sid.startswith(prefix)})
    if len(matches) > 1:
        raise AmbiguousSession(prefix, [f for f, _ in matches], prefix_of=[sid for _, sid in matches])
    return matches[0][0] if matches else None


def _file_session_id(path: str) -> str:
    """The header id, else the id part of Pi's ``<timestamp>_<id>`` file name."""
    header = read_header(path)
    if header is not None and header.get("id") is not None:
        return str(header.get("id"))
    return Path(path).stem.rsplit("_", 1)[-1]
