"""The local socket's shared half: its constants, who may connect, JSON on the wire and
where the socket lives (fabric_lsp/local_socket.py describes the protocol).

Imported by the client (fabric_lsp/local_socket.py) and the server
(fabric_lsp/local_socket_server.py); it imports neither, and only the standard library's
C parts, so a CLI query answered by a server loads nothing of the engine.
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
    from typing import Any

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


def _peer_cred_kind() -> str | None:
    if sys.platform.startswith("linux") and hasattr(_socket, "SO_PEERCRED"):
        return "linux"
    if sys.platform.startswith(("darwin", "freebsd", "dragonfly")):  # LOCAL_PEERCRED, struct xucred
        return "bsd"
    return None


def peer_uid(sock: socket.socket | _socket.socket) -> tuple[int, int | None] | None:
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


def wire_decode(data: bytes | str) -> Any:
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


def wire_encode(value: Any) -> bytes:
    """Compact ASCII JSON of dicts, lists, strings, ints, floats, booleans and None."""
    out: list[str] = []
    _encode(value, out)
    return "".join(out).encode("ascii")


def _encode(value: Any, out: list[str]) -> None:
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


def private_dir_refusal(path: str) -> str | None:
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


def ours_socket(path: str) -> os.stat_result | None:
    """lstat of `path` when it is a socket owned by this user, else None."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISSOCK(st.st_mode) and st.st_uid == os.geteuid():
        return st
    return None


def package_dir() -> str:
    """The installed package's directory (part of the settings a server and a client compare)."""
    return os.path.dirname(os.path.abspath(__file__))


def take_lock(fcntl: Any, lock_path: str) -> int | None:
    """An exclusive flock on `lock_path` (created 0600, never through a symlink), checked
    to still be the file at that path; None when another process holds it."""
    for _ in range(3):
        try:
            fd = os.open(
                lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o600
            )
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
        if (
            (st.st_dev, st.st_ino) == (here.st_dev, here.st_ino)
            and stat.S_ISREG(st.st_mode)
            and st.st_uid == os.geteuid()
        ):
            return fd
        os.close(fd)
    return None


def same_file(bound: tuple[str, str, int, int]) -> bool:
    st = ours_socket(bound[0])
    return st is not None and (st.st_dev, st.st_ino) == (bound[2], bound[3])


def unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


# -- answer lines (the server's side of the wire) -----------------------------------------


def send_line(conn: socket.socket, data: bytes) -> bool:
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


def result_line(msg_id: Any, body: bytes) -> bytes:
    return _id_prefix(msg_id) + b'"result":' + body + b"}\n"


def error_line(msg_id: Any, code: int, message: str, data: dict[str, Any] | None = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = wire_encode(error)
    return _id_prefix(msg_id) + b'"error":' + body + b"}\n"
