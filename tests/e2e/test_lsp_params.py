"""Malformed params → -32602 naming the field and the rule, for every method, over the
wire and through workspace/executeCommand; the server keeps serving."""

from __future__ import annotations

import pytest
import pytest_asyncio
from fabric_e2e_harness import SPEC_WARNINGS_AS_ERRORS, rpc, rpc_error, start, stop
from lsprotocol import types

from fabric_lsp import protocol

pytestmark = [SPEC_WARNINGS_AS_ERRORS, pytest.mark.asyncio(loop_scope="module")]

# (method, params, words the error message must contain)
MALFORMED = [
    (protocol.SESSIONS, {"scope": "galaxy"}, ["scope"]),
    (protocol.SESSIONS, {"pageSize": 201}, ["pageSize", "<= 200"]),
    (protocol.SESSIONS, {"page": 0}, ["page", ">= 1"]),
    (protocol.SESSIONS, {"bogus": 1}, ["unknown field", "bogus"]),
    (protocol.RECALL, {"query": 5}, ["query", "expected `str"]),
    (protocol.RECALL, {"queryMode": "glob"}, ["queryMode"]),
    (protocol.RECALL, {"scope": "sessions"}, ["scope", "regex"]),
    (protocol.RECALL, {"pageSize": 101}, ["pageSize", "<= 100"]),
    (protocol.RECALL, {"scope": "project\n"}, ["scope", "line breaks"]),
    (protocol.RECALL, {"page": "2"}, ["page", "expected `int"]),
    (protocol.RECALL, {"branches": "some"}, ["branches"]),
    (protocol.RECALL, {"entryRange": {"first": 5, "last": 2}}, ["entryRange", "first", "last"]),
    (protocol.RECALL, {"entryRange": {"first": -1, "last": 2}}, ["entryRange.first", ">= 0"]),
    (protocol.RECALL, {"entryRange": {"first": 1, "last": 2, "step": 1}}, ["unknown field", "entryRange.step"]),
    (protocol.RECALL, [1, 2], ["params must be an object"]),
    # nested objects that look like JSON-RPC messages stay plain JSON
    (protocol.RECALL, {"query": {"jsonrpc": "2.0", "method": "x"}}, ["query", "got `object`"]),
    (
        protocol.RECALL,
        {"entryRange": {"first": 0, "last": 1, "jsonrpc": "2.0", "id": 1, "result": 2}},
        ["unknown field", "entryRange."],
    ),
    (protocol.EXPAND, {"indices": [1]}, ["missing required field", "session"]),
    (protocol.EXPAND, {"session": "s"}, ["exactly one selector", "got none"]),
    (
        protocol.EXPAND,
        {"session": "s", "indices": [1], "entryIds": ["a"]},
        ["exactly one selector", "indices", "entryIds"],
    ),
    (protocol.EXPAND, {"session": "s", "indices": [-1]}, ["indices[0]", ">= 0"]),
    (protocol.EXPAND, {"session": "", "indices": [1]}, ["session", "length >= 1"]),
    (protocol.COMPACTION_PREVIEW, {"session": "s", "reason": "bored"}, ["reason"]),
    (protocol.COMPACTION_PREVIEW, {"session": "s", "targetContextRatio": 0.9}, ["targetContextRatio", "<= 0.85"]),
    (protocol.COMPACTION_PREVIEW, {"session": "s", "contextWindow": -5}, ["contextWindow", ">= 0"]),
    (protocol.COMPACTION_PREVIEW, {"session": "s", "includeQa": "yes"}, ["includeQa", "expected `bool"]),
    (protocol.COMPACTION_PREVIEW, {"session": "s", "preserve": "x"}, ["preserve", "expected `array"]),
    (protocol.BRANCH_SUMMARY_PREVIEW, {"session": "s"}, ["missing required field", "targetId"]),
    (protocol.BRANCH_SUMMARY_PREVIEW, {"session": "s", "targetId": "t", "extra": True}, ["unknown field", "extra"]),
    (protocol.COMPACT_REQUEST, {"session": "s", "instructions": "x" * 8193}, ["instructions", "length <= 8192"]),
    (protocol.COMPACT_REQUEST, {"session": "s", "preserve": ["p"] * 17}, ["preserve", "length <= 16"]),
    (protocol.COMPACT_REQUEST, {"session": "s", "preserve": ["x" * 2049]}, ["preserve[0]", "length <= 2048"]),
    (protocol.COMPACT_STATUS, {}, ["missing required field", "session"]),
    (protocol.COMPACT_CANCEL, {"session": 3}, ["session", "expected `str"]),
    (protocol.COMPACT_CANCEL, {"session": "s", "force": True}, ["unknown field", "force"]),
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(agent_dir, editor):
    c = await start(agent_dir, editor)
    yield c
    await stop(c)


@pytest.mark.parametrize("method,params,words", MALFORMED, ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(MALFORMED)])
async def test_malformed_params_are_invalid_params(client, method, params, words):
    code, message = await rpc_error(client, method, params)
    assert code == -32602, message
    assert message.startswith(method), message
    for word in words:
        assert word in message, (word, message)


@pytest.mark.parametrize("method,params,words", MALFORMED[::4], ids=[m for m, _, _ in MALFORMED[::4]])
async def test_malformed_params_through_execute_command(client, method, params, words):
    command = next(c for c, m in protocol.COMMANDS.items() if m == method)
    code, message = await rpc_error(
        client, types.WORKSPACE_EXECUTE_COMMAND, types.ExecuteCommandParams(command=command, arguments=[params])
    )
    assert code == -32602, message
    for word in words:
        assert word in message


async def test_command_takes_one_argument(client):
    code, message = await rpc_error(
        client,
        types.WORKSPACE_EXECUTE_COMMAND,
        types.ExecuteCommandParams(command="fabric.recall", arguments=[{}, {}]),
    )
    assert code == -32602 and "one argument" in message


async def test_server_still_serves_after_bad_params(client):
    await rpc_error(client, protocol.RECALL, {"nope": 1})
    result = await rpc(
        client, types.WORKSPACE_EXECUTE_COMMAND, types.ExecuteCommandParams(command="fabric.reload", arguments=[])
    )
    assert result["memory"]["maxSessions"] == 500
