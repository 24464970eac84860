"""Raw JSON-RPC edge cases, sent byte for byte (no LSP client library in between)."""

from __future__ import annotations

import os
import queue
import sys

import pytest

from fabric_lsp.commands.demo import StdioLspClient


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("raw")
    env = dict(os.environ, PI_CODING_AGENT_DIR=str(tmp), HOME=str(tmp))
    client = StdioLspClient([sys.executable, "-m", "fabric_lsp"], env=env)
    client.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
    client.notify("initialized", {})
    yield client
    assert client.close() == 0


def send_raw(client: StdioLspClient, message: dict, msg_id) -> dict:
    q: queue.Queue = queue.Queue()
    with client._lock:
        client._pending[msg_id] = q
    client._send(message)
    return q.get(timeout=30)


def test_standard_request_with_params_of_the_wrong_shape_is_answered(raw):
    reply = send_raw(raw, {"jsonrpc": "2.0", "id": "h1", "method": "textDocument/hover", "params": {"x": 1}}, "h1")
    assert reply["error"]["code"] == -32602
    assert reply["error"]["message"].startswith("textDocument/hover: params do not match the LSP type")


def test_request_without_jsonrpc_version_is_invalid_request(raw):
    reply = send_raw(raw, {"id": "v1", "method": "fabric/sessions", "params": {}}, "v1")
    assert reply["error"]["code"] == -32600
    reply = send_raw(raw, {"jsonrpc": "1.0", "id": "v2", "method": "fabric/sessions", "params": {}}, "v2")
    assert reply["error"]["code"] == -32600


def test_request_without_params_is_an_empty_object(raw):
    reply = send_raw(raw, {"jsonrpc": "2.0", "id": "p1", "method": "fabric/compact/status"}, "p1")
    assert reply["error"]["code"] == -32602 and "missing required field `session`" in reply["error"]["message"]


def test_bad_notifications_are_ignored_and_the_server_keeps_serving(raw):
    raw.notify("textDocument/didOpen", {"nope": True})
    raw._send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": {"not": "an id"}}})
    raw._send({"no": "jsonrpc at all"})
    result = raw.request("workspace/executeCommand", {"command": "fabric.reload", "arguments": []})
    assert result["trusted"] is False
