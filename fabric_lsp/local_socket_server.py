"""The local socket's server: a running fabric-lsp's memory reads for other processes of
the same user (the protocol: fabric_lsp/local_socket.py).

`LocalSocketServer` serves them for a language server (`serve_for_server`, started at
`initialized`) or for `fabric-lsp serve --daemon` (`run_daemon`). It imports the shared
half (fabric_lsp/local_socket_wire.py), never the client.
"""

from __future__ import annotations

import os
import sys

from fabric_lsp.local_socket_wire import (
    BUSY,
    CANCELLED,
    ENV_SWITCH,
    HELLO,
    IDLE_TIMEOUT_S,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    MAX_CONNECTIONS,
    MAX_REQUEST_BYTES,
    METHOD_NOT_FOUND,
    METHODS,
    NOT_SERVING,
    PARSE_ERROR,
    PROTOCOL,
    TICK_S,
    available,
    error_line,
    ours_socket,
    package_dir,
    peer_uid,
    private_dir_refusal,
    result_line,
    same_file,
    send_line,
    socket_dir,
    take_lock,
    unlink_quietly,
)

try:  # the C module: `socket` (enums, selectors) costs a CLI start ~3 ms
    import _socket
except ImportError:  # pragma: no cover - an interpreter without it
    import socket as _socket  # type: ignore[no-redef]

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from collections.abc import Callable
    from concurrent.futures import Future
    from typing import Any

    from fabric_lsp.config import ServerConfig
    from fabric_lsp.engine_owner import Engines


# -- the settings that change answers ------------------------------------------------------


def config_fingerprint(cfg: ServerConfig) -> str:
    """SHA-256 of what makes two configurations answer memory reads differently: the
    directories, the memory and team settings, and the code (version, install)."""
    import hashlib
    import json

    from fabric_lsp import __version__

    data = {
        "agentDir": os.path.abspath(str(cfg.agent_dir)),
        "sessionDir": os.path.abspath(str(cfg.session_dir)),
        "indexDir": os.path.abspath(str(cfg.index_dir)),
        "memory": cfg.memory,
        "team": cfg.team,
        "version": __version__,
        "package": package_dir(),
        "protocol": PROTOCOL,
    }
    text = json.dumps(data, sort_keys=True, default=str, ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


# -- server ------------------------------------------------------------------------------


class LocalSocketServer:
    """Serves `METHODS` of `engines` on this user's socket for the settings `config()`.

    `submit(fn)` runs an engine call (the server's memory pool), `default_cwd()` is the
    project of a request without `cwd`, `is_open()` turns false at shutdown, `announce`
    hears each socket it starts serving. Threads: one listener (which also, every
    TICK_S, follows a settings change to the new socket name and takes over a name whose
    server is gone), one per open connection.
    """

    def __init__(
        self,
        engines: Engines,
        config: Callable[[], ServerConfig],
        submit: Callable[[Callable[[], Any]], Future[Any]],
        *,
        default_cwd: Callable[[], str | None] = lambda: None,
        is_open: Callable[[], bool] = lambda: True,
        announce: Callable[[str], None] = lambda _m: None,
    ) -> None:
        import logging
        import threading

        self.log = logging.getLogger("fabric_lsp.local_socket")
        self.engines = engines
        self.config = config
        self.submit = submit
        self.default_cwd = default_cwd
        self.is_open = is_open
        self.announce = announce
        self._threading = threading
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._active = 0
        self._listener: socket.socket | None = None
        self._lock_fd: int | None = None
        self._bound: tuple[str, str, int, int] | None = None  # (socket path, lock path, dev, ino)
        self._key: str | None = None
        self._fingerprint = ""
        self._refused_uids: set[int] = set()
        self._said: set[str] = set()
        self._thread: Any | None = None
        self.refusal: str | None = None  # why the last attempt to serve failed, if it did

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        import atexit

        self._maintain()
        self._thread = self._threading.Thread(target=self._run, name="fabric-local-socket", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            self._release()

    @property
    def path(self) -> str | None:
        return self._bound[0] if self._bound else None

    def _say_once(self, message: str) -> None:
        self.refusal = message
        if message not in self._said:
            self._said.add(message)
            self.log.warning("local socket: %s", message)

    def _maintain(self) -> None:
        """Hold the socket of the current settings: rebind after a settings change, take
        over a name whose server is gone, re-create a socket file that was removed."""
        with self._lock:
            if self._stop.is_set():
                return
            if not self.is_open():
                self._release()
                return
            try:
                cfg = self.config()
                fingerprint = config_fingerprint(cfg)
            except Exception:  # never let a settings problem stop the server
                self.log.exception("local socket: the settings could not be read")
                return
            self._fingerprint = fingerprint
            key = fingerprint[:16]
            if self._bound is not None and self._key == key and same_file(self._bound):
                return
            self._release()
            self._bind(os.path.abspath(str(cfg.agent_dir)), key)

    def _bind(self, agent_dir: str, key: str) -> None:
        try:
            import fcntl
        except ImportError:  # no flock: no way to tell a live socket from a stale one safely
            return
        if not os.path.isdir(agent_dir):
            return  # nothing to answer about, and never create someone's agent dir: again next tick
        folder, owned = socket_dir(agent_dir)
        try:
            from fabric_lsp.engine.private_dir import make_private_dir

            make_private_dir(folder)
        except OSError as err:
            self._say_once(f"{folder} cannot be created ({err.strerror or err}); not serving")
            return
        for path in owned:
            why = private_dir_refusal(path)
            if why is not None:
                self._say_once(f"{why}; not serving (fix or remove it)")
                return
        sock_path = os.path.join(folder, key + ".sock")
        lock_path = os.path.join(folder, key + ".lock")
        fd = take_lock(fcntl, lock_path)
        if fd is None:
            return  # another server of these settings serves it: we take over when it is gone
        if os.path.lexists(sock_path):
            if ours_socket(sock_path) is None:
                os.close(fd)
                self._say_once(f"{sock_path} exists and is not a socket of this user; not touching it, not serving")
                return
            try:
                os.unlink(sock_path)  # stale: its server released the lock (it is gone)
            except OSError:
                os.close(fd)
                return
        import socket

        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(sock_path)
            os.chmod(sock_path, 0o600)
            listener.listen(64)
            st = os.lstat(sock_path)
        except OSError as err:
            listener.close()
            os.close(fd)
            self._say_once(f"{sock_path} cannot be served ({err.strerror or err})")
            return
        self._listener, self._lock_fd, self._key = listener, fd, key
        self._bound = (sock_path, lock_path, st.st_dev, st.st_ino)
        self.refusal = None
        self.announce(f"fabric-lsp local socket: serving {sock_path}")

    def _release(self) -> None:
        """Close and remove what we bound (only our own socket file and lock file)."""
        listener, self._listener = self._listener, None
        bound, self._bound = self._bound, None
        fd, self._lock_fd = self._lock_fd, None
        if listener is not None:
            try:
                listener.close()
            except OSError:
                pass
        if bound is not None:
            sock_path, lock_path, _dev, _ino = bound
            if same_file(bound):
                unlink_quietly(sock_path)
            if fd is not None:
                try:
                    st, here = os.fstat(fd), os.lstat(lock_path)
                    if (st.st_dev, st.st_ino) == (here.st_dev, here.st_ino):
                        unlink_quietly(lock_path)  # removed while held: a waiter re-opens it
                except OSError:
                    pass
        if fd is not None:
            os.close(fd)

    def _run(self) -> None:
        import select

        while not self._stop.is_set():
            listener = self._listener
            if listener is None:
                self._stop.wait(TICK_S)
            else:
                try:
                    ready, _, _ = select.select([listener], [], [], TICK_S)
                except (OSError, ValueError):  # closed by a rebind meanwhile
                    ready = []
                if ready:
                    self._accept(listener)
            self._maintain()

    def _accept(self, listener: socket.socket) -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        cred = peer_uid(conn)
        if cred is None or cred[0] != os.geteuid():
            uid = cred[0] if cred else -1
            if uid not in self._refused_uids:
                self._refused_uids.add(uid)
                self.log.warning(
                    "local socket: refused a connection from uid %s (pid %s): only uid %s may connect",
                    uid,
                    cred[1] if cred else "?",
                    os.geteuid(),
                )
            conn.close()
            return
        with self._lock:
            busy = self._active >= MAX_CONNECTIONS
            if not busy:
                self._active += 1
        if busy:
            send_line(conn, error_line(None, BUSY, f"busy: {MAX_CONNECTIONS} local connections are open; try again"))
            conn.close()
            return
        self._threading.Thread(
            target=self._serve_connection, args=(conn,), name="fabric-local-conn", daemon=True
        ).start()

    # -- one connection ------------------------------------------------------------------

    def _serve_connection(self, conn: socket.socket) -> None:
        buf = bytearray()
        try:
            conn.settimeout(IDLE_TIMEOUT_S)
            while not self._stop.is_set():
                end = buf.find(b"\n")
                if end < 0:
                    if len(buf) > MAX_REQUEST_BYTES:
                        send_line(
                            conn,
                            error_line(
                                None, INVALID_REQUEST, f"a request line is longer than {MAX_REQUEST_BYTES} bytes"
                            ),
                        )
                        return
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                    continue
                line = bytes(buf[:end]).strip()
                del buf[: end + 1]
                if line:
                    answer = self._answer(line, conn)
                    if answer is None or not send_line(conn, answer):
                        return
        except OSError:
            return
        finally:
            try:
                conn.close()
            except OSError:
                pass
            with self._lock:
                self._active -= 1

    def _answer(self, line: bytes, conn: socket.socket) -> bytes | None:
        import msgspec

        try:
            msg = msgspec.json.decode(line)
        except (msgspec.DecodeError, UnicodeDecodeError) as err:
            return error_line(None, PARSE_ERROR, f"not JSON: {err}")
        if not isinstance(msg, dict):
            return error_line(None, INVALID_REQUEST, "a request is a JSON object {method, params?, cwd?, id?}")
        msg_id = msg.get("id")
        unknown = sorted(set(msg) - {"method", "params", "cwd", "id"})
        if unknown:
            return error_line(
                msg_id,
                INVALID_REQUEST,
                f"unknown key `{unknown[0]}`: a request is a JSON object {{method, params?, cwd?, id?}}",
            )
        method, params, cwd = msg.get("method"), msg.get("params"), msg.get("cwd")
        if not isinstance(method, str):
            return error_line(msg_id, INVALID_REQUEST, "`method` must be a string")
        if cwd is not None and not (isinstance(cwd, str) and os.path.isabs(cwd)):
            return error_line(msg_id, INVALID_PARAMS, "`cwd` must be an absolute path")
        if not self.is_open():
            return error_line(msg_id, NOT_SERVING, "the server is shutting down")
        if method == HELLO:
            return result_line(msg_id, msgspec.json.encode(self._hello(params)))
        if method not in METHODS:
            return error_line(
                msg_id,
                METHOD_NOT_FOUND,
                f"method not found: {method!r}; this socket serves {', '.join((HELLO,) + METHODS)}",
            )
        return self._call(msg_id, method, params, cwd if cwd is not None else self.default_cwd(), conn)

    def _hello(self, params: Any) -> dict[str, Any]:
        from fabric_lsp import __version__

        out: dict[str, Any] = {
            "name": "fabric-lsp",
            "version": __version__,
            "pid": os.getpid(),
            "protocol": PROTOCOL,
            "methods": list(METHODS),
            "config": self._fingerprint,
        }
        if isinstance(params, dict) and params:
            match, why, settings = self._same_settings(params)
            out["match"] = match
            if why:
                out["mismatch"] = why
            if settings is not None:
                out["settings"] = settings
        return out

    def _same_settings(self, params: dict[str, Any]) -> tuple[bool, str | None, dict[str, Any] | None]:
        """Do the caller's inputs resolve to this server's settings? (load_config in this
        process with the caller's workspace, options and environment)."""
        from pathlib import Path

        from fabric_lsp import __version__
        from fabric_lsp.config import load_config

        if params.get("protocol") != PROTOCOL:
            return False, f"socket protocol {params.get('protocol')!r}, not {PROTOCOL}", None
        if params.get("version") != __version__ or params.get("package") != package_dir():
            return False, f"another fabric-lsp install ({params.get('version')} at {params.get('package')})", None
        raw_env = params.get("env")
        env: dict[str, Any] = raw_env if isinstance(raw_env, dict) else {}
        cwd, init = params.get("cwd"), params.get("initializationOptions")
        if env.get("HOME") != os.path.expanduser("~"):
            return False, "another home directory", None
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            return False, "no absolute `cwd`", None
        agent_env = env.get("PI_CODING_AGENT_DIR")
        if agent_env is not None and not isinstance(agent_env, str):
            return False, "`env.PI_CODING_AGENT_DIR` must be a string", None
        if agent_env and not os.path.isabs(os.path.expanduser(agent_env)):
            return False, "a relative PI_CODING_AGENT_DIR", None
        try:
            theirs = load_config(
                workspace_root=Path(cwd),
                init_options=init if isinstance(init, dict) else None,
                env={"PI_CODING_AGENT_DIR": agent_env} if agent_env else {},
            )
        except Exception as err:  # load_config never raises for bad input; a bug must not stop us
            return False, f"settings could not be resolved: {err}", None
        settings = {
            "agentDir": str(theirs.agent_dir),
            "sessionDir": str(theirs.session_dir),
            "indexDir": str(theirs.index_dir),
            "sources": list(theirs.sources),
            "warnings": list(theirs.warnings),
            "maxEntryChars": theirs.memory.get("maxEntryChars"),
        }
        try:
            ours = config_fingerprint(self.config())
        except Exception as err:
            return False, f"this server's settings could not be read: {err}", settings
        if config_fingerprint(theirs) != ours:
            return False, "other settings (directories, memory or team)", settings
        return True, None, settings

    def _call(self, msg_id: Any, method: str, params: Any, cwd: str | None, conn: socket.socket) -> bytes:
        import msgspec

        from fabric_lsp import protocol
        from fabric_lsp.engine.activity import Cancelled, CancelToken
        from fabric_lsp.engine_owner import DomainError

        try:
            p = protocol.decode_params(method, params)
        except protocol.InvalidParams as err:
            return error_line(msg_id, INVALID_PARAMS, str(err), {"stage": "params", "detail": str(err)})
        token = CancelToken()
        engines = self.engines
        run = {
            protocol.RECALL: engines.recall,
            protocol.SESSIONS: engines.sessions,
            protocol.EXPAND: engines.expand,
            protocol.FILE_HISTORY: engines.file_history,
        }[method]

        def work() -> bytes:
            token.check()
            try:
                wire = protocol.to_wire(run(p, cwd, token, None))
            except DomainError as err:
                wire = err.to_result()
            return msgspec.json.encode(wire)

        try:
            future = self.submit(work)
        except RuntimeError as err:  # the pool is shut down
            return error_line(msg_id, NOT_SERVING, f"the server is shutting down ({err})")
        try:
            body = _wait(future, conn, token)
        except Cancelled:
            return error_line(msg_id, CANCELLED, f"{method} was cancelled")
        except protocol.InvalidParams as err:
            return error_line(msg_id, INVALID_PARAMS, str(err), {"stage": "params", "detail": str(err)})
        except ValueError as err:  # engines reject semantically invalid params this way
            return error_line(msg_id, INVALID_PARAMS, f"{method}: {err}", {"stage": "engine", "detail": str(err)})
        except Exception as err:
            self.log.error("local socket: %s failed", method, exc_info=(type(err), err, err.__traceback__))
            return error_line(msg_id, INTERNAL_ERROR, f"{method} failed: {type(err).__name__}: {err}")
        return result_line(msg_id, body)


def _wait(future: Future[bytes], conn: socket.socket, token: Any) -> bytes:
    """The call's answer; a client that hangs up meanwhile cancels the call."""
    import concurrent.futures
    import select

    while True:
        try:
            return future.result(timeout=0.25)
        except concurrent.futures.TimeoutError:
            pass
        try:
            readable, _, _ = select.select([conn], [], [], 0)
            gone = bool(readable) and conn.recv(1, _socket.MSG_PEEK) == b""
        except OSError:
            gone = True
        if gone:
            token.cancel()
            future.cancel()


# -- the faces that start it ---------------------------------------------------------------


def serve_for_server(ls: Any) -> LocalSocketServer | None:
    """Start the socket for a language server (handlers/lifecycle.initialized): its
    engines, settings and memory pool; stops serving at `shutdown`."""
    if not available():
        return None
    server = LocalSocketServer(
        ls.engines,
        lambda: ls.config,
        ls.memory_executor.submit,
        default_cwd=ls.default_cwd,
        is_open=lambda: not ls.shutting_down,
        announce=ls.log_message,
    )
    try:
        server.start()
    except Exception:
        server.log.exception("local socket: could not start")
        return None
    return server


def run_daemon(cfg: ServerConfig, *, cwd: str) -> int:
    """`fabric-lsp serve --daemon`: serve only the local socket, in the foreground, until
    SIGTERM or Ctrl-C; index every session in the background so answers stay warm."""
    import signal
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from fabric_lsp.engine_owner import Engines

    if not available():
        why = (
            "FABRIC_LSP_SOCKET=0 turns the local socket off"
            if os.environ.get(ENV_SWITCH, "1").strip() == "0"
            else "this platform has no Unix sockets with peer credentials"
        )
        print(f"fabric-lsp serve --daemon: {why}; nothing to serve", file=sys.stderr)
        return 2
    if not cfg.agent_dir.is_dir():
        print(
            f"fabric-lsp serve --daemon: the Pi agent dir {cfg.agent_dir} does not exist "
            "(set --agent-dir or PI_CODING_AGENT_DIR)",
            file=sys.stderr,
        )
        return 2
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="fabric-memory")
    engines = Engines(lambda: cfg, submit=pool.submit)

    def say(message: str) -> None:
        print(f"fabric-lsp serve --daemon: {message.removeprefix('fabric-lsp ')}", file=sys.stderr, flush=True)

    server = LocalSocketServer(engines, lambda: cfg, pool.submit, default_cwd=lambda: cwd, announce=say)
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        server.start()
        if server.path is None and server.refusal is not None:
            say(f"not serving: {server.refusal}")
            return 2
        if server.path is None:
            say("another server with these settings serves this agent dir; standing by to take over when it stops")
        if os.environ.get("FABRIC_LSP_BACKGROUND_INDEX", "1") != "0":
            engines.enable_background_index(None)  # a request that comes first already sees it pending
            pool.submit(engines.resume_background_index)
        say(f"pid {os.getpid()}, agent dir {cfg.agent_dir}; SIGTERM or Ctrl-C stops it")
        while not stop.wait(3600):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.close()
        engines.close()
        pool.shutdown(wait=False, cancel_futures=True)
    say("stopped")
    return 0
