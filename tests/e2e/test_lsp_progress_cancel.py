"""Progress pairing, cancellation and failure isolation against the real server, with the
faulty server wrapper (tests/e2e/faulty_server.py) standing in for slow and failing engine work."""

from __future__ import annotations

import asyncio
import time

import pytest
import pytest_asyncio
from fabric_e2e_harness import FAULTY_SERVER_CMD, SPEC_WARNINGS_AS_ERRORS, rpc, rpc_error, server_env, start, stop
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from fabric_lsp import protocol

pytestmark = [SPEC_WARNINGS_AS_ERRORS, pytest.mark.asyncio(loop_scope="module")]

FAULTS = "fabric/recall=slow,fabric/sessions=fail,fabric/compactionPreview=slow"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(agent_dir, editor):
    c = await start(
        agent_dir, editor, env=server_env(agent_dir, FABRIC_TEST_FAULTS=FAULTS), server_command=FAULTY_SERVER_CMD
    )
    yield c
    await stop(c)


def assert_paired(values):
    kinds = [v.kind for v in values]
    assert kinds[0] == "begin", kinds
    assert kinds[-1] == "end", kinds
    assert kinds.count("begin") == 1 and kinds.count("end") == 1, kinds
    assert set(kinds[1:-1]) <= {"report"}, kinds
    pcts = [v.percentage for v in values if getattr(v, "percentage", None) is not None]
    assert pcts == sorted(pcts) and all(0 <= p <= 100 for p in pcts), pcts


async def _wait_for(pred, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        await asyncio.sleep(0.01)
    return pred()


def _working(client, method, since):
    """The engine work of `method` has started: it sent an activity event after `since`."""
    return lambda: any(a.get("request") == method for a in client.activity[since:])


async def _start_then_cancel(client, method, params, ready=None):
    """Send, wait until the work is running (`ready()`, by default its first activity
    event), cancel; the JSON-RPC error and how long the answer took."""
    since = len(client.activity)
    msg_id = f"cancel-{method}-{time.monotonic_ns()}"
    fut = asyncio.wrap_future(client.protocol.send_request(method, params, msg_id=msg_id))
    engine_method = protocol.RECALL if method == types.WORKSPACE_EXECUTE_COMMAND else method
    assert await _wait_for(ready or _working(client, engine_method, since)), "the request never got going"
    sent = time.monotonic()
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
    with pytest.raises(JsonRpcException) as info:
        await asyncio.wait_for(fut, 5.0)
    return info.value, time.monotonic() - sent


async def test_cancel_with_client_token_pairs_progress(client):
    token = f"client-token-{time.monotonic_ns()}"
    client.progress_reports.setdefault(token, [])
    err, latency = await _start_then_cancel(
        client,
        protocol.RECALL,
        {"query": "x", "workDoneToken": token},
        ready=lambda: any(v.kind == "report" for v in client.progress_reports[token]),
    )
    assert getattr(err, "code", None) == -32800, err
    assert latency < 10.0  # long before the 60 s of injected work would end
    assert await _wait_for(lambda: client.progress_reports[token] and client.progress_reports[token][-1].kind == "end")
    values = client.progress_reports[token]
    assert_paired(values)
    assert any(v.kind == "report" and v.message and "step" in v.message for v in values)
    assert values[-1].message == "cancelled"


def _indexing(values) -> bool:
    """The background indexer's own server-created token ("Indexing sessions")."""
    return bool(values) and values[0].kind == "begin" and values[0].title == "Indexing sessions"


async def test_server_created_token_when_client_sends_none(client):
    before = set(client.progress_reports)
    err, _ = await _start_then_cancel(
        client,
        protocol.COMPACTION_PREVIEW,
        {"session": "x"},
        ready=lambda: any(t not in before and v and not _indexing(v) for t, v in client.progress_reports.items()),
    )
    assert getattr(err, "code", None) == -32800
    assert await _wait_for(
        lambda: any(t not in before and v and v[-1].kind == "end" for t, v in client.progress_reports.items())
    )
    # (the background indexer may open its own "Indexing sessions" token meanwhile)
    # (a token whose begin has not arrived yet is not this request's: its begin came first)
    new = {t: v for t, v in client.progress_reports.items() if t not in before and v and not _indexing(v)}
    assert len(new) == 1, {t: [x.kind for x in v] for t, v in new.items()}
    token, values = next(iter(new.items()))
    assert str(token).startswith("fabric-lsp/")
    assert_paired(values)


async def test_cancel_through_execute_command(client):
    err, latency = await _start_then_cancel(
        client,
        types.WORKSPACE_EXECUTE_COMMAND,
        types.ExecuteCommandParams(command="fabric.recall", arguments=[{"query": "y"}]),
    )
    assert getattr(err, "code", None) == -32800
    assert latency < 10.0  # long before the 60 s of injected work would end


async def test_activity_notifications_name_the_request(client):
    client.activity.clear()
    await _start_then_cancel(client, protocol.RECALL, {"query": "z"}, ready=lambda: bool(client.activity))
    assert client.activity, "no fabric/activity notification"
    # every event names its request (a late one of an earlier test's request may be among them)
    # (the background indexer's events name "fabric/backgroundIndex")
    known = (protocol.RECALL, protocol.COMPACTION_PREVIEW, "fabric/backgroundIndex")
    assert all(a["request"] in known for a in client.activity), client.activity
    mine = [a for a in client.activity if a["request"] == protocol.RECALL]
    assert mine and all(a["type"] == "progress" and a["message"] for a in mine)


async def test_a_slow_request_does_not_block_others(client):
    msg_id = f"slow-{time.monotonic_ns()}"
    since = len(client.activity)
    slow = asyncio.wrap_future(client.protocol.send_request(protocol.RECALL, {"query": "slow"}, msg_id=msg_id))
    assert await _wait_for(_working(client, protocol.RECALL, since)), "the recall never got going"
    # answered through the engine executor while the recall still runs there
    result = await rpc(client, protocol.EXPAND, {"session": "no-such-session", "indices": [0]})
    assert result["error"]["code"] == "session_not_found"
    assert not slow.done()
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
    with pytest.raises(JsonRpcException) as info:
        await asyncio.wait_for(slow, 5.0)
    assert info.value.code == -32800


async def test_busy_memory_engine_does_not_hold_the_other_requests(client, agent_dir):
    ids = [f"busy-{i}-{time.monotonic_ns()}" for i in range(5)]  # more than any single pool
    since = len(client.activity)
    slow = [asyncio.wrap_future(client.protocol.send_request(protocol.RECALL, {"query": "b"}, msg_id=i)) for i in ids]
    assert await _wait_for(_working(client, protocol.RECALL, since)), "the recalls never got going"
    session = str(next((agent_dir / "sessions").glob("*/01-*.jsonl")))
    # answered from the engine pool while every memory thread is taken
    status = await asyncio.wait_for(rpc(client, protocol.COMPACT_STATUS, {"session": session}), 20)
    assert "settled" in status
    assert not any(f.done() for f in slow)
    for i in ids:
        client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=i))
    for f in slow:
        with pytest.raises(JsonRpcException) as info:
            await asyncio.wait_for(f, 15.0)
        assert info.value.code == -32800


async def test_a_failure_leaves_the_server_serving(client):
    token = f"fail-token-{time.monotonic_ns()}"
    client.progress_reports.setdefault(token, [])
    code, message = await rpc_error(client, protocol.SESSIONS, {"workDoneToken": token})
    assert code == -32603
    assert message.startswith("fabric/sessions failed: RuntimeError: injected fault")
    assert await _wait_for(lambda: client.progress_reports[token] and client.progress_reports[token][-1].kind == "end")
    assert_paired(client.progress_reports[token])
    # the next requests are served normally
    code, message = await rpc_error(client, protocol.SESSIONS, {})
    assert code == -32603
    result = await rpc(
        client, types.WORKSPACE_EXECUTE_COMMAND, types.ExecuteCommandParams(command="fabric.reload", arguments=[])
    )
    assert result["trusted"] is False


async def test_no_progress_for_a_client_without_work_done_progress(agent_dir):
    bare = await start(
        agent_dir,
        "bare",
        env=server_env(agent_dir, FABRIC_TEST_FAULTS=FAULTS),
        server_command=FAULTY_SERVER_CMD,
        capabilities=types.ClientCapabilities(),
    )
    try:
        err, latency = await _start_then_cancel(
            bare, protocol.RECALL, {"query": "x"}, ready=lambda: bool(bare.activity)
        )
        assert getattr(err, "code", None) == -32800 and latency < 10.0
        assert bare.progress_reports == {}
        assert bare.activity  # the structured activity still flows
    finally:
        await stop(bare)


async def test_internal_failure_is_logged_with_its_traceback(agent_dir, tmp_path):
    log_file = tmp_path / "server.log"
    c = await start(
        agent_dir,
        "neovim@v0.11",
        env=server_env(agent_dir, FABRIC_TEST_FAULTS=FAULTS),
        server_command=FAULTY_SERVER_CMD,
        server_args=["--log-file", str(log_file), "-vv", "serve"],
    )
    try:
        code, _ = await rpc_error(c, protocol.SESSIONS, {})
        assert code == -32603
        assert await _wait_for(lambda: any(m.type == types.MessageType.Error for m in c.log_messages))
        error = next(m for m in c.log_messages if m.type == types.MessageType.Error)
        assert "fabric/sessions failed" in error.message and "Traceback" in error.message
    finally:
        await stop(c)
    text = log_file.read_text(encoding="utf-8")
    assert "ERROR fabric_lsp.requests: fabric/sessions failed" in text
    assert "RuntimeError: injected fault in fabric/sessions" in text
    assert "Sending data" not in text  # pygls' per-message logging stays silent
    assert "Registered builtin feature" not in text


async def test_late_answer_to_progress_create_after_cancel_is_harmless(agent_dir):
    c = await start(
        agent_dir,
        "neovim@v0.11",
        env=server_env(agent_dir, FABRIC_TEST_FAULTS=FAULTS),
        server_command=FAULTY_SERVER_CMD,
    )
    try:
        c.create_delay = 0.5  # the client answers create only after the request was cancelled
        err, _ = await _start_then_cancel(c, protocol.RECALL, {"query": "late"})
        assert getattr(err, "code", None) == -32800
        # the late create answer arrives now
        assert await _wait_for(lambda: any(str(t).startswith("fabric-lsp/") for t in c.progress_reports))
        c.create_delay = 0.0
        token = f"after-late-{time.monotonic_ns()}"
        c.progress_reports.setdefault(token, [])
        code, _ = await rpc_error(c, protocol.SESSIONS, {"workDoneToken": token})
        assert code == -32603  # the next request is served as usual
        assert not [m for m in c.messages if m.type == types.MessageType.Error], c.messages
        errors = [m.message for m in c.log_messages if m.type == types.MessageType.Error]
        assert all("fabric/sessions failed" in m for m in errors), errors
        # no progress ever started on the token created too late
        late = [t for t in c.progress_reports if str(t).startswith("fabric-lsp/")]
        assert all(not c.progress_reports[t] for t in late)
    finally:
        await stop(c)
