"""The local socket: a running server's memory reads for other processes of the same user.

A third face of the engine calls (fabric_lsp/engine_owner.py), beside the LSP server and the
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

Modules: this one is the client (`connect`, `Client`); fabric_lsp/local_socket_wire.py
holds what both sides share (constants, peer credentials, JSON on the wire, where the
socket lives); fabric_lsp/local_socket_server.py is the server (`LocalSocketServer`,
`serve_for_server`, `run_daemon`). Imports point one way: client and server import the
shared module, never each other. The client imports only the standard library, so a CLI
query answered by a server loads nothing of the engine.
"""

from __future__ import annotations

import os

from fabric_lsp.local_socket_wire import (
    ENV_SWITCH as ENV_SWITCH,
)
from fabric_lsp.local_socket_wire import (
    HELLO as HELLO,
)
from fabric_lsp.local_socket_wire import (
    HELLO_TIMEOUT_S as HELLO_TIMEOUT_S,
)
from fabric_lsp.local_socket_wire import (
    METHODS as METHODS,
)
from fabric_lsp.local_socket_wire import (
    PROTOCOL as PROTOCOL,
)
from fabric_lsp.local_socket_wire import (
    available as available,
)
from fabric_lsp.local_socket_wire import (
    ours_socket,
    package_dir,
)
from fabric_lsp.local_socket_wire import (
    peer_uid as peer_uid,
)
from fabric_lsp.local_socket_wire import (
    private_dir_refusal as private_dir_refusal,
)
from fabric_lsp.local_socket_wire import (
    socket_dir as socket_dir,
)
from fabric_lsp.local_socket_wire import (
    wire_decode as wire_decode,
)
from fabric_lsp.local_socket_wire import (
    wire_encode as wire_encode,
)

try:  # the C module: `socket` (enums, selectors) costs a CLI start ~3 ms
    import _socket
except ImportError:  # pragma: no cover - an interpreter without it
    import socket as _socket  # type: ignore[no-redef]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


TIMEOUT_ENV = "FABRIC_LSP_SOCKET_TIMEOUT"
REQUEST_TIMEOUT_S = 20.0  # the wait for an answer (a warm server's takes milliseconds)

# The servers that did not answer in time in this process ({socket path: what happened}):
# never asked again by it, and said once on stderr by the CLI (`take_unanswered`).
_unanswered: dict[str, str] = {}
_untold: list[str] = []


def request_timeout() -> float:
    """How long a client waits for an answer: $FABRIC_LSP_SOCKET_TIMEOUT (seconds) when it
    is a positive number, else REQUEST_TIMEOUT_S. A server that stops answering (stopped,
    hung) then costs the CLI this long once, and it computes the answer itself."""
    value = os.environ.get(TIMEOUT_ENV, "").strip()
    try:
        seconds = float(value) if value else REQUEST_TIMEOUT_S
    except ValueError:
        return REQUEST_TIMEOUT_S
    return seconds if 0 < seconds < float("inf") else REQUEST_TIMEOUT_S


def take_unanswered() -> list[str]:
    """What this process' clients met since the last call: "the fabric-lsp server (pid N)
    did not answer within S s" for each server that timed out (then not asked again)."""
    out = list(_untold)
    _untold.clear()
    return out


def _timed_out(path: str, pid: Any, seconds: float, what: str) -> None:
    who = f"(pid {pid})" if pid is not None else f"at {path}"
    message = f"the fabric-lsp server {who} did not answer {what} within {seconds:g} s"
    if path not in _unanswered:
        _untold.append(message)
    _unanswered[path] = message


def settings_inputs(*, cwd: str, init: dict[str, Any]) -> dict[str, Any]:
    """The hello params that let a server resolve the caller's settings as the caller
    would (config.load_config with its workspace, options and environment)."""
    from fabric_lsp import __version__

    return {
        "protocol": PROTOCOL,
        "version": __version__,
        "package": package_dir(),
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
        self.raw: bytes | None = None
        self.error: dict[str, Any] | None = None
        if line.startswith(self._PREFIX) and line.endswith(b"}"):
            self.raw = line[len(self._PREFIX) : -1]
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

    def __init__(self, sock: _socket.socket, path: str, hello: dict[str, Any]) -> None:
        self.sock = sock
        self.path = path
        self.hello = hello
        self.pid = hello.get("pid")
        self.settings: dict[str, Any] = hello.get("settings") or {}
        self.timed_out = False  # the last request got no answer in time (the server is not asked again)
        self._buf = bytearray()

    def request(
        self, method: str, params: Any, *, cwd: str | None = None, timeout: float | None = None
    ) -> SocketAnswer | None:
        """Send one request and read its answer; None when the connection failed or no
        answer came within `timeout` seconds (default `request_timeout()`: then
        `timed_out` is set, and close the client: a late answer is never read)."""
        msg: dict[str, Any] = {"method": method, "params": params}
        if cwd is not None:
            msg["cwd"] = cwd
        seconds = request_timeout() if timeout is None else timeout
        try:
            data = wire_encode(msg) + b"\n"
            self.sock.settimeout(seconds)
            self.sock.sendall(data)
            line = self._read_line()
        except TimeoutError:
            self.timed_out = True
            _timed_out(self.path, self.pid, seconds, "its hello" if method == HELLO else method)
            return None
        except (OSError, ValueError, TypeError, UnicodeError):
            return None
        return None if line is None else SocketAnswer(line)

    def _read_line(self) -> bytes | None:
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


def connect(agent_dir: str, inputs: dict[str, Any], *, note: Callable[[str], None] | None = None) -> Client | None:
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
        if path in _unanswered:
            say(f"{path}: {_unanswered[path]} earlier: not used")
            continue
        if ours_socket(path) is None:
            say(f"{path} is not a socket of this user: not used")
            continue
        client = _hello(path, inputs, say)
        if client is not None:
            return client
    return None


def _hello(path: str, inputs: dict[str, Any], say: Callable[[str], None]) -> Client | None:
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
    client = Client(sock, path, {"pid": cred[1]})
    answer = client.request(HELLO, inputs, timeout=min(HELLO_TIMEOUT_S, request_timeout()))
    try:
        hello = answer.result() if answer is not None else None
    except ValueError:
        hello = None
    if not isinstance(hello, dict) or hello.get("name") != "fabric-lsp":
        client.close()
        say(f"{path}: {_unanswered[path] if client.timed_out else 'no usable hello answer'}: not used")
        return None
    if hello.get("match") is not True:
        client.close()
        say(
            f"{path}: a server (pid {hello.get('pid')}) with other settings"
            f"{': ' + str(hello['mismatch']) if hello.get('mismatch') else ''}: not used"
        )
        return None
    client.hello = hello
    client.pid = hello.get("pid")
    client.settings = hello.get("settings") or {}
    return client
