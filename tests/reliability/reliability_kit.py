"""Shared pieces of the reliability tests and the long-run drivers in bench/reliability.

`RawServer` drives the real `fabric-lsp` process over stdio with hand-written JSON-RPC
framing (no pygls on the client side), so tests can send hostile bytes, time answers,
cancel, and kill -9 the process. It answers the server's own requests
(`workspace/configuration`, `window/workDoneProgress/create`, `client/registerCapability`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

ORBIT = "/home/user/projects/orbit"
LEDGER = "/home/user/projects/ledger"


def long_run() -> bool:
    """Long runs (1 GB inputs, 100k fuzz examples, 200 kills) only with FABRIC_LONG=1."""
    return os.environ.get("FABRIC_LONG", "") not in ("", "0")


def server_command() -> list[str]:
    """The installed console script of this interpreter's environment, else `-m`."""
    script = Path(sys.executable).parent / "fabric-lsp"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "fabric_lsp"]


def example_agent(dest: Path) -> Path:
    """A private copy of the bundled example agent dir (sessions may be modified)."""
    from fabric_lsp.examples import copy_example_agent_dir

    agent = copy_example_agent_dir(dest)
    for p in agent.rglob("*"):
        os.chmod(p, 0o700 if p.is_dir() else 0o600)
    return agent


def session_files(agent: Path) -> list[Path]:
    return sorted((agent / "sessions").rglob("*.jsonl"))


def server_env(agent: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PI_CODING_AGENT_DIR"] = str(agent)
    env["HOME"] = str(agent.parent)
    env.update(extra)
    return env


class RpcError(Exception):
    def __init__(self, error: dict) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.message = error.get("message")
        self.error = error


def frame(obj: Any) -> bytes:
    body = json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class RawServer:
    """One `fabric-lsp` process over stdio."""

    def __init__(
        self,
        agent: Path,
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        stderr_path: Path | None = None,
        settings: dict | None = None,
        command: list[str] | None = None,
        settings_delay: float = 0.0,
    ) -> None:
        self.agent = agent
        self.settings = settings  # answer to workspace/configuration "fabric"
        self.settings_delay = settings_delay  # seconds before that answer (a slow client)
        if stderr_path is not None:
            Path(stderr_path).parent.mkdir(parents=True, exist_ok=True)
        self._stderr = open(stderr_path or os.devnull, "ab")
        self.proc = subprocess.Popen(
            command or server_command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env or server_env(agent),
            cwd=str(cwd or agent.parent),
            start_new_session=True,
        )
        self._write_lock = threading.Lock()
        self._cond = threading.Condition()
        self.responses: dict[Any, dict] = {}
        self.answer_times: dict[Any, float] = {}
        self.notifications: list[dict] = []
        self.server_requests: list[dict] = []
        self.unmatched: list[dict] = []  # responses without an id we can key on
        self.not_json_frames: list[str] = []  # NaN/Infinity seen in a frame (never allowed)
        self.raw_bodies: dict[Any, bytes] = {}  # the exact bytes of each response's body
        self.arrival: list[Any] = []  # response ids in the order they arrived
        self._reading = threading.Event()  # cleared by pause_reading()
        self._reading.set()
        self.closed = False
        self._ids = 0
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()

    # -- transport ---------------------------------------------------------------------

    def send_bytes(self, data: bytes) -> None:
        with self._write_lock:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def send(self, obj: Any) -> None:
        self.send_bytes(frame(obj))

    def _read_loop(self) -> None:
        out = self.proc.stdout
        assert out is not None
        try:
            while True:
                self._reading.wait()
                length = None
                while True:
                    line = out.readline()
                    if not line:
                        return
                    line = line.strip()
                    if not line:
                        break
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value.strip())
                if length is None:
                    continue
                body = out.read(length)
                if len(body) < length:
                    return
                self._dispatch(json.loads(body, parse_constant=self._not_json), body)
        finally:
            with self._cond:
                self.closed = True
                self._cond.notify_all()

    def _not_json(self, name: str) -> Any:
        # NaN / Infinity / -Infinity are not JSON: a strict client would drop the frame
        self.not_json_frames.append(name)
        return None

    def pause_reading(self) -> None:
        """Stop reading the server's output (after the message being read): a client
        that does not read; the server's writes then fill the pipe."""
        self._reading.clear()

    def resume_reading(self) -> None:
        self._reading.set()

    def output_waiting(self) -> tuple[int, int]:
        """(bytes waiting in the server's stdout pipe, the pipe's capacity)."""
        import fcntl
        import termios

        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        waiting = int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), sys.byteorder)
        return waiting, fcntl.fcntl(fd, 1032)  # F_GETPIPE_SZ

    def blocked_writing(self) -> bool:
        """True while a thread of the server waits in a pipe write (its stdout is full)."""
        try:
            for task in os.listdir(f"/proc/{self.proc.pid}/task"):
                with open(f"/proc/{self.proc.pid}/task/{task}/wchan") as fh:
                    if "pipe_write" in fh.read():
                        return True
        except OSError:
            pass
        return False

    def children(self) -> list[int]:
        """pids of the server's child processes (its preview workers, regex worker, ...)."""
        pids: list[int] = []
        try:
            for task in os.listdir(f"/proc/{self.proc.pid}/task"):
                with open(f"/proc/{self.proc.pid}/task/{task}/children") as fh:
                    pids.extend(int(p) for p in fh.read().split())
        except OSError:
            pass
        return sorted(set(pids))

    def preview_workers(self) -> list[int]:
        """pids of the server's preview worker processes (engine/procpool.py)."""
        out = []
        for pid in self.children():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    if b"fabric_lsp.engine.procpool" in fh.read():
                        out.append(pid)
            except OSError:
                pass
        return out

    def _dispatch(self, msg: dict, body: bytes = b"") -> None:
        now = time.monotonic()
        if "method" in msg and "id" in msg:
            self.server_requests.append(msg)
            self._answer_server_request(msg)
            return
        if "method" in msg:
            with self._cond:
                self.notifications.append(msg)
                self._cond.notify_all()
            return
        key = _key(msg.get("id"))
        with self._cond:
            if key is None:
                self.unmatched.append(msg)
            else:
                self.responses[key] = msg
                self.answer_times[key] = now
                self.raw_bodies[key] = body
                self.arrival.append(key)
            self._cond.notify_all()

    def _answer_server_request(self, msg: dict) -> None:
        method = msg["method"]
        result: Any = None
        if method == "workspace/configuration":
            items = (msg.get("params") or {}).get("items") or [{}]
            result = [self.settings if it.get("section") == "fabric" else None for it in items]
            if self.settings_delay:  # answered later, from another thread (reading goes on)
                delay, self.settings_delay = self.settings_delay, 0.0
                timer = threading.Timer(delay, self._answer_server_request, (msg,))
                timer.daemon = True
                timer.start()
                return
        try:
            self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        except (BrokenPipeError, ValueError, OSError):
            pass

    # -- requests ----------------------------------------------------------------------

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def request(self, method: str, params: Any = None, *, msg_id: Any = None) -> Any:
        """Send a request; return its id (answer with `wait`)."""
        if msg_id is None:
            msg_id = self.next_id()
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return msg_id

    def notify(self, method: str, params: Any = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def cancel(self, msg_id: Any) -> None:
        self.notify("$/cancelRequest", {"id": msg_id})

    def _until(self, found: Callable[[], Any], timeout: float, what: str) -> Any:
        """`found()` (called under the lock) once it is not None; waits on every message."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while (value := found()) is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no {what} within {timeout} s")
                if self.closed:
                    raise ConnectionError(f"server exited before {what} (rc={self.proc.poll()})")
                self._cond.wait(min(remaining, 0.5))
            return value

    def wait(self, msg_id: Any, timeout: float = 60.0) -> dict:
        key = _key(msg_id)
        return self._until(
            lambda: self.responses.pop(key) if key in self.responses else None, timeout, f"answer to request {msg_id!r}"
        )

    def wait_notification(self, accept: Callable[[dict], bool], *, since: int = 0, timeout: float = 60.0) -> dict:
        """The first notification from index `since` of `notifications` that `accept`s."""
        return self._until(
            lambda: next((m for m in self.notifications[since:] if accept(m)), None), timeout, "such notification"
        )

    def call(self, method: str, params: Any = None, timeout: float = 60.0) -> Any:
        resp = self.wait(self.request(method, params), timeout)
        if "error" in resp:
            raise RpcError(resp["error"])
        return resp.get("result")

    def initialize(self, root: str | None = ORBIT, init_options: Any = None, *, progress: bool = True) -> dict:
        caps: dict[str, Any] = {
            "workspace": {"configuration": True, "workspaceFolders": True},
            "window": {"workDoneProgress": progress},
        }
        params: dict[str, Any] = {"processId": os.getpid(), "capabilities": caps, "rootUri": None}
        if root is not None:
            uri = Path(root).as_uri()
            params["rootUri"] = uri
            params["workspaceFolders"] = [{"uri": uri, "name": "proj"}]
        if init_options is not None:
            params["initializationOptions"] = init_options
        result = self.call("initialize", params, timeout=60)
        self.notify("initialized", {})
        return result

    def stop(self, timeout: float = 10.0) -> int | None:
        self.resume_reading()
        try:
            if self.proc.poll() is None:
                try:
                    self.call("shutdown", None, timeout=timeout)
                    self.notify("exit")
                except (RpcError, TimeoutError, ConnectionError, OSError, ValueError):
                    pass
                try:
                    self.proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self.kill()
        finally:
            self._close_pipes()
        return self.proc.returncode

    def kill(self) -> None:
        """kill -9 the server and everything it started (its regex worker, build pool)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=10)
        self._close_pipes()

    def _close_pipes(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except (OSError, ValueError):
                pass
        try:
            self._stderr.close()
        except OSError:
            pass

    def alive(self) -> bool:
        return self.proc.poll() is None

    def status(self) -> dict[str, int]:
        """VmRSS / VmHWM (peak) of the server process in KiB, and `ChildrenVmHWM`: the sum
        of the peaks of its live children (preview workers compute there)."""
        out = _vm(self.proc.pid)
        out["ChildrenVmHWM"] = sum(_vm(pid).get("VmHWM", 0) for pid in self.children())
        return out

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.alive():
            self.stop()


def _vm(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                name, _, value = line.partition(":")
                if name in ("VmRSS", "VmHWM"):
                    out[name] = int(value.split()[0])
    except OSError:
        pass
    return out


def _key(msg_id: Any) -> Any:
    if isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool):
        return msg_id
    return None


def strip_volatile(value: Any) -> Any:
    """Results minus nothing: results are deterministic, so compare them whole. Kept as a
    hook in case a field ever becomes volatile."""
    return value


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, dirs_exist_ok=True)
    return dst
