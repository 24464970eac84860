"""User regexes run in a disposable child process that is killed at the deadline
(digest §6.4), so a catastrophic pattern such as `(a+)+$` can never stall the caller.

The child is a plain interpreter running `_WORKER` (stdlib `re`, IGNORECASE, Unicode
str semantics); it stays warm between queries and is replaced after a timeout or crash.
Framing: one ASCII length line, then that many bytes of JSON, in both directions.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
import weakref
from typing import Optional

_WORKER = r"""
import json, re, sys
try:
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
except Exception:
    pass
inp, out = sys.stdin.buffer, sys.stdout.buffer
out.write(b"R\n")
out.flush()
while True:
    head = inp.readline()
    if not head:
        break
    req = json.loads(inp.read(int(head)))
    try:
        rx = re.compile(req["p"], re.IGNORECASE)
    except Exception as exc:
        resp = {"error": "invalid_regex", "message": str(exc)}
    else:
        try:
            resp = {"hits": [i for i, h in enumerate(req["h"]) if rx.search(h)]}
        except Exception as exc:
            resp = {"error": "regex_worker_error", "message": str(exc) or "Regex worker returned an invalid result."}
    data = json.dumps(resp).encode()
    out.write(b"%d\n" % len(data))
    out.write(data)
    out.flush()
"""


def _reap(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            proc.kill()
            proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            pass
    for stream in (proc.stdin, proc.stdout):
        try:
            stream.close()  # type: ignore[union-attr]
        except Exception:
            pass


class RegexOutcome:
    __slots__ = ("hits", "error")

    def __init__(self, hits: Optional[list[int]] = None, error: Optional[dict] = None) -> None:
        self.hits = hits
        self.error = error


class RegexRunner:
    """Thread-safe; one request at a time per runner."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: Optional[subprocess.Popen] = None
        self._unconfirmed = False  # spawned, its ready line not read yet

    def _spawn(self) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        # An engine dropped without close() must not leave its worker behind.
        weakref.finalize(self, _reap, proc)
        return proc

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.kill()
            except OSError:
                pass
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
            for stream in (proc.stdin, proc.stdout):
                try:
                    stream.close()  # type: ignore[union-attr]
                except Exception:
                    pass

    def _respawn(self) -> None:
        """Start a replacement now, so the next pattern does not wait for interpreter start-up."""
        try:
            self._proc = self._spawn()
            self._unconfirmed = True
        except OSError:
            self._proc = None

    def run(self, pattern: str, haystacks: list[str], timeout_ms: int) -> RegexOutcome:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._kill()
                self._respawn()
            if self._unconfirmed:
                try:
                    if self._proc is None:
                        raise OSError("regex worker could not be started")
                    assert self._proc.stdout is not None
                    # Interpreter start-up is not the pattern's time: wait for the ready line.
                    ready, _, _ = select.select([self._proc.stdout.fileno()], [], [], 10.0)
                    if not ready or os.read(self._proc.stdout.fileno(), 2) != b"R\n":
                        raise OSError("regex worker did not start")
                    self._unconfirmed = False
                except OSError as exc:
                    self._kill()
                    return RegexOutcome(error={"code": "regex_worker_error", "message": str(exc)})
            deadline = time.monotonic() + timeout_ms / 1000.0
            proc = self._proc
            payload = json.dumps({"p": pattern, "h": haystacks}, ensure_ascii=False).encode("utf-8", "surrogatepass")
            try:
                assert proc.stdin is not None
                proc.stdin.write(b"%d\n" % len(payload))
                proc.stdin.write(payload)
                proc.stdin.flush()
            except (OSError, ValueError):
                self._kill()
                return RegexOutcome(error={"code": "regex_worker_error", "message": "Regex worker returned an invalid result."})
            reply = self._read_reply(proc, deadline)
            if reply is None:
                self._kill()
                self._respawn()
                return RegexOutcome(
                    error={"code": "regex_timeout", "message": f"Regex execution exceeded {timeout_ms} ms."}
                )
            if reply is False:
                self._kill()
                return RegexOutcome(error={"code": "regex_worker_error", "message": "Regex worker returned an invalid result."})
            if "error" in reply:
                return RegexOutcome(error={"code": reply["error"], "message": reply.get("message", "")})
            hits = reply.get("hits")
            if not isinstance(hits, list) or not all(isinstance(h, int) for h in hits):
                return RegexOutcome(error={"code": "regex_worker_error", "message": "Regex worker returned an invalid result."})
            return RegexOutcome(hits=hits)

    def _read_reply(self, proc: subprocess.Popen, deadline: float):
        """The decoded reply; None on timeout; False on a broken worker."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        buf = bytearray()
        need: Optional[int] = None
        while True:
            if need is not None and len(buf) >= need:
                try:
                    return json.loads(bytes(buf[:need]))
                except ValueError:
                    return False
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return False
            buf.extend(chunk)
            if need is None:
                nl = buf.find(b"\n")
                if nl >= 0:
                    try:
                        n = int(buf[:nl])
                    except ValueError:
                        return False
                    del buf[: nl + 1]
                    need = n

    def close(self) -> None:
        with self._lock:
            self._kill()
