"""The local socket: a running server's memory reads for other processes of the same user.

A third face of the engine calls (fabric_lsp/engines.py), beside the LSP server and the
CLI. A fabric-lsp language server (after `initialized`) or `fabric-lsp serve --daemon`
listens on a Unix socket that only its own user can open; `fabric-lsp recall`,
`sessions`, `expand` and `history` ask it first and print its answer (the same bytes as
when they compute it themselves), so a shell query costs a process start and a round
trip instead of loading the index. Any local client may use it (docs/protocol.md,
"The local socket").

Protocol: newline-delimited JSON, one request line → one answer line, any number per
connection.

    → {"method": "fabric/recall", "params": {...}, "cwd": "/abs/project", "id": 7}
    ← {"id": 7, "result": {...}}          or   {"id": 7, "error": {code, message, data?}}

`method` is `hello` or one of the wire's `fabric/recall`, `fabric/sessions`,
`fabric/expand`, `fabric/fileHistory`; `params` are that method's params, decoded strictly
by `protocol.decode_params` (the same Structs and messages as over LSP); `cwd` is the
project directory of `project` scopes (default: the server's workspace); `id` is echoed.
`hello` (params optional) answers who serves (`name`, `version`, `pid`, `protocol`,
`methods`, `config`: the fingerprint of the settings that change answers) and, given the
caller's settings inputs (`cwd`, `initializationOptions`, `env`, `version`, `package`),
whether those resolve to the same settings as the server's (`match`) and what they are
(`settings`): the CLI uses a server only on a match.

Where (`socket_dir`): `<agentDir>/fabric-lsp/run/` when the socket path fits the platform's
limit (~100 bytes), else `$XDG_RUNTIME_DIR/fabric-lsp/<hash of agentDir>/`, else
`$TMPDIR|/tmp/fabric-lsp-<uid>/<hash>/`. Each directory on the way that we name must be a
real directory (not a symlink) owned by this user with no group/other access (0700), or
the socket is not used at all. The socket is `<fingerprint16>.sock`, so servers of one
agent dir with different settings each have their own; `<fingerprint16>.lock` (flock) is
held by the one serving it. Every connection's peer credentials are checked
(SO_PEERCRED on Linux, LOCAL_PEERCRED on macOS/BSD): another uid is refused, and so is
a peer whose credentials cannot be read; the client checks the server's too. A socket
file whose server is gone (its lock free, or connect refused) is stale: the client
ignores it, the next server replaces it (only a socket owned by us is ever removed; a
path that is anything else is left alone and the socket is not used). No Unix sockets
(Windows): the face is off and the CLI computes its answers itself.

`FABRIC_LSP_SOCKET=0` turns it off (in a server: no socket; in the CLI: never asked).

Client side (`connect`) imports only the standard library, so a CLI query answered by a
server loads nothing of the engine.
"""

from __future__ import annotations

import os
import stat
import struct
import sys

try:  # the client needs only the C module: `socket` (enums, selectors) costs a CLI start ~3 ms
    import _socket
except ImportError:  # pragma: no cover - an interpreter without it
    import socket as _socket  # type: ignore[no-redef]

# The client side imports neither `typing` nor `json` (with `re` and `enum`, ~10 ms of a CLI
# start): annotations are strings, and the wire is read and written with `_json`'s C
# scanner and string encoder (below).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from concurrent.futures import Future
    from typing import Any, Callable, Optional

    from fabric_lsp.config import ServerConfig
    from fabric_lsp.engines import Engines

PROTOCOL = 1
HELLO = "hello"
METHODS = ("fabric/recall", "fabric/sessions", "fabric/expand", "fabric/fileHistory")
ENV_SWITCH = "FABRIC_LSP_SOCKET"
SOCKET_PATH_MAX = 100  # sun_path: 108 bytes on Linux, 104 on macOS/BSD (with the NUL)
MAX_REQUEST_BYTES = 1 << 20  # one request line
MAX_CONNECTIONS = 16  # handled at once; one more is told "busy" and closed
IDLE_TIMEOUT_S = 30.0  # a connection that sends nothing for this long is closed
HELLO_TIMEOUT_S = 5.0  # the client's wait for a hello answer (then: compute it itself)
TICK_S = 1.0  # the listener's check of its settings, its socket file and a free name

# error codes (JSON-RPC's where one fits)
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
CANCELLED = -32800
BUSY = -32803
NOT_SERVING = -32002  # the server is shutting down


def available() -> bool:
    """Unix sockets and peer credentials exist here, and FABRIC_LSP_SOCKET is not 0."""
    if os.environ.get(ENV_SWITCH, "1").strip() == "0":
        return False
    return hasattr(_socket, "AF_UNIX") and os.name == "posix" and _peer_cred_kind() is not None


def _peer_cred_kind() -> Optional[str]:
    if sys.platform.startswith("linux") and hasattr(_socket, "SO_PEERCRED"):
        return "linux"
    if sys.platform.startswith(("darwin", "freebsd", "dragonfly")):  # LOCAL_PEERCRED, struct xucred
        return "bsd"
    return None


def peer_uid(sock: "socket.socket | _socket.socket") -> Optional[tuple[int, Optional[int]]]:
    """(uid, pid or None) of the process at the other end of a connected Unix socket, or
    None when the platform will not say (then nothing is trusted)."""
    kind = _peer_cred_kind()
    try:
        if kind == "linux":
            size = struct.calcsize("3i")
            pid, uid, _gid = struct.unpack("3i", sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, size))
            return uid, pid
        if kind == "bsd":
            # getsockopt(SOL_LOCAL=0, LOCAL_PEERCRED=1) → struct xucred {u_int cr_version; uid_t cr_uid; ...}
            raw = sock.getsockopt(0, 1, 76)
            version, uid = struct.unpack_from("=II", raw)
            return (uid, None) if version == 0 else None
    except (OSError, struct.error):
        return None
    return None


# -- JSON on the wire, without the json package ---------------------------------------------


class _ScanContext:
    """What `_json.make_scanner` reads from json.JSONDecoder: strict JSON, plain types."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN / Infinity: never sent by msgspec, read as Python reads them


try:
    import _json

    _scan = _json.make_scanner(_ScanContext())  # pyright: ignore[reportArgumentType]  # (any object with these attributes)
    _quote = _json.encode_basestring_ascii
except (ImportError, AttributeError, TypeError):  # pragma: no cover - another interpreter
    import json as _json_module

    _scan = None
    _quote = _json_module.dumps


def wire_decode(data: "bytes | str") -> "Any":
    """One JSON value (json.loads' result for valid JSON); ValueError when it is not JSON."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    if _scan is None:  # pragma: no cover
        import json

        return json.loads(text)
    start = len(text) - len(text.lstrip(" \t\n\r"))
    try:
        value, end = _scan(text, start)
    except StopIteration:
        raise ValueError("not JSON") from None
    if text[end:].strip(" \t\n\r"):
        raise ValueError("not JSON: extra data")
    return value


def wire_encode(value: "Any") -> bytes:
    """Compact ASCII JSON of dicts, lists, strings, ints, floats, booleans and None."""
    out: list[str] = []
    _encode(value, out)
    return "".join(out).encode("ascii")


def _encode(value: "Any", out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_quote(value))
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("NaN and Infinity are not JSON")
        out.append(float.__repr__(value))
    elif isinstance(value, dict):
        out.append("{")
        for i, (k, v) in enumerate(value.items()):
            if not isinstance(k, str):
                raise TypeError("JSON object keys are strings")
            if i:
                out.append(",")
            out.append(_quote(k))
            out.append(":")
            _encode(v, out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, v in enumerate(value):
            if i:
                out.append(",")
            _encode(v, out)
        out.append("]")
    else:
        raise TypeError(f"{type(value).__name__} is not JSON")


# -- where the socket lives -------------------------------------------------------------


def _short_hash(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def socket_dir(agent_dir: str) -> tuple[str, tuple[str, ...]]:
    """The directory of `agent_dir`'s sockets and the directories we own on the way (each
    must be ours and 0700), the same for every process of this user with the same
    environment. `agent_dir` is absolute."""
    name_len = len("/0123456789abcdef.sock")
    primary = os.path.join(agent_dir, "fabric-lsp", "run")
    if len(primary.encode("utf-8", "surrogatepass")) + name_len <= SOCKET_PATH_MAX:
        return primary, (primary,)
    key = _short_hash(agent_dir)
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime):
        base = os.path.join(runtime, "fabric-lsp")
        path = os.path.join(base, key)
        if len(path) + name_len <= SOCKET_PATH_MAX:
            return path, (base, path)
    tmp = os.environ.get("TMPDIR", "")
    tmp = tmp if tmp and os.path.isabs(tmp) and len(tmp) < 40 else "/tmp"
    base = os.path.join(tmp, f"fabric-lsp-{os.geteuid()}")
    path = os.path.join(base, key)
    return path, (base, path)


def private_dir_refusal(path: str) -> Optional[str]:
    """Why `path` is not a directory only this user can enter (None when it is)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return f"{path} does not exist"
    except OSError as err:
        return f"{path} cannot be checked ({err.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid != os.geteuid():
        return f"{path} belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()})"
    if st.st_mode & 0o077:
        return f"{path} has mode {oct(st.st_mode & 0o777)}; it must be 0700"
    return None


def _ours_socket(path: str) -> Optional[os.stat_result]:
    """lstat of `path` when it is a socket owned by this user, else None."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISSOCK(st.st_mode) and st.st_uid == os.geteuid():
        return st
    return None


# -- the settings that change answers ------------------------------------------------------


def _package_dir() -> str:
    return os.path.dirname(os.path.abspath(__file__))


def config_fingerprint(cfg: "ServerConfig") -> str:
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
        "package": _package_dir(),
        "protocol": PROTOCOL,
    }
    text = json.dumps(data, sort_keys=True, default=str, ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def settings_inputs(*, cwd: str, init: dict[str, Any]) -> dict[str, Any]:
    """The hello params that let a server resolve the caller's settings as the caller
    would (config.load_config with its workspace, options and environment)."""
    from fabric_lsp import __version__

    return {
        "protocol": PROTOCOL,
        "version": __version__,
        "package": _package_dir(),
        "cwd": cwd,
        "initializationOptions": init,
        "env": {"PI_CODING_AGENT_DIR": os.environ.get("PI_CODING_AGENT_DIR"), "HOME": os.path.expanduser("~")},
    }


# -- client ------------------------------------------------------------------------------


class SocketAnswer:
    """One answer line: `raw` is the exact bytes of `result` (what the server encoded),
    `error` the error object, or neither for a line that is not an answer."""

    __slots__ = ("line", "raw", "error")

    _PREFIX = b'{"result":'

    def __init__(self, line: bytes) -> None:
        self.line = line
        self.raw: Optional[bytes] = None
        self.error: Optional[dict[str, Any]] = None
        if line.startswith(self._PREFIX) and line.endswith(b"}"):
            self.raw = line[len(self._PREFIX):-1]
            return
        try:
            obj = wire_decode(line)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("error"), dict):
            self.error = obj["error"]
        elif isinstance(obj, dict) and "result" in obj:  # an answer with an id first
            self.raw = wire_encode(obj["result"])

    def result(self) -> Any:
        return wire_decode(self.raw) if self.raw is not None else None


class Client:
    """A connection to a server whose settings matched ours (`connect`)."""

    def __init__(self, sock: "_socket.socket", path: str, hello: dict[str, Any]) -> None:
        self.sock = sock
        self.path = path
        self.hello = hello
        self.pid = hello.get("pid")
        self.settings: dict[str, Any] = hello.get("settings") or {}
        self._buf = bytearray()

    def request(self, method: str, params: Any, *, cwd: Optional[str] = None,
                timeout: Optional[float] = None) -> Optional[SocketAnswer]:
        """Send one request and read its answer; None when the connection failed."""
        msg: dict[str, Any] = {"method": method, "params": params}
        if cwd is not None:
            msg["cwd"] = cwd
        try:
            data = wire_encode(msg) + b"\n"
            self.sock.settimeout(timeout)
            self.sock.sendall(data)
            line = self._read_line()
        except (OSError, ValueError, TypeError, UnicodeError):
            return None
        return None if line is None else SocketAnswer(line)

    def _read_line(self) -> Optional[bytes]:
        while True:
            end = self._buf.find(b"\n")
            if end >= 0:
                line = bytes(self._buf[:end])
                del self._buf[: end + 1]
                return line
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                return None
            self._buf += chunk

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def connect(agent_dir: str, inputs: dict[str, Any], *,
            note: Optional[Callable[[str], None]] = None) -> Optional[Client]:
    """A server of `agent_dir` (absolute) whose settings are the ones `inputs`
    (settings_inputs) resolve to, or None: then the caller computes its answer itself.
    `note` hears why a socket was not used."""
    say = note or (lambda _m: None)
    if not available():
        return None
    folder, owned = socket_dir(agent_dir)
    if not os.path.lexists(folder):
        return None
    for path in owned:
        why = private_dir_refusal(path)
        if why is not None:
            say(f"the local socket directory is not used: {why}")
            return None
    try:
        names = sorted(e.name for e in os.scandir(folder) if e.name.endswith(".sock"))
    except OSError:
        return None
    for name in names[:8]:
        path = os.path.join(folder, name)
        if _ours_socket(path) is None:
            say(f"{path} is not a socket of this user: not used")
            continue
        client = _hello(path, inputs, say)
        if client is not None:
            return client
    return None


def _hello(path: str, inputs: dict[str, Any], say: Callable[[str], None]) -> Optional[Client]:
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(HELLO_TIMEOUT_S)
        sock.connect(path)
    except OSError as err:  # ECONNREFUSED: its server is gone (a stale socket)
        sock.close()
        say(f"{path}: no server ({err.strerror or err}): stale, ignored")
        return None
    cred = peer_uid(sock)
    if cred is None or cred[0] != os.geteuid():
        sock.close()
        say(f"{path}: served by another user or an unknown peer: not used")
        return None
    client = Client(sock, path, {})
    answer = client.request(HELLO, inputs, timeout=HELLO_TIMEOUT_S)
    try:
        hello = answer.result() if answer is not None else None
    except ValueError:
        hello = None
    if not isinstance(hello, dict) or hello.get("name") != "fabric-lsp":
        client.close()
        say(f"{path}: no usable hello answer")
        return None
    if hello.get("match") is not True:
        client.close()
        say(f"{path}: a server (pid {hello.get('pid')}) with other settings"
            f"{': ' + str(hello['mismatch']) if hello.get('mismatch') else ''}: not used")
        return None
    client.hello = hello
    client.pid = hello.get("pid")
    client.settings = hello.get("settings") or {}
    return client


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
        engines: "Engines",
        config: Callable[[], "ServerConfig"],
        submit: Callable[[Callable[[], Any]], "Future[Any]"],
        *,
        default_cwd: Callable[[], Optional[str]] = lambda: None,
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
        self._listener: "Optional[socket.socket]" = None
        self._lock_fd: Optional[int] = None
        self._bound: Optional[tuple[str, str, int, int]] = None  # (socket path, lock path, dev, ino)
        self._key: Optional[str] = None
        self._fingerprint = ""
        self._refused_uids: set[int] = set()
        self._said: set[str] = set()
        self._thread: Optional[Any] = None
        self.refusal: Optional[str] = None  # why the last attempt to serve failed, if it did

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
    def path(self) -> Optional[str]:
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
            if self._bound is not None and self._key == key and _same_file(self._bound):
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
        fd = _take_lock(fcntl, lock_path)
        if fd is None:
            return  # another server of these settings serves it: we take over when it is gone
        if os.path.lexists(sock_path):
            if _ours_socket(sock_path) is None:
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
            if _same_file(bound):
                _unlink_quietly(sock_path)
            if fd is not None:
                try:
                    st, here = os.fstat(fd), os.lstat(lock_path)
                    if (st.st_dev, st.st_ino) == (here.st_dev, here.st_ino):
                        _unlink_quietly(lock_path)  # removed while held: a waiter re-opens it
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
                self.log.warning("local socket: refused a connection from uid %s (pid %s): only uid %s may connect",
                                 uid, cred[1] if cred else "?", os.geteuid())
            conn.close()
            return
        with self._lock:
            busy = self._active >= MAX_CONNECTIONS
            if not busy:
                self._active += 1
        if busy:
            _send(conn, _error_line(None, BUSY, f"busy: {MAX_CONNECTIONS} local connections are open; try again"))
            conn.close()
            return
        self._threading.Thread(target=self._serve_connection, args=(conn,), name="fabric-local-conn",
                               daemon=True).start()

    # -- one connection ------------------------------------------------------------------

    def _serve_connection(self, conn: socket.socket) -> None:
        buf = bytearray()
        try:
            conn.settimeout(IDLE_TIMEOUT_S)
            while not self._stop.is_set():
                end = buf.find(b"\n")
                if end < 0:
                    if len(buf) > MAX_REQUEST_BYTES:
                        _send(conn, _error_line(None, INVALID_REQUEST,
                                                f"a request line is longer than {MAX_REQUEST_BYTES} bytes"))
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
                    if answer is None or not _send(conn, answer):
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

    def _answer(self, line: bytes, conn: socket.socket) -> Optional[bytes]:
        import msgspec

        try:
            msg = msgspec.json.decode(line)
        except (msgspec.DecodeError, UnicodeDecodeError) as err:
            return _error_line(None, PARSE_ERROR, f"not JSON: {err}")
        if not isinstance(msg, dict):
            return _error_line(None, INVALID_REQUEST, "a request is a JSON object {method, params?, cwd?, id?}")
        msg_id = msg.get("id")
        unknown = sorted(set(msg) - {"method", "params", "cwd", "id"})
        if unknown:
            return _error_line(msg_id, INVALID_REQUEST,
                               f"unknown key `{unknown[0]}`: a request is a JSON object {{method, params?, cwd?, id?}}")
        method, params, cwd = msg.get("method"), msg.get("params"), msg.get("cwd")
        if not isinstance(method, str):
            return _error_line(msg_id, INVALID_REQUEST, "`method` must be a string")
        if cwd is not None and not (isinstance(cwd, str) and os.path.isabs(cwd)):
            return _error_line(msg_id, INVALID_PARAMS, "`cwd` must be an absolute path")
        if not self.is_open():
            return _error_line(msg_id, NOT_SERVING, "the server is shutting down")
        if method == HELLO:
            return _result_line(msg_id, msgspec.json.encode(self._hello(params)))
        if method not in METHODS:
            return _error_line(msg_id, METHOD_NOT_FOUND,
                               f"method not found: {method!r}; this socket serves {', '.join((HELLO,) + METHODS)}")
        return self._call(msg_id, method, params, cwd if cwd is not None else self.default_cwd(), conn)

    def _hello(self, params: Any) -> dict[str, Any]:
        from fabric_lsp import __version__

        out: dict[str, Any] = {"name": "fabric-lsp", "version": __version__, "pid": os.getpid(),
                               "protocol": PROTOCOL, "methods": list(METHODS), "config": self._fingerprint}
        if isinstance(params, dict) and params:
            match, why, settings = self._same_settings(params)
            out["match"] = match
            if why:
                out["mismatch"] = why
            if settings is not None:
                out["settings"] = settings
        return out

    def _same_settings(self, params: dict[str, Any]) -> tuple[bool, Optional[str], Optional[dict[str, Any]]]:
        """Do the caller's inputs resolve to this server's settings? (load_config in this
        process with the caller's workspace, options and environment)."""
        from pathlib import Path

        from fabric_lsp import __version__
        from fabric_lsp.config import load_config

        if params.get("protocol") != PROTOCOL:
            return False, f"socket protocol {params.get('protocol')!r}, not {PROTOCOL}", None
        if params.get("version") != __version__ or params.get("package") != _package_dir():
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
            theirs = load_config(workspace_root=Path(cwd), init_options=init if isinstance(init, dict) else None,
                                 env={"PI_CODING_AGENT_DIR": agent_env} if agent_env else {})
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

    def _call(self, msg_id: Any, method: str, params: Any, cwd: Optional[str], conn: socket.socket) -> bytes:
        import msgspec

        from fabric_lsp import protocol
        from fabric_lsp.engine.activity import Cancelled, CancelToken
        from fabric_lsp.engines import DomainError

        try:
            p = protocol.decode_params(method, params)
        except protocol.InvalidParams as err:
            return _error_line(msg_id, INVALID_PARAMS, str(err), {"stage": "params", "detail": str(err)})
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
            return _error_line(msg_id, NOT_SERVING, f"the server is shutting down ({err})")
        try:
            body = _wait(future, conn, token)
        except Cancelled:
            return _error_line(msg_id, CANCELLED, f"{method} was cancelled")
        except protocol.InvalidParams as err:
            return _error_line(msg_id, INVALID_PARAMS, str(err), {"stage": "params", "detail": str(err)})
        except ValueError as err:  # engines reject semantically invalid params this way
            return _error_line(msg_id, INVALID_PARAMS, f"{method}: {err}", {"stage": "engine", "detail": str(err)})
        except Exception as err:
            self.log.error("local socket: %s failed", method, exc_info=(type(err), err, err.__traceback__))
            return _error_line(msg_id, INTERNAL_ERROR, f"{method} failed: {type(err).__name__}: {err}")
        return _result_line(msg_id, body)


def _wait(future: "Future[bytes]", conn: socket.socket, token: Any) -> bytes:
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


def _take_lock(fcntl: Any, lock_path: str) -> Optional[int]:
    """An exclusive flock on `lock_path` (created 0600, never through a symlink), checked
    to still be the file at that path; None when another process holds it."""
    for _ in range(3):
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0),
                         0o600)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        try:
            st, here = os.fstat(fd), os.lstat(lock_path)
        except OSError:
            os.close(fd)
            continue  # removed by its last holder meanwhile: open it again
        if (st.st_dev, st.st_ino) == (here.st_dev, here.st_ino) and stat.S_ISREG(st.st_mode) \
                and st.st_uid == os.geteuid():
            return fd
        os.close(fd)
    return None


def _same_file(bound: tuple[str, str, int, int]) -> bool:
    st = _ours_socket(bound[0])
    return st is not None and (st.st_dev, st.st_ino) == (bound[2], bound[3])


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _send(conn: socket.socket, data: bytes) -> bool:
    try:
        conn.sendall(data)
        return True
    except OSError:
        return False


def _id_prefix(msg_id: Any) -> bytes:
    if msg_id is None:
        return b"{"
    import msgspec

    try:
        return b'{"id":' + msgspec.json.encode(msg_id) + b","
    except (TypeError, UnicodeEncodeError):
        return b"{"


def _result_line(msg_id: Any, body: bytes) -> bytes:
    return _id_prefix(msg_id) + b'"result":' + body + b"}\n"


def _error_line(msg_id: Any, code: int, message: str, data: Optional[dict[str, Any]] = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = wire_encode(error)
    return _id_prefix(msg_id) + b'"error":' + body + b"}\n"


# -- the faces that start it ---------------------------------------------------------------


def serve_for_server(ls: Any) -> Optional[LocalSocketServer]:
    """Start the socket for a language server (handlers/lifecycle.initialized): its
    engines, settings and memory pool; stops serving at `shutdown`."""
    if not available():
        return None
    server = LocalSocketServer(
        ls.engines,
        lambda: ls.config,
        ls.memory_executor.submit,
        default_cwd=ls.default_cwd,
        is_open=lambda: not getattr(ls.protocol, "_shutdown", False) and not getattr(ls.protocol, "_shutdown_seen", False),
        announce=ls.log_message,
    )
    try:
        server.start()
    except Exception:
        server.log.exception("local socket: could not start")
        return None
    return server


def run_daemon(cfg: "ServerConfig", *, cwd: str) -> int:
    """`fabric-lsp serve --daemon`: serve only the local socket, in the foreground, until
    SIGTERM or Ctrl-C; index every session in the background so answers stay warm."""
    import signal
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from fabric_lsp.engines import Engines

    if not available():
        why = ("FABRIC_LSP_SOCKET=0 turns the local socket off" if os.environ.get(ENV_SWITCH, "1").strip() == "0"
               else "this platform has no Unix sockets with peer credentials")
        print(f"fabric-lsp serve --daemon: {why}; nothing to serve", file=sys.stderr)
        return 2
    if not cfg.agent_dir.is_dir():
        print(f"fabric-lsp serve --daemon: the Pi agent dir {cfg.agent_dir} does not exist "
              "(set --agent-dir or PI_CODING_AGENT_DIR)", file=sys.stderr)
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
