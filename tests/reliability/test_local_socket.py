"""The CLI answered by a running server over the local socket (fabric_lsp/local_socket.py).

Real processes only: a real `fabric-lsp` server (RawServer) or `fabric-lsp serve --daemon`
for an agent dir, the real CLI (`python -m fabric_lsp …`) as a child process. Each served
answer is compared byte for byte (stdout, exit code, stderr but the "answered by" note)
with the same command computed in its own process (`FABRIC_LSP_SOCKET=0`). Another uid
cannot use the socket, a stale socket is ignored and replaced, and a server whose settings
differ from the CLI's is not used.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reliability_kit import ORBIT, REPO, RawServer, example_agent, server_env, session_files

from tests.support.cli import run_cli

pytestmark = pytest.mark.skipif(
    not hasattr(socket, "AF_UNIX") or not sys.platform.startswith("linux"),
    reason="Unix sockets with SO_PEERCRED (Linux)",
)

SERVING = "fabric-lsp local socket: serving "
ANSWERED = "answered by the fabric-lsp server"


@pytest.fixture
def agent() -> Iterator[Path]:
    """The example agent dir at a short path (so its socket lives in <agentDir>/fabric-lsp/run)."""
    root = Path(tempfile.mkdtemp(prefix="fls-", dir="/tmp"))
    try:
        yield example_agent(root / "agent")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def serving_path(srv: RawServer, *, since: int = 0, timeout: float = 60.0) -> str:
    msg = srv.wait_notification(
        lambda m: m.get("method") == "window/logMessage" and m["params"]["message"].startswith(SERVING),
        since=since,
        timeout=timeout,
    )
    return msg["params"]["message"][len(SERVING) :]


def index_complete(srv: RawServer) -> None:
    srv.wait_notification(
        lambda m: (
            m.get("method") == "fabric/activity"
            and m["params"].get("request") == "fabric/backgroundIndex"
            and m["params"].get("complete") is True
        ),
        timeout=120,
    )


def cli(
    agent: Path,
    *args: str,
    socket_on: bool = True,
    env_extra: dict[str, str] | None = None,
    python_flags: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[bytes]:
    env = server_env(agent, **(env_extra or {}))
    env.pop("FABRIC_LSP_SOCKET", None)
    if not socket_on:
        env["FABRIC_LSP_SOCKET"] = "0"
    return run_cli(*args, env=env, cwd=REPO, text=False, python_flags=python_flags)


def without_note(stderr: bytes) -> bytes:
    return b"".join(line for line in stderr.splitlines(keepends=True) if ANSWERED.encode() not in line)


def assert_served_and_identical(agent: Path, pid: int, *args: str) -> subprocess.CompletedProcess[bytes]:
    served = cli(agent, "-v", *args)
    alone = cli(agent, "-v", *args, socket_on=False)
    note = f"{ANSWERED} (pid {pid}) over ".encode()
    assert note in served.stderr, (args, served.stderr.decode(errors="replace"))
    assert ANSWERED.encode() not in alone.stderr
    assert served.stdout == alone.stdout, args
    assert served.returncode == alone.returncode, (args, served.stderr, alone.stderr)
    assert without_note(served.stderr) == alone.stderr, args
    return served


@contextlib.contextmanager
def server(agent: Path, **kwargs: Any) -> Iterator[tuple[RawServer, str]]:
    log = agent.parent / "server.log"
    init = kwargs.pop("init_options", None)
    with RawServer(agent, stderr_path=log, **kwargs) as srv:
        srv.initialize(ORBIT, init_options=init)
        path = serving_path(srv)
        yield srv, path


def test_the_cli_is_answered_by_the_server_byte_for_byte(agent):
    files = session_files(agent)
    orbit = [f for f in files if "orbit" in f.parent.name]
    first = json.loads(orbit[0].read_text().splitlines()[1])["id"]
    tle = "/home/user/projects/orbit/orbit/tle.py"
    with server(agent) as (srv, path):
        assert path == str(agent / "fabric-lsp" / "run" / Path(path).name) and path.endswith(".sock")
        index_complete(srv)
        pid = srv.proc.pid
        cwd = ("--cwd", ORBIT)
        for args in (
            ("recall", "convert_anomaly", "--scope", "project", "--json", *cwd),
            ("recall", "orbit", "--scope", "global", "--page", "2", "--page-size", "5", "--json", *cwd),
            ("recall", "--scope", "global", "--page-size", "7", "--json", *cwd),  # browse
            ("recall", r"^def [a-z_]+\(", "--mode", "regex", "--scope", "global", "--json", *cwd),
            ("recall", "ledger balance", "--scope", f"session:{files[-1]}", "--branches", "all", "--json", *cwd),
            ("recall", "orbit", "--scope", "project", *cwd),  # the text rendering
            ("recall", "zzzz_no_such_term", "--scope", "session", *cwd),  # "No matches" and the wider-scope hint
            ("sessions", "--scope", "global", "--json", *cwd),
            ("sessions", "--scope", "project", "--page", "2", "--page-size", "2", *cwd),
            ("expand", str(orbit[0]), "--indices", "0,1,2", "--json", *cwd),
            ("expand", f"{orbit[0].stem.split('_')[1]}/{first}", *cwd),
            ("history", tle, "--json", *cwd),
            ("history", tle, "--scope", "project", "--page-size", "1", *cwd),
            ("--log-file", str(agent.parent / "cli.log"), "sessions", "--scope", "global", "--agent-dir", str(agent)),
        ):
            assert_served_and_identical(agent, pid, *args)
        # errors: the same messages and exit codes
        bad = assert_served_and_identical(agent, pid, "recall", "x", "--page-size", "500", *cwd)
        assert bad.returncode == 2 and b"pageSize" in bad.stderr
        missing = assert_served_and_identical(agent, pid, "expand", "01a1ffff", "--indices", "0", *cwd)
        assert missing.returncode == 2 and b"session_not_found" in missing.stderr
        regex = assert_served_and_identical(agent, pid, "recall", "(", "--mode", "regex", "--scope", "global", *cwd)
        assert regex.returncode == 2
        notsession = assert_served_and_identical(agent, pid, "recall", "x", "--scope", f"session:{REPO / 'README.md'}")
        assert notsession.returncode == 2 and b"not a Pi session file" in notsession.stderr
        # the same errors with --json (the quick path)
        for args, code in (
            (("recall", "x", "--page-size", "500"), 2),
            (("recall", "(", "--mode", "regex"), 2),
            (("expand", "01a1ffff", "--indices", "0"), 2),
            (("expand", str(orbit[0]), "--indices", "99999"), 1),
            (("history", tle, "--page-size", "500"), 2),
            (("sessions", "--page", "0"), 2),
            (("recall", "x", "--scope", "session:01a1ffff"), None),
        ):
            out = assert_served_and_identical(agent, pid, *args, "--json", *cwd)
            assert code is None or out.returncode == code, (args, out.returncode, out.stderr)
        # answered by the server, a --json query loads neither the engine, msgspec, the
        # protocol nor argparse/json (the quick path); text output takes the full parser
        for args, quick in (
            (("recall", "orbit", "--scope", "global", "--json"), True),
            (("sessions", "--scope", "global"), False),
        ):
            traced = cli(agent, *args, *cwd, python_flags=("-X", "importtime"))
            assert traced.returncode == 0
            loaded = {line.rsplit("|", 1)[-1].strip() for line in traced.stderr.decode().splitlines() if "|" in line}
            heavy = sorted(
                m
                for m in loaded
                if m.split(".")[0] in ("msgspec", "argparse", "json")
                or m.startswith(
                    ("fabric_lsp.engine", "fabric_lsp.protocol", "fabric_lsp.config", "fabric_lsp.commands")
                )
            )
            assert "fabric_lsp.local_socket" in loaded, args
            if quick:
                assert not heavy and "fabric_lsp.quick_cli" in loaded, heavy
            else:
                assert "argparse" in heavy and not [
                    m
                    for m in heavy
                    if m.startswith(("fabric_lsp.engine.memory", "fabric_lsp.protocol", "fabric_lsp.config"))
                ], heavy
    # the server removed its socket when it stopped
    assert not os.path.lexists(path)


def _connect_as(uid: int, path: str) -> str:
    """Connect to `path` from a forked child running as `uid`; what it saw."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        outcome = "?"
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(20)
            try:
                s.connect(path)
            except OSError as err:
                outcome = f"connect failed: {err.errno}"
            else:
                try:
                    s.sendall(b'{"method":"hello"}\n')
                    data = s.recv(4096)
                except (ConnectionResetError, BrokenPipeError):  # closed on us, unread request and all
                    data = b""
                outcome = "closed" if data == b"" else "answered: " + data.decode(errors="replace")
        except BaseException as err:  # noqa: BLE001 - report anything to the parent
            outcome = f"error: {err!r}"
        os.write(write_end, outcome.encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        outcome = fh.read().decode()
    os.waitpid(pid, 0)
    return outcome


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_another_uid_cannot_use_the_socket(agent):
    import errno
    import pwd

    nobody = pwd.getpwnam("nobody").pw_uid
    with server(agent) as (srv, path):
        # the 0700 directory keeps it from reaching the socket at all
        assert _connect_as(nobody, path) == f"connect failed: {errno.EACCES}"
        # through a hard link in an open directory, with the socket's mode opened too, the
        # server itself refuses the peer (SO_PEERCRED) and answers nothing
        public = Path(tempfile.mkdtemp(prefix="fls-pub-", dir="/tmp"))
        try:
            os.chmod(public, 0o755)
            link = public / "s.sock"
            os.link(path, link)
            os.chmod(link, 0o777)
            since = len(srv.notifications)
            assert _connect_as(nobody, str(link)) == "closed"
            refused = srv.wait_notification(
                lambda m: (
                    m.get("method") == "window/logMessage"
                    and f"refused a connection from uid {nobody}" in m["params"]["message"]
                ),
                since=since,
            )
            assert "only uid 0 may connect" in refused["params"]["message"]
            # root still gets its answers through the same socket
            assert _connect_as(0, str(link)).startswith('answered: {"result":{"name":"fabric-lsp"')
        finally:
            with contextlib.suppress(OSError):
                os.chmod(path, 0o600)
            shutil.rmtree(public, ignore_errors=True)


def test_a_stale_socket_is_ignored_and_replaced(agent):
    args = ("-vv", "recall", "orbit", "--scope", "global", "--json", "--cwd", ORBIT)
    with server(agent) as (srv, path):
        index_complete(srv)
        assert ANSWERED.encode() in cli(agent, *args).stderr
        srv.kill()  # kill -9: the socket file stays behind, nobody listens
    assert os.path.exists(path)
    stale = cli(agent, *args)
    alone = cli(agent, *args, socket_on=False)
    assert stale.returncode == 0 and ANSWERED.encode() not in stale.stderr
    assert b"stale, ignored" in stale.stderr and stale.stdout == alone.stdout
    assert os.path.exists(path)  # the CLI never removes anything
    with server(agent) as (srv, again):
        assert again == path  # the new server took the stale name over
        assert f"{ANSWERED} (pid {srv.proc.pid})".encode() in cli(agent, *args).stderr


def test_a_server_with_other_settings_is_not_used(agent):
    args = ("-vv", "sessions", "--scope", "global", "--json", "--cwd", ORBIT)
    # the editor's settings change the tiers: this server's answers are not the CLI's
    with server(agent, init_options={"memory": {"hotSessions": 2}}) as (srv, path):
        index_complete(srv)
        out = cli(agent, *args)
        alone = cli(agent, *args, socket_on=False)
        assert out.returncode == 0 and ANSWERED.encode() not in out.stderr
        assert b"with other settings" in out.stderr
        assert out.stdout == alone.stdout
        theirs = srv.call("fabric/sessions", {"scope": "global"})
        assert json.loads(out.stdout) != theirs  # using it would have been wrong
        # the same settings given on the command line's side (the agent dir's fabric.json): served
        (agent / "fabric.json").write_text(json.dumps({"memory": {"hotSessions": 2}}))
        both = cli(agent, *args)
        assert f"{ANSWERED} (pid {srv.proc.pid})".encode() in both.stderr
        assert json.loads(both.stdout) == theirs
        # another index dir on the command line: not the server's settings
        other = cli(agent, *args, "--index-dir", str(agent.parent / "other-index"))
        assert ANSWERED.encode() not in other.stderr and b"with other settings" in other.stderr


def test_a_directory_that_is_not_private_is_not_used(agent):
    args = ("-vv", "sessions", "--scope", "global", "--json", "--cwd", ORBIT)
    with server(agent) as (srv, path):
        run_dir = os.path.dirname(path)
        os.chmod(run_dir, 0o755)
        try:
            out = cli(agent, *args)
            assert out.returncode == 0 and ANSWERED.encode() not in out.stderr
            assert b"has mode 0o755; it must be 0700" in out.stderr
        finally:
            os.chmod(run_dir, 0o700)
        assert ANSWERED.encode() in cli(agent, *args).stderr


def _request(path: str, lines: list[Any]) -> list[dict]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(60)
        s.connect(path)
        f = s.makefile("rwb")
        out = []
        for line in lines:
            f.write(line if isinstance(line, bytes) else json.dumps(line).encode() + b"\n")
            f.flush()
            out.append(json.loads(f.readline()))
        return out


def test_the_socket_protocol_for_other_clients(agent):
    with server(agent) as (srv, path):
        index_complete(srv)
        params = {"query": "convert_anomaly", "scope": "project", "pageSize": 3}
        hello, recall, bad, unknown, garbage, strange, after = _request(
            path,
            [
                {"method": "hello", "id": 1},
                {"method": "fabric/recall", "params": params, "id": "r"},  # cwd: the server's workspace
                {"method": "fabric/recall", "params": {"pageSize": 500}},
                {"method": "fabric/compact/request", "params": {"session": "x"}},
                b"{not json\n",
                {"method": "fabric/sessions", "bogus": 1},
                {"method": "fabric/sessions", "params": {"scope": "global"}, "cwd": "/elsewhere"},
            ],
        )
        assert hello["result"]["name"] == "fabric-lsp" and hello["result"]["pid"] == srv.proc.pid and hello["id"] == 1
        assert hello["result"]["methods"] == ["fabric/recall", "fabric/sessions", "fabric/expand", "fabric/fileHistory"]
        assert recall["id"] == "r" and recall["result"] == srv.call("fabric/recall", params)
        lsp_bad = srv.wait(srv.request("fabric/recall", {"pageSize": 500}))["error"]
        assert bad["error"]["code"] == -32602 == lsp_bad["code"] and bad["error"]["message"] == lsp_bad["message"]
        assert unknown["error"]["code"] == -32601 and "fabric/recall" in unknown["error"]["message"]
        assert garbage["error"]["code"] == -32700  # and the connection still answers
        assert strange["error"]["code"] == -32600 and "bogus" in strange["error"]["message"]
        assert after["result"]["totalItems"] == len(session_files(agent))


def test_the_daemon_serves_the_cli_and_cleans_up(agent):
    env = server_env(agent)
    env.pop("FABRIC_LSP_SOCKET", None)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "fabric_lsp", "serve", "--daemon", "--agent-dir", str(agent), "--cwd", ORBIT],
        stderr=subprocess.PIPE,
        env=env,
        cwd=str(REPO),
        text=True,
    )
    try:
        assert daemon.stderr is not None
        line = daemon.stderr.readline()
        assert line.startswith("fabric-lsp serve --daemon: local socket: serving "), line
        path = line.rsplit(" ", 1)[1].strip()
        assert os.path.dirname(path) == str(agent / "fabric-lsp" / "run")
        for args in (
            ("sessions", "--scope", "global", "--json"),
            ("recall", "orbit", "--scope", "project", "--json"),
            ("history", "/home/user/projects/orbit/orbit/tle.py", "--json"),
        ):
            assert_served_and_identical(agent, daemon.pid, *args, "--cwd", ORBIT)
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0
        assert not os.path.lexists(path) and os.listdir(os.path.dirname(path)) == []
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()


def test_a_long_agent_dir_path_puts_the_socket_in_a_private_dir_of_its_own(tmp_path):
    deep = tmp_path / ("d" * 60) / "agent"
    agent = example_agent(deep)
    runtime = Path(tempfile.mkdtemp(prefix="fls-rt-", dir="/tmp"))
    try:
        os.chmod(runtime, 0o700)
        env = server_env(agent, XDG_RUNTIME_DIR=str(runtime))
        with RawServer(agent, stderr_path=tmp_path / "server.log", env=env) as srv:
            srv.initialize(ORBIT)
            path = serving_path(srv)
            assert os.path.dirname(os.path.dirname(path)) == str(runtime / "fabric-lsp") and len(path) <= 100
            out = cli(
                agent,
                "-v",
                "sessions",
                "--scope",
                "global",
                "--json",
                "--cwd",
                ORBIT,
                env_extra={"XDG_RUNTIME_DIR": str(runtime)},
            )
            assert f"{ANSWERED} (pid {srv.proc.pid})".encode() in out.stderr
            assert (
                out.stdout
                == cli(agent, "sessions", "--scope", "global", "--json", "--cwd", ORBIT, socket_on=False).stdout
            )
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


def test_the_daemon_refuses_a_socket_directory_that_is_not_private(agent):
    run_dir = agent / "fabric-lsp" / "run"
    run_dir.mkdir(parents=True)
    os.chmod(run_dir, 0o755)
    env = server_env(agent)
    env.pop("FABRIC_LSP_SOCKET", None)
    out = subprocess.run(
        [sys.executable, "-m", "fabric_lsp", "serve", "--daemon", "--agent-dir", str(agent)],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(REPO),
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert f"not serving: {run_dir} has mode 0o755; it must be 0700" in out.stderr
    assert os.listdir(run_dir) == []  # nothing created in it


def test_the_socket_follows_the_editors_settings(agent):
    args = ("-vv", "sessions", "--scope", "global", "--json", "--cwd", ORBIT)
    with server(agent) as (srv, path):
        assert f"{ANSWERED} (pid {srv.proc.pid})".encode() in cli(agent, *args).stderr
        since = len(srv.notifications)
        srv.settings = {"memory": {"hotSessions": 2}}  # the editor's settings change
        srv.notify("workspace/didChangeConfiguration", {"settings": {}})
        moved = serving_path(srv, since=since)
        assert moved != path and not os.path.lexists(path)  # the old name is gone at once
        out = cli(agent, *args)
        assert ANSWERED.encode() not in out.stderr and b"no server" not in out.stderr
        (agent / "fabric.json").write_text(json.dumps({"memory": {"hotSessions": 2}}))
        assert f"{ANSWERED} (pid {srv.proc.pid}) over {moved}".encode() in cli(agent, *args).stderr


@contextlib.contextmanager
def daemon_of(agent: Path) -> Iterator[subprocess.Popen[str]]:
    """`fabric-lsp serve --daemon` for `agent`, serving once this yields."""
    env = server_env(agent)
    env.pop("FABRIC_LSP_SOCKET", None)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "fabric_lsp", "serve", "--daemon", "--agent-dir", str(agent), "--cwd", ORBIT],
        stderr=subprocess.PIPE,
        env=env,
        cwd=str(REPO),
        text=True,
    )
    try:
        assert daemon.stderr is not None
        line = daemon.stderr.readline()
        assert line.startswith("fabric-lsp serve --daemon: local socket: serving "), line
        yield daemon
    finally:
        with contextlib.suppress(OSError):
            os.kill(daemon.pid, signal.SIGCONT)
        if daemon.poll() is None:
            daemon.kill()
        daemon.wait()


def test_a_server_that_stops_answering_does_not_hang_the_cli(agent):
    """A stopped server (SIGSTOP) still accepts connections (the kernel queues them) but
    answers nothing: the CLI waits $FABRIC_LSP_SOCKET_TIMEOUT, says so in one line,
    computes the answer itself, and does not ask that server again in the same process."""
    timeout = {"FABRIC_LSP_SOCKET_TIMEOUT": "1"}
    quick = ("recall", "orbit", "--scope", "global", "--json", "--cwd", ORBIT)
    text = ("sessions", "--scope", "global", "--cwd", ORBIT)  # the full parser's path
    with daemon_of(agent) as daemon:
        assert f"{ANSWERED} (pid {daemon.pid})".encode() in cli(agent, "-v", *quick).stderr
        os.kill(daemon.pid, signal.SIGSTOP)
        try:
            for args, then in ((quick, "computing the answer here"), (text, "the answer was computed here")):
                out = cli(agent, *args, env_extra=timeout)
                alone = cli(agent, *args, socket_on=False)
                assert out.returncode == alone.returncode == 0, out.stderr
                assert out.stdout == alone.stdout, args
                note = (
                    f"fabric-lsp {args[0]}: the fabric-lsp server (pid {daemon.pid}) did not answer its hello "
                    f"within 1 s; {then}\n"
                ).encode()
                assert out.stderr == alone.stderr + note, out.stderr  # the one line, once
        finally:
            os.kill(daemon.pid, signal.SIGCONT)
        assert f"{ANSWERED} (pid {daemon.pid})".encode() in cli(agent, "-v", *quick, env_extra=timeout).stderr


def test_a_request_the_server_stops_answering_times_out(agent, monkeypatch):
    """The request after a matching hello: the server stops (SIGSTOP) between the two, and
    the client gives up after the timeout instead of waiting forever."""
    import threading

    from fabric_lsp import local_socket

    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("HOME", str(agent.parent))
    monkeypatch.setenv("FABRIC_LSP_SOCKET_TIMEOUT", "1.5")
    monkeypatch.delenv("FABRIC_LSP_SOCKET", raising=False)
    monkeypatch.setattr(local_socket, "_unanswered", {})
    monkeypatch.setattr(local_socket, "_untold", [])
    inputs = local_socket.settings_inputs(cwd=ORBIT, init={})
    with daemon_of(agent) as daemon:
        client = local_socket.connect(str(agent), inputs)
        assert client is not None and client.pid == daemon.pid
        params = {"query": "orbit", "scope": "global"}
        assert client.request("fabric/recall", params, cwd=ORBIT).raw is not None  # it answers
        os.kill(daemon.pid, signal.SIGSTOP)
        outcome: list[Any] = []
        asking = threading.Thread(
            target=lambda: outcome.append(client.request("fabric/recall", params, cwd=ORBIT)), daemon=True
        )
        asking.start()
        asking.join(60)
        client.close()
        assert not asking.is_alive(), "the request never gave up"
        assert outcome == [None] and client.timed_out
        assert local_socket.take_unanswered() == [
            f"the fabric-lsp server (pid {daemon.pid}) did not answer fabric/recall within 1.5 s"
        ]
        notes: list[str] = []
        assert local_socket.connect(str(agent), inputs, note=notes.append) is None  # not asked again
        assert any("did not answer fabric/recall within 1.5 s earlier: not used" in n for n in notes), notes
        os.kill(daemon.pid, signal.SIGCONT)
        monkeypatch.setattr(local_socket, "_unanswered", {})
        again = local_socket.connect(str(agent), inputs)  # it answers again once it runs
        assert again is not None and again.request("fabric/recall", params, cwd=ORBIT).raw is not None
        again.close()
