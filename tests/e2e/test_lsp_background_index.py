"""Whole-history recall against the real server (issue 15): after `initialized` a
background indexer indexes every session with server-created `$/progress` ("Indexing N/M
sessions", begin/end paired); answers meanwhile are never authoritative no-matches; a
cancelled request never stops the indexer; a restarted server resumes from the disk cache.

No sleeps stand in for events: the tests wait for the indexer's end (`$/progress` end and
the `fabric/activity` metrics event `request: "fabric/backgroundIndex"`)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest
from fabric_e2e_harness import SPEC_WARNINGS_AS_ERRORS, rpc, server_env, start, stop
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from fabric_lsp import protocol

pytestmark = [SPEC_WARNINGS_AS_ERRORS, pytest.mark.asyncio(loop_scope="function")]

CWD = "/home/user/proj"
FOLDER = "--home-user-proj--"
N = 60
SETTINGS = {"memory": {"hotSessions": 2}}
INDEX_METHOD = "fabric/backgroundIndex"


def _agent(root: Path) -> Path:
    agent = root / "agent"
    folder = agent / "sessions" / FOLDER
    folder.mkdir(parents=True)
    filler = " ".join(f"word{k}" for k in range(100))
    for i in range(N):
        rows = [
            {"type": "session", "version": 3, "id": f"bg{i:03d}", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": CWD}
        ]
        parent = None
        for j in range(20):
            text = f"session {i} step {j} {filler}" + (" oldest_rare_fact" if i == 0 and j == 7 else "")
            rows.append(
                {
                    "type": "message",
                    "id": f"e{i}x{j}",
                    "parentId": parent,
                    "timestamp": "2025-01-01T00:00:01.000Z",
                    "message": {"role": "user", "content": text},
                }
            )
            parent = f"e{i}x{j}"
        path = folder / f"bg{i:03d}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (1_700_000_000 + i * 10, 1_700_000_000 + i * 10))
    return agent


def _index_ends(client) -> list[dict]:
    return [a for a in client.activity if a.get("request") == INDEX_METHOD and a.get("type") == "metrics"]


async def _wait(pred, timeout: float = 120.0) -> bool:
    """Wait for a notification-driven condition (the client records notifications as they
    arrive; this only yields to the event loop until they have)."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def _index_tokens(client) -> dict:
    return {
        t: v
        for t, v in client.progress_reports.items()
        if v and v[0].kind == "begin" and v[0].title == "Indexing sessions"
    }


def _honest(result: dict) -> None:
    cov = result["coverage"]
    if cov["indexedSessions"] < cov["eligibleSessions"]:
        assert not cov["complete"] and not result["authoritative"]
        assert not result["text"].startswith("No matches"), result["text"]


async def test_background_index_reaches_every_session_and_pairs_progress(tmp_path: Path):
    agent = _agent(tmp_path)
    client = await start(
        agent, "visual-studio-code", configuration=SETTINGS, env=server_env(agent, FABRIC_LSP_BACKGROUND_INDEX="1")
    )
    try:
        # asked once the indexer has begun its pass (a request sent before it starts builds
        # what its budget allows itself), while it may still run: honest either way
        assert await _wait(lambda: any(a.get("request") == INDEX_METHOD for a in client.activity)), (
            "the background indexer never reported activity",
            client.activity[-5:],
        )
        early = await rpc(client, protocol.RECALL, {"query": "oldest_rare_fact", "scope": "global"})
        _honest(early)
        if not early["coverage"]["complete"]:
            assert "indexing_in_progress" in early["coverage"]["reasons"] or early["items"]
        # a request cancelled meanwhile does not stop the indexer
        msg_id = f"bg-cancel-{time.monotonic_ns()}"
        fut = asyncio.wrap_future(
            client.protocol.send_request(protocol.RECALL, {"query": "word1", "scope": "global"}, msg_id=msg_id)
        )
        client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
        try:  # answered before the cancel arrived (then honest), or cancelled: exactly -32800
            _honest(await asyncio.wait_for(fut, 60))
        except JsonRpcException as err:
            assert err.code == -32800, err
        assert await _wait(
            lambda: any(e["indexedSessions"] == e["eligibleSessions"] == N for e in _index_ends(client))
        ), (client.activity[-5:], {t: [v.kind for v in vs] for t, vs in client.progress_reports.items()})
        tokens = _index_tokens(client)
        assert tokens, "no server-created $/progress for the background indexer"
        for values in tokens.values():
            assert await _wait(lambda v=values: v[-1].kind == "end")
            kinds = [v.kind for v in values]
            assert kinds[0] == "begin" and kinds[-1] == "end" and kinds.count("end") == 1
            assert set(kinds[1:-1]) <= {"report"}
            msgs = [v.message for v in values if v.kind == "report" and v.message]
            assert all(m.startswith("Indexing ") and m.endswith(f"/{N} sessions") for m in msgs), msgs
        done = await rpc(client, protocol.RECALL, {"query": "oldest_rare_fact", "scope": "global"})
        assert done["coverage"]["complete"] and done["authoritative"]
        assert done["coverage"]["indexedSessions"] == N
        assert [it["pointer"]["sessionId"] for it in done["items"]] == ["bg000"]
    finally:
        await stop(client)
    # the cold term table's snapshot was written: when the engine had been idle for a while,
    # or at the latest when `shutdown` stopped the indexer
    assert (agent / "fabric-lsp" / "memory-index" / "cold-terms.snapshot").is_file()

    # a restarted server over the warm disk cache: full coverage without building again
    again = await start(
        agent, "visual-studio-code", configuration=SETTINGS, env=server_env(agent, FABRIC_LSP_BACKGROUND_INDEX="1")
    )
    try:
        out = await rpc(again, protocol.RECALL, {"query": "oldest_rare_fact", "scope": "global"})
        _honest(out)
        assert out["coverage"]["complete"], out["coverage"]
        assert [it["pointer"]["sessionId"] for it in out["items"]] == ["bg000"]
        assert not _index_tokens(again)  # nothing was left to build: no indexing pass
    finally:
        await stop(again)


async def test_a_call_that_indexes_reports_its_count_to_the_end(tmp_path: Path):
    """A first recall that builds every session itself (no background indexer) reports
    "Indexing k/N sessions" on its own token: paired, never going backwards, and the last
    count (N/N, 100 %) goes out before the end, however the reports were coalesced."""
    agent = _agent(tmp_path)
    client = await start(
        agent, "visual-studio-code", configuration=SETTINGS, env=server_env(agent, FABRIC_LSP_BACKGROUND_INDEX="0")
    )
    try:
        token = f"first-recall-{time.monotonic_ns()}"
        client.progress_reports.setdefault(token, [])
        result = await rpc(
            client, protocol.RECALL, {"query": "oldest_rare_fact", "scope": "global", "workDoneToken": token}
        )
        assert result["coverage"]["complete"] and result["coverage"]["indexedSessions"] == N
        assert await _wait(lambda: client.progress_reports[token] and client.progress_reports[token][-1].kind == "end")
        values = client.progress_reports[token]
        kinds = [v.kind for v in values]
        assert kinds[0] == "begin" and kinds[-1] == "end" and set(kinds[1:-1]) <= {"report"}, kinds
        counts = [v for v in values if v.kind == "report" and v.message and v.message.startswith("Indexing ")]
        assert counts and counts[-1].message == f"Indexing {N}/{N} sessions" and counts[-1].percentage == 100
        pcts = [v.percentage for v in values if getattr(v, "percentage", None) is not None]
        assert pcts == sorted(pcts), pcts
    finally:
        await stop(client)
