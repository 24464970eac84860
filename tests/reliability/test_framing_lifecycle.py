"""Issue 16 point 6, against the real server process over raw bytes: the framing layer
survives bad input (fabric_lsp/framing.py) and the LSP lifecycle is kept
(FabricProtocol._lifecycle_allows). Every request with an id gets an answer; a bad
frame is refused, logged (window/logMessage) and skipped, never leaves the server deaf.
"""

from __future__ import annotations

import json
import time

import pytest
from reliability_kit import ORBIT, RawServer, example_agent, frame, server_env, session_files

from fabric_lsp.framing import MAX_CONTENT_LENGTH, MAX_MESSAGE_DEPTH


def body(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass")


def sessions_request(rid) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "method": "fabric/sessions", "params": {"scope": "global"}}


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    return example_agent(tmp_path_factory.mktemp("framing") / "agent")


@pytest.fixture()
def server(agent, tmp_path):
    srv = RawServer(agent, stderr_path=tmp_path / "server.log")
    srv.initialize(ORBIT)
    yield srv
    if srv.alive():
        srv.kill()


def logged(srv: RawServer, words: str, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for n in list(srv.notifications):
            if n.get("method") == "window/logMessage" and words in n["params"]["message"]:
                return True
        time.sleep(0.05)
    return False


def vm_rss_kib(srv: RawServer) -> int:
    return srv.status().get("VmHWM", 0)


# -- framing -------------------------------------------------------------------------------


@pytest.mark.parametrize("claim", [b"99999999999999999999", b"1000000000000", str(MAX_CONTENT_LENGTH + 1).encode()])
def test_a_content_length_over_the_cap_is_refused_without_allocating(server, claim):
    before = vm_rss_kib(server)
    server.send_bytes(b"Content-Length: " + claim + b"\r\n\r\n" + body(sessions_request("lost")))
    server.send(sessions_request("after-huge"))
    assert "result" in server.wait("after-huge", 30)
    assert logged(server, "over the cap of 268435456 bytes")
    assert server.alive() and vm_rss_kib(server) - before < 64 * 1024  # nothing near the claim allocated


@pytest.mark.parametrize(
    "header",
    [
        b"Content-Length: abc\r\n\r\n",  # not a number
        b"Content-Length: -5\r\n\r\n",
        b"Content-Length: 5\r\n\r\n",  # too small: the rest of the body runs into the next header
        b"Content-Length: 0\r\n\r\n",
        b"Content-Type: application/vscode-jsonrpc\r\n\r\n",  # no Content-Length at all
        b"X" * 20000 + b"\r\n\r\n",  # a header line over the line cap
        b"garbage without a colon\r\n",
    ],
)
def test_a_malformed_header_is_skipped_to_the_next_valid_one(server, header):
    server.send_bytes(header + body(sessions_request("bad")))
    server.send(sessions_request("next"))
    assert "result" in server.wait("next", 30)
    assert logged(server, "skipping to the next Content-Length header") or logged(server, "Content-Length 0")
    assert "bad" not in server.responses or "result" in server.responses["bad"]


def test_header_names_in_any_case_and_bare_newlines_are_read(server):
    for rid, head in (
        ("lower", b"content-length: %d\r\n\r\n"),
        ("upper", b"CONTENT-LENGTH:%d\r\n\r\n"),
        ("lf", b"Content-Length: %d\n\n"),
        ("typed", b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n"),
    ):
        data = body(sessions_request(rid))
        server.send_bytes(head % len(data) + data)
        assert "result" in server.wait(rid, 30), rid


def test_a_too_large_length_still_gets_an_answer(server):
    """The client sends one request with a length 100 bytes too large and waits: the
    body stalls, what came is one whole message, so it is handled."""
    data = body(sessions_request("stalled"))
    server.send_bytes(b"Content-Length: %d\r\n\r\n" % (len(data) + 100) + data)
    assert "result" in server.wait("stalled", 30)
    # (an answer of ours to a server request may arrive meanwhile and fill the body)
    assert logged(server, "Content-Length said") or logged(server, "the body ran into the next header")
    server.send(sessions_request("after-stall"))
    assert "result" in server.wait("after-stall", 30)


def test_a_too_large_length_swallowing_the_next_message_resumes_at_its_header(server):
    first, second = body(sessions_request("swallowed")), frame(sessions_request("inside"))
    server.send_bytes(b"Content-Length: %d\r\n\r\n" % (len(first) + 30) + first + second)
    assert "result" in server.wait("inside", 30)
    assert "result" in server.wait("swallowed", 30)  # what came before the header was whole
    assert logged(server, "the body ran into the next header")


def test_bodies_that_are_not_json_are_skipped(server):
    for junk in (b"\xff\xfe not utf-8", b'{"jsonrpc": "2.0", "id": ', b"[]" * 10):
        server.send_bytes(b"Content-Length: %d\r\n\r\n" % len(junk) + junk)
    server.send(sessions_request("after-junk"))
    assert "result" in server.wait("after-junk", 30)


def test_end_of_input_inside_a_body_exits_with_a_logged_reason(agent, tmp_path):
    srv = RawServer(agent, stderr_path=tmp_path / "server.log")
    srv.initialize(ORBIT, progress=False)  # no server requests whose answers would fill the body
    srv.call("fabric/sessions", {"scope": "global"})
    srv.send_bytes(b'Content-Length: 100\r\n\r\n{"jsonrpc"')
    # the partial body is in the pipe before the end of input, whenever the reader looks
    assert srv.proc.stdin is not None
    srv.proc.stdin.close()
    assert srv.proc.wait(30) == 1  # no shutdown came first
    assert logged(srv, "ended inside a message body", 5)
    srv.kill()


# -- lifecycle -----------------------------------------------------------------------------


def test_requests_before_initialize_get_server_not_initialized(agent, tmp_path):
    srv = RawServer(agent, stderr_path=tmp_path / "server.log")
    try:
        for rid, method in (("pre-1", "fabric/sessions"), ("pre-2", "textDocument/hover"), ("pre-3", "shutdown")):
            srv.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": {}})
            err = srv.wait(rid, 30)["error"]
            assert err["code"] == -32002 and "not initialized" in err["message"], err
        srv.notify("initialized", {})  # dropped
        srv.initialize(ORBIT)
        assert srv.call("fabric/sessions", {"scope": "global"})["sessions"]
    finally:
        srv.stop()


def test_initialize_only_once(server):
    rid = server.request("initialize", {"processId": None, "capabilities": {}, "rootUri": None})
    assert server.wait(rid, 30)["error"]["code"] == -32600
    assert server.call("fabric/sessions", {"scope": "global"})["sessions"]


def test_every_request_after_shutdown_is_answered_invalid_request(server):
    assert server.call("shutdown") is None
    for method in ("fabric/sessions", "shutdown", "initialize", "textDocument/hover", "no/such/method"):
        rid = server.request(method, {})
        err = server.wait(rid, 30)["error"]
        assert err["code"] == -32600 and "after shutdown" in err["message"], (method, err)
    server.notify("exit")
    assert server.proc.wait(30) == 0


# -- params -----------------------------------------------------------------------------------


def test_lone_surrogates_in_typed_fields_are_invalid_params(server, agent):
    path = str(session_files(agent)[0])
    cases = [
        ("fabric/recall", {"query": "x", "queryMode": "\ud800", "scope": "global"}, "queryMode"),
        ("fabric/recall", {"query": "x", "pageSize": "\udfff", "scope": "global"}, "pageSize"),
        ("fabric/recall", {"query": "x", "scope": "global", "branchMode": "\ud83d"}, "branchMode"),
        ("fabric/expand", {"session": path, "indices": ["\ud800"]}, "indices"),
        ("fabric/sessions", {"scope": "\ud800"}, "scope"),
        (
            "workspace/executeCommand",
            {"command": "fabric.recall", "arguments": [{"query": "x", "queryMode": "\ud800"}]},
            None,
        ),
        (
            "textDocument/hover",
            {"textDocument": {"uri": "file:///x\ud800"}, "position": {"line": "\ud800", "character": 0}},
            None,
        ),
    ]
    for i, (method, params, field) in enumerate(cases):
        rid = f"sur-{i}"
        server.send_bytes(frame({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
        err = server.wait(rid, 30).get("error")
        assert err is not None and err["code"] == -32602, (method, params, err)
        if field:
            assert field in err["message"], err
    # a lone surrogate in a free-text field is data, as in JavaScript: answered normally
    assert "result" in server.wait(server.request("fabric/recall", {"query": "\ud800", "scope": "global"}), 30)


@pytest.mark.parametrize("depth", [MAX_MESSAGE_DEPTH + 1, 900, 5000, 100_000])
def test_deeply_nested_params_are_answered(server, depth):
    deep = b"[" * depth + b"1" + b"]" * depth
    data = b'{"jsonrpc":"2.0","id":"deep","method":"fabric/sessions","params":{"scope":"global","x":' + deep + b"}}"
    server.send_bytes(b"Content-Length: %d\r\n\r\n" % len(data) + data)
    err = server.wait("deep", 30)["error"]
    assert err["code"] == -32602 and f"deeper than {MAX_MESSAGE_DEPTH}" in err["message"], err
    data = b'{"jsonrpc":"2.0","id":' + deep + b',"method":"fabric/sessions"}'
    before = len(server.unmatched)
    server.send_bytes(b"Content-Length: %d\r\n\r\n" % len(data) + data)
    server.send(sessions_request("after-deep"))
    assert "result" in server.wait("after-deep", 30)
    assert server.unmatched[before:] and server.unmatched[before]["error"]["code"] == -32600


def test_nesting_up_to_the_cap_is_handled_normally(server):
    nested: object = 1
    for _ in range(MAX_MESSAGE_DEPTH - 6):
        nested = [nested]
    # deep user data where LSP allows any JSON: settings and command arguments
    server.notify("workspace/didChangeConfiguration", {"settings": {"other": nested}})
    rid = server.request(
        "workspace/executeCommand", {"command": "fabric.sessions", "arguments": [{"scope": "global", "x": nested}]}
    )
    err = server.wait(rid, 30).get("error")
    assert err is not None and err["code"] == -32602 and "x" in err["message"], err  # unknown field, not a crash
    assert "result" in server.wait(server.request("fabric/sessions", {"scope": "global"}), 30)


def test_a_request_right_behind_initialized_is_answered_with_the_clients_settings(tmp_path):
    """An editor's first requests come right behind `initialized`, while the server asks
    for the client's settings (`workspace/configuration`, answered a second late here):
    they wait for them and are answered with them (maxSyncSessions 1: the first answer
    says the budget left sessions out), not with the defaults."""
    agent = example_agent(tmp_path / "agent")
    assert len(session_files(agent)) > 1
    srv = RawServer(
        agent,
        env=server_env(agent, FABRIC_LSP_BACKGROUND_INDEX="0"),
        stderr_path=tmp_path / "server.log",
        settings={"memory": {"maxSyncSessions": 1}},
        settings_delay=1.0,
    )
    try:
        srv.initialize(ORBIT)
        started = time.monotonic()
        first = srv.call("fabric/recall", {"query": "test", "scope": "global"}, timeout=60)
        assert time.monotonic() - started >= 0.5  # it waited for the settings
        assert "max_sync_sessions" in first["coverage"]["reasons"], first["coverage"]
        assert first["coverage"]["indexedSessions"] == 1
    finally:
        srv.stop()
