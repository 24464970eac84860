"""`fabric/compact/request` answers, at request time, why a request cannot be honoured:
on a session where Pi's gate finds nothing to compact the server answers InvalidParams
with the reason and records nothing; with settings under which there is something to
compact, the same request is recorded (real server over stdio)."""

from __future__ import annotations

import json
import os
import time

from fabric_e2e_harness import PROJECT_FOLDER, make_agent_dir, rpc, rpc_error, start, stop

from fabric_lsp import protocol


async def test_a_request_with_nothing_to_compact_is_answered_with_the_reason(tmp_path):
    agent = make_agent_dir(tmp_path)
    path = str(agent / "sessions" / PROJECT_FOLDER / "02-print-continue-errors-retries-truncation.jsonl")
    c = await start(agent, "neovim@v0.11")
    try:
        code, message = await rpc_error(c, protocol.COMPACT_REQUEST, {"session": path, "reason": "too early"})
        assert code == -32602, message
        assert "Nothing to compact (session too small)" in message and "ask again after more turns" in message
        status = await rpc(c, protocol.COMPACT_STATUS, {"session": path})
        assert "pending" not in status and "last" not in status
    finally:
        await stop(c)
    (agent / "settings.json").write_text(json.dumps({"compaction": {"keepRecentTokens": 100}}))
    future = time.time() + 600
    os.utime(path, (future, future))  # never quiet: the request stays pending
    c = await start(agent, "neovim@v0.11")
    try:
        pending = await rpc(c, protocol.COMPACT_REQUEST, {"session": path, "reason": "now"})
        assert pending["pending"]["reason"] == "now"
        assert (await rpc(c, protocol.COMPACT_CANCEL, {"session": path})) == {"cancelled": True}
    finally:
        await stop(c)
