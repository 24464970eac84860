"""User regexes run in a disposable child process that is killed at the deadline
(digest §6.4), so a catastrophic pattern such as `(a+)+$` can never stall the caller.

The child is JavaScript, as in the reference: `node` running `_JS_WORKER`, which builds
`new RegExp(pattern, "iu")` and calls `.test()` on each haystack, so Pi users' patterns
mean what they mean in Pi (named groups, `\\p{L}`, `\\u{1F600}`, no `(?i)`). The node
binary is `$FABRIC_LSP_NODE`, else `node` on PATH. Without one, the child is a plain
Python interpreter running `_PY_WORKER` (stdlib `re`, IGNORECASE, Unicode str
semantics): a different dialect, so that fallback is logged as a warning once and
`RegexRunner.dialect` says `"python"`.

The child stays warm between queries and is replaced after a timeout or crash.
Framing: one ASCII length line, then that many bytes of JSON, in both directions; the
request is ASCII JSON, so a lone surrogate reaches JavaScript as the same lone UTF-16
code unit.
"""

from __future__ import annotations

import json
import logging
import os
import select
import shutil
import subprocess
import sys
import threading
import time
import weakref
from typing import Any, cast

from ..childproc import stop

log = logging.getLogger(__name__)

NODE_ENV = "FABRIC_LSP_NODE"
# The reference's worker has 16 MB of old and 4 MB of young generation; a whole node
# process needs a little more for itself and the JSON of 2 MiB of haystacks.
_NODE_FLAGS = ["--max-old-space-size=64", "--max-semi-space-size=2", "--no-warnings"]

_JS_WORKER = r"""
"use strict";
const out = (s) => process.stdout.write(s);
let chunks = [], have = 0, need = -1;
function reply(obj) {
  const data = Buffer.from(JSON.stringify(obj), "utf8");
  out(data.length + "\n");
  out(data);
}
function handle(body) {
  const req = JSON.parse(body);
  let rx;
  try {
    rx = new RegExp(req.p, "iu");
  } catch (e) {
    return { error: "invalid_regex", message: String((e && e.message) || e) };
  }
  try {
    const hits = [], h = req.h;
    for (let i = 0; i < h.length; i++) if (rx.test(h[i])) hits.push(i);
    return { hits };
  } catch (e) {
    return { error: "regex_worker_error", message: String((e && e.message) || "Regex worker returned an invalid result.") };
  }
}
process.stdin.on("data", (chunk) => {
  chunks.push(chunk);
  have += chunk.length;
  for (;;) {
    let buf = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, have);
    chunks = [buf];
    if (need < 0) {
      const nl = buf.indexOf(10);
      if (nl < 0) return;
      need = Number(buf.toString("latin1", 0, nl));
      buf = buf.subarray(nl + 1);
      chunks = [buf];
      have = buf.length;
    }
    if (have < need) return;
    const body = buf.toString("utf8", 0, need);
    buf = buf.subarray(need);
    chunks = buf.length ? [buf] : [];
    have = buf.length;
    need = -1;
    reply(handle(body));
  }
});
process.stdin.on("end", () => process.exit(0));
out("R\n");
"""

_PY_WORKER = r"""
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


class RegexOutcome:
    __slots__ = ("hits", "error")

    def __init__(self, hits: list[int] | None = None, error: dict[str, Any] | None = None) -> None:
        self.hits = hits
        self.error = error


def find_node(env: dict[str, str] | None = None) -> str | None:
    """The node binary that runs user regexes: `$FABRIC_LSP_NODE` (a path, or a name
    looked up on PATH), else `node` on PATH; None when there is none."""
    env = dict(os.environ) if env is None else env
    configured = env.get(NODE_ENV, "").strip()
    if configured:
        found = shutil.which(configured, path=env.get("PATH"))
        if found:
            return found
        log.warning("%s=%s is not an executable; looking for node on PATH", NODE_ENV, configured)
    return shutil.which("node", path=env.get("PATH"))


class RegexRunner:
    """Thread-safe; one request at a time per runner. `node`: the node binary (default
    `find_node()`); without one the Python `re` fallback runs, with a logged warning."""

    def __init__(self, node: str | None = None) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._unconfirmed = False  # spawned, its ready line not read yet
        self._node = node
        self._argv: list[str] | None = None
        self.dialect: str | None = None  # "javascript" | "python", known at the first spawn

    def _command(self) -> list[str]:
        if self._argv is None:
            node = self._node or find_node()
            if node:
                self._argv = [node, *_NODE_FLAGS, "-e", _JS_WORKER]
                self.dialect = "javascript"
            else:
                self._use_python(f"no node found (set {NODE_ENV} or put node on PATH)")
        assert self._argv is not None
        return self._argv

    def _use_python(self, why: str) -> None:
        self._argv = [sys.executable, "-I", "-S", "-c", _PY_WORKER]
        self.dialect = "python"
        log.warning(
            "regex queries use Python `re`, not JavaScript RegExp: %s; named groups (?<n>…), "
            "\\p{…} and \\u{…} are rejected and some patterns match differently",
            why,
        )

    def _spawn(self) -> subprocess.Popen[bytes]:
        argv = self._command()
        env = {k: v for k, v in os.environ.items() if k != "NODE_OPTIONS"}  # no --require of the user's
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            env=env,
        )
        # An engine dropped without close() must not leave its worker behind.
        weakref.finalize(self, stop, proc)
        return proc

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop(proc)

    def _respawn(self) -> None:
        """Start a replacement now, so the next pattern does not wait for interpreter start-up."""
        self._unconfirmed = True  # also when the spawn fails: `_confirm` then says so
        try:
            self._proc = self._spawn()
        except OSError:
            self._proc = None

    def _confirm(self) -> None:
        """Wait for the ready line (start-up is not the pattern's time); OSError if none."""
        if self._proc is None:
            raise OSError("regex worker could not be started")
        assert self._proc.stdout is not None
        ready, _, _ = select.select([self._proc.stdout.fileno()], [], [], 10.0)
        if not ready or os.read(self._proc.stdout.fileno(), 2) != b"R\n":
            raise OSError("regex worker did not start")
        self._unconfirmed = False

    def run(self, pattern: str, haystacks: list[str], timeout_ms: int) -> RegexOutcome:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._kill()
                self._respawn()
            if self._unconfirmed:
                try:
                    try:
                        self._confirm()
                    except OSError as exc:
                        if self.dialect != "javascript":
                            raise
                        self._kill()
                        self._use_python(f"{self._command()[0]} did not start ({exc})")
                        self._respawn()
                        self._confirm()
                except OSError as exc:
                    self._kill()
                    return RegexOutcome(error={"code": "regex_worker_error", "message": str(exc)})
            deadline = time.monotonic() + timeout_ms / 1000.0
            proc = self._proc
            assert proc is not None  # confirmed above
            payload = json.dumps({"p": pattern, "h": haystacks}).encode("ascii")
            try:
                assert proc.stdin is not None
                proc.stdin.write(b"%d\n" % len(payload))
                proc.stdin.write(payload)
                proc.stdin.flush()
            except (OSError, ValueError):
                self._kill()
                return RegexOutcome(
                    error={"code": "regex_worker_error", "message": "Regex worker returned an invalid result."}
                )
            reply = self._read_reply(proc, deadline)
            if reply is None:
                self._kill()
                self._respawn()
                return RegexOutcome(
                    error={"code": "regex_timeout", "message": f"Regex execution exceeded {timeout_ms} ms."}
                )
            if reply is False:
                self._kill()
                return RegexOutcome(
                    error={"code": "regex_worker_error", "message": "Regex worker returned an invalid result."}
                )
            if "error" in reply:
                return RegexOutcome(error={"code": reply["error"], "message": reply.get("message", "")})
            hits = reply.get("hits")
            if not isinstance(hits, list) or not all(isinstance(h, int) for h in cast("list[object]", hits)):
                return RegexOutcome(
                    error={"code": "regex_worker_error", "message": "Regex worker returned an invalid result."}
                )
            return RegexOutcome(hits=cast("list[int]", hits))  # checked just above

    def _read_reply(self, proc: subprocess.Popen[bytes], deadline: float) -> Any:
        """The decoded JSON reply (any JSON value); None on timeout; False on a broken worker."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        buf = bytearray()
        need: int | None = None
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
