"""Live leases: which session files a running Pi process holds open, and its live leaf.

Our Pi extension (editors/pi) holds the session it has open from `session_start` to
`session_shutdown`, through `fabric-lsp pi hold/release`. A lease is one small JSON file
per (session, Pi process) in `<agentDir>/fabric-lsp/leases/` (0700 dir, 0600 files,
atomic replace), keyed by the session's realpath.

A lease names its process by pid, user and start time. It counts (blocks our own
commits, and its `leafId` is taken as the live branch) only while that pid is a running
process of this user that started at the recorded time (Linux: boot id + field 22 of
/proc/<pid>/stat; elsewhere: `ps -o lstart=`). Any other lease is stale and ignored: a
killed Pi's, a reused pid's, pid 1's, another user's, a forged one. `hold` refuses a pid
that could only give such a lease (LeaseError).

Invariant: while `LeaseBook.live(path)` is not None, nothing in fabric-lsp appends to
that file; the live Pi commits instead. Readers use `live_leaf` as the active branch.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from fabric_lsp.engine.private_dir import make_private_dir, write_private_file

LEASE_VERSION = 2


class LeaseError(ValueError):
    """A pid that cannot hold a lease (pid 1, a process that is not running, another
    user's process). The message says which and what a lease must name."""


class Lease(msgspec.Struct, rename="camel", kw_only=True, omit_defaults=True):
    version: int = LEASE_VERSION
    session: str  # realpath of the session file
    pid: int
    uid: int | None = None  # the process's user (effective uid) when the lease was taken
    process_start: str | None = None  # process_identity(pid).start: who the pid was
    start_time: int | None = None  # Linux: the start time in clock ticks since boot
    pi_version: str | None = None
    session_id: str | None = None
    leaf_id: str | None = None
    since: int = 0  # ms epoch when the hold began
    updated_at: int = 0  # ms epoch of the last refresh


_decoder = msgspec.json.Decoder(Lease)
_encoder = msgspec.json.Encoder()


# -- processes ------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessIdentity:
    """What this platform tells about a running process."""

    pid: int
    uid: int | None  # effective uid; None when the platform does not say
    ruid: int | None  # real uid (Linux); None when unknown
    start: str | None  # an opaque token equal only for the same process; None: unknown
    start_time: int | None = None  # Linux: clock ticks since boot (field 22)


_PROC = Path("/proc")
_WINDOWS = os.name == "nt"  # where os.kill(pid, 0) would terminate the process


def _boot_id() -> str | None:
    try:
        return (_PROC / "sys" / "kernel" / "random" / "boot_id").read_text().strip() or None
    except OSError:
        return None


def _boot_ms() -> int | None:
    """When this Linux system booted (ms epoch), from `btime` in /proc/stat."""
    try:
        for line in (_PROC / "stat").read_text().splitlines():
            if line.startswith("btime "):
                return int(line.split()[1]) * 1000
    except (OSError, ValueError, IndexError):
        pass
    return None


def _proc_available() -> bool:
    return (_PROC / "self" / "stat").is_file()


def _stat_fields(raw: bytes) -> list[bytes]:
    """The fields of /proc/<pid>/stat after pid and comm (field 3 is index 0). The
    command name (field 2) is in parentheses and may hold spaces or ')'."""
    return raw[raw.rfind(b")") + 2 :].split()


def _parse_stat(raw: bytes) -> int | None:
    try:
        return int(_stat_fields(raw)[19])  # field 22 overall
    except (IndexError, ValueError):
        return None


def _identity_from_proc(pid: int) -> ProcessIdentity | None:
    """Linux: None when /proc/<pid> is gone (or hidden from us, as another user's is
    under hidepid)."""
    try:
        stat = (_PROC / str(pid) / "stat").read_bytes()
        status = (_PROC / str(pid) / "status").read_text(errors="replace")
    except OSError:
        return None
    if _stat_fields(stat)[:1] in ([b"Z"], [b"X"]):
        return None  # exited, not yet reaped: no longer the process that held anything
    ticks = _parse_stat(stat)
    ruid = euid = None
    for line in status.splitlines():
        if line.startswith("Uid:"):
            fields = line.split()
            with contextlib.suppress(IndexError, ValueError):
                ruid, euid = int(fields[1]), int(fields[2])
            break
    boot = _boot_id()
    start = f"linux:{boot or '?'}:{ticks}" if ticks is not None else None
    return ProcessIdentity(pid=pid, uid=euid, ruid=ruid, start=start, start_time=ticks)


def _identity_from_ps(pid: int) -> ProcessIdentity | None:
    """Other platforms: `ps -o uid=,lstart= -p PID` (POSIX ps on macOS and the BSDs),
    its start time printed in UTC and the C locale so the token does not change with the
    reader's time zone. None when ps says there is no such process; raises OSError when
    ps itself is missing."""
    env = dict(os.environ, LC_ALL="C", LANG="C", TZ="UTC0")
    out = subprocess.run(
        ["ps", "-o", "uid=,lstart=", "-p", str(pid)], capture_output=True, text=True, env=env, timeout=10
    )
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    if out.returncode != 0 or not lines:
        return None
    fields = lines[0].split(None, 1)
    try:
        uid = int(fields[0])
    except (IndexError, ValueError):
        return None
    lstart = " ".join(fields[1].split()) if len(fields) > 1 else ""
    return ProcessIdentity(pid=pid, uid=uid, ruid=None, start=f"ps:{lstart}" if lstart else None)


def _identity_from_windows(pid: int) -> ProcessIdentity | None:
    """Windows: liveness and creation time through the process API (never `os.kill`, which
    on Windows terminates the process). The user is not checked (uid None)."""
    import ctypes
    from ctypes import wintypes

    win_dll: Any = getattr(ctypes, "WinDLL")  # noqa: B009 (Windows only: unknown to type checkers elsewhere)
    kernel32: Any = win_dll("kernel32", use_last_error=True)
    handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
    if not handle:
        return None
    try:
        code = wintypes.DWORD()
        if not kernel32.GetExitCodeProcess(handle, ctypes.byref(code)) or code.value != 259:  # STILL_ACTIVE
            return None
        times = [wintypes.FILETIME() for _ in range(4)]
        start = None
        if kernel32.GetProcessTimes(handle, *(ctypes.byref(t) for t in times)):
            start = f"win:{(times[0].dwHighDateTime << 32) | times[0].dwLowDateTime}"
        return ProcessIdentity(pid=pid, uid=None, ruid=None, start=start)
    finally:
        kernel32.CloseHandle(handle)


def _identity_from_kill(pid: int) -> ProcessIdentity | None:
    """The last resort on POSIX: liveness only. A signal may be sent to a process whose
    real or saved uid is ours (unless we are root), so a non-root sender learns "same
    user". Never on Windows, where os.kill terminates the process."""
    if _WINDOWS:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return ProcessIdentity(pid=pid, uid=-1, ruid=None, start=None)  # someone else's
    except OSError:
        return None
    mine = os.geteuid() if os.geteuid() != 0 else None
    return ProcessIdentity(pid=pid, uid=mine, ruid=None, start=None)


def process_identity(pid: int) -> ProcessIdentity | None:
    """Who process `pid` is right now (user, start token), or None when it is not running."""
    if pid <= 0:
        return None
    if _WINDOWS:
        try:
            return _identity_from_windows(pid)
        except (OSError, AttributeError):
            return None
    if _proc_available():
        return _identity_from_proc(pid)
    try:
        return _identity_from_ps(pid)
    except (OSError, subprocess.SubprocessError):
        return _identity_from_kill(pid)


def _same_user(ident: ProcessIdentity) -> bool:
    if ident.uid is None:
        return True  # a platform that cannot tell (the liveness check as root)
    if not hasattr(os, "geteuid"):
        return True
    return ident.uid == os.geteuid() and ident.ruid in (None, os.getuid())


def process_start_time(pid: int) -> int | None:
    """The start time of process `pid` (field 22 of /proc/<pid>/stat), None when unknown."""
    try:
        raw = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    return _parse_stat(raw)


def process_alive(pid: int, start_time: int | None) -> bool:
    """Whether process `pid` runs, is this user's and not pid 1, and (when `start_time`
    is given and the platform tells it) started at `start_time` (the pid not reused)."""
    if pid <= 1:
        return False
    ident = process_identity(pid)
    if ident is None or not _same_user(ident):
        return False
    if start_time is not None and ident.start_time is not None and ident.start_time != start_time:
        return False  # the pid was reused
    return True


def holder_identity(pid: int) -> ProcessIdentity:
    """The identity of the process that asks to hold a session; LeaseError when `pid`
    cannot hold one."""
    what = "a lease names the running Pi process that holds the session (Pi's process.pid)"
    if pid <= 0:
        raise LeaseError(f"`pid` must be a positive process id: {what}; got {pid}")
    if pid == 1:
        raise LeaseError(f"`pid` 1 is the system's init process, not a Pi process: {what}")
    ident = process_identity(pid)
    if ident is None:
        raise LeaseError(f"no process with pid {pid} is running: {what}")
    if not _same_user(ident):
        owner = "another user" if ident.uid in (None, -1) else f"another user (uid {ident.uid})"
        raise LeaseError(f"process {pid} belongs to {owner}: {what}, run by this user (uid {os.geteuid()})")
    return ident


def lease_problem(lease: Lease) -> str | None:
    """Why `lease` is stale, or None when it names its live process."""
    if lease.pid <= 1:
        return f"pid {lease.pid} cannot hold a lease"
    ident = process_identity(lease.pid)
    if ident is None:
        return f"process {lease.pid} is not running"
    if not _same_user(ident):
        return f"process {lease.pid} belongs to another user"
    if lease.uid is not None and ident.uid is not None and lease.uid != ident.uid:
        return f"process {lease.pid} runs as uid {ident.uid}, the lease says {lease.uid}"
    if lease.process_start is not None:
        if lease.process_start != ident.start:
            return f"process {lease.pid} is not the one that took the lease (its start time differs)"
        return None
    if ident.start is None:
        return None  # this platform tells liveness and user only
    # a lease written before version 2 (no processStart): on Linux its start time still
    # identifies the process, when it was refreshed during this boot
    if lease.start_time is None or lease.start_time != ident.start_time:
        return f"process {lease.pid} is not the one that took the lease (no matching start time)"
    boot = _boot_ms()
    if boot is None or lease.updated_at < boot:
        return "the lease is older than this boot"
    return None


def session_key(session_path: str) -> str:
    return hashlib.sha256(os.fsencode(os.path.realpath(session_path))).hexdigest()[:32]


def now_ms() -> int:
    return int(time.time() * 1000)


class LeaseBook:
    """The leases under one agent dir."""

    def __init__(self, agent_dir: str | os.PathLike[str]) -> None:
        self.dir = Path(agent_dir) / "fabric-lsp" / "leases"

    def _path(self, session_path: str, pid: int) -> Path:
        return self.dir / f"{session_key(session_path)}.{pid}.json"

    def hold(
        self,
        session_path: str,
        *,
        pid: int,
        pi_version: str | None = None,
        session_id: str | None = None,
        leaf_id: str | None = None,
    ) -> Lease:
        """Take or refresh process `pid`'s lease on `session_path` (keeps `since`).
        Raises LeaseError when `pid` is not a running process of this user (or is 1)."""
        ident = holder_identity(pid)
        real = os.path.realpath(session_path)
        path = self._path(real, pid)
        since = now_ms()
        old = self._load(path)
        if old is not None and old.pid == pid and old.process_start == ident.start:
            since = old.since
        lease = Lease(
            session=real,
            pid=pid,
            uid=ident.uid,
            process_start=ident.start,
            start_time=ident.start_time,
            pi_version=pi_version,
            session_id=session_id,
            leaf_id=leaf_id,
            since=since,
            updated_at=now_ms(),
        )
        self._write(path, _encoder.encode(lease))
        return lease

    def release(self, session_path: str, *, pid: int) -> bool:
        """Drop process `pid`'s lease on `session_path`; True when there was one."""
        try:
            self._path(session_path, pid).unlink()
            return True
        except FileNotFoundError:
            return False

    def _valid(self, name: str, lease: Lease) -> bool:
        """The lease matches its file name (session key and pid) and names its live process."""
        key, _, rest = name.partition(".")
        if rest != f"{lease.pid}.json" or key != session_key(lease.session):
            return False
        return lease_problem(lease) is None

    def live(self, session_path: str) -> Lease | None:
        """The freshest lease on `session_path` whose process still runs, else None.
        Stale leases are removed on the way (best effort)."""
        key = session_key(session_path)
        best: Lease | None = None
        try:
            names = [n for n in os.listdir(self.dir) if n.startswith(key + ".") and n.endswith(".json")]
        except OSError:
            return None
        for name in sorted(names):
            path = self.dir / name
            lease = self._load(path)
            if lease is None:
                continue
            if not self._valid(name, lease):
                with contextlib.suppress(OSError):
                    path.unlink()
                continue
            if best is None or (lease.updated_at, lease.pid) > (best.updated_at, best.pid):
                best = lease
        return best

    def live_leaf(self, session_path: str) -> str | None:
        lease = self.live(session_path)
        return lease.leaf_id if lease is not None else None

    def all_live(self) -> list[Lease]:
        """Every live lease, sorted by session path then pid."""
        out: list[Lease] = []
        try:
            names = sorted(os.listdir(self.dir))
        except OSError:
            return out
        for name in names:
            if not name.endswith(".json") or name.startswith("."):
                continue
            lease = self._load(self.dir / name)
            if lease is not None and self._valid(name, lease):
                out.append(lease)
        out.sort(key=lambda lease: (lease.session, lease.pid))
        return out

    def live_leaves(self) -> dict[str, str]:
        """{session realpath: live leaf id} of every live lease that names a leaf (the
        freshest lease wins when two processes hold one session)."""
        out: dict[str, tuple[int, str]] = {}
        for lease in self.all_live():
            if lease.leaf_id:
                seen = out.get(lease.session)
                if seen is None or lease.updated_at >= seen[0]:
                    out[lease.session] = (lease.updated_at, lease.leaf_id)
        return {session: leaf for session, (_at, leaf) in out.items()}

    # -- files ----------------------------------------------------------------------

    @staticmethod
    def _load(path: Path) -> Lease | None:
        try:
            return _decoder.decode(path.read_bytes())
        except (OSError, msgspec.DecodeError, RecursionError):
            return None

    def _write(self, path: Path, data: bytes) -> None:
        make_private_dir(self.dir)
        write_private_file(path, data)
