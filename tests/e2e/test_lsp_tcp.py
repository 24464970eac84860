"""`fabric-lsp serve --tcp HOST:PORT` (debugging transport) answers initialize."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _frame(obj) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _read(sock: socket.socket) -> dict:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[1])
    while len(rest) < length:
        rest += sock.recv(4096)
    return json.loads(rest[:length])


def test_tcp_initialize_and_bad_address(tmp_path):
    port = _free_port()
    env = {"PI_CODING_AGENT_DIR": str(tmp_path), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fabric_lsp", "serve", "--tcp", f"127.0.0.1:{port}"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, (
                    proc.stderr.read() if proc.poll() is not None else "timeout"
                )
                time.sleep(0.05)
        with sock:
            sock.sendall(
                _frame(
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "initialize",
                        "params": {"processId": None, "rootUri": None, "capabilities": {}},
                    }
                )
            )
            reply = _read(sock)
            assert reply["id"] == 1 and reply["result"]["serverInfo"]["name"] == "fabric-lsp"
            sock.sendall(_frame({"jsonrpc": "2.0", "id": 2, "method": "fabric/recall", "params": {"page": 0}}))
            reply = _read(sock)
            while "id" not in reply:  # skip notifications
                reply = _read(sock)
            assert reply["error"]["code"] == -32602
    finally:
        proc.kill()
        proc.wait()
    assert proc.stdout.read() == b""  # stdout stays clean in TCP mode too
    bad = subprocess.run(
        [sys.executable, "-m", "fabric_lsp", "serve", "--tcp", "nonsense"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "HOST:PORT" in bad.stderr
