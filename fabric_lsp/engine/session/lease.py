"""Live leases: which session files a running Pi process holds open, and its live leaf.

Our Pi extension (editors/pi) holds the session it has open from `session_start` to
`session_shutdown`, through `fabric-lsp pi hold/release`. A lease is one small JSON file
per (session, Pi process) in `<agentDir>/fabric-lsp/leases/` (0700 dir, 0600 files,
atomic replace), keyed by the session's realpath. It names the process by pid and
start time, so a lease whose process is gone (or whose pid was reused) is ignored.

Invariant: while `LeaseBook.live(path)` is not None, nothing in fabric-lsp appends to
that file; the live Pi commits instead. Readers use `live_leaf` as the active branch.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path
from typing import Optional

import msgspec

from fabric_lsp.engine.private_dir import make_private_dir, write_private_file

LEASE_VERSION = 1


class Lease(msgspec.Struct, rename="camel", kw_only=True, omit_defaults=True):
    version: int = LEASE_VERSION
    session: str  # realpath of the session file
    pid: int
    start_time: Optional[int] = None  # the process start time (Linux clock ticks since boot)
    pi_version: Optional[str] = None
    session_id: Optional[str] = None
    leaf_id: Optional[str] = None
    since: int = 0  # ms epoch when the hold began
    updated_at: int = 0  # ms epoch of the last refresh


_decoder = msgspec.json.Decoder(Lease)
_encoder = msgspec.json.Encoder()


def process_start_time(pid: int) -> Optional[int]:
    """The start time of process `pid` (field 22 of /proc/<pid>/stat), None when unknown."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces or ')'
    rest = raw[raw.rfind(b")") + 2 :].split()
    try:
        return int(rest[19])  # field 22 overall = index 19 after pid and comm
    except (IndexError, ValueError):
        return None


def process_alive(pid: int, start_time: Optional[int]) -> bool:
    """Whether the process a lease names still runs (and is the same process)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    except OSError:
        return False
    if start_time is not None:
        now = process_start_time(pid)
        if now is not None and now != start_time:
            return False  # the pid was reused
    return True


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
        pi_version: Optional[str] = None,
        session_id: Optional[str] = None,
        leaf_id: Optional[str] = None,
    ) -> Lease:
        """Take or refresh process `pid`'s lease on `session_path` (keeps `since`)."""
        real = os.path.realpath(session_path)
        path = self._path(real, pid)
        start = process_start_time(pid)
        since = now_ms()
        old = self._load(path)
        if old is not None and old.pid == pid and old.start_time == start:
            since = old.since
        lease = Lease(
            session=real,
            pid=pid,
            start_time=start,
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

    def live(self, session_path: str) -> Optional[Lease]:
        """The freshest lease on `session_path` whose process still runs, else None.
        Leases of dead processes are removed on the way (best effort)."""
        key = session_key(session_path)
        best: Optional[Lease] = None
        try:
            names = [n for n in os.listdir(self.dir) if n.startswith(key + ".") and n.endswith(".json")]
        except OSError:
            return None
        for name in sorted(names):
            path = self.dir / name
            lease = self._load(path)
            if lease is None:
                continue
            if not process_alive(lease.pid, lease.start_time):
                with contextlib.suppress(OSError):
                    path.unlink()
                continue
            if best is None or (lease.updated_at, lease.pid) > (best.updated_at, best.pid):
                best = lease
        return best

    def live_leaf(self, session_path: str) -> Optional[str]:
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
            if lease is not None and process_alive(lease.pid, lease.start_time):
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
    def _load(path: Path) -> Optional[Lease]:
        try:
            return _decoder.decode(path.read_bytes())
        except (OSError, msgspec.DecodeError, RecursionError):
            return None

    def _write(self, path: Path, data: bytes) -> None:
        make_private_dir(self.dir)
        write_private_file(path, data)
