"""Cancelling a real first index build: the answer is -32800 and no partial cache is left
behind (the next recall equals the one of a server that was never cancelled)."""

from __future__ import annotations

import asyncio
import json
import sys
import time

import pytest
from fabric_e2e_harness import REPO, SPEC_WARNINGS_AS_ERRORS, rpc, server_env, start, stop
from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled

from fabric_lsp import protocol

pytestmark = [
    SPEC_WARNINGS_AS_ERRORS,
    pytest.mark.slow,
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from corpus import generate_agent_dir
    finally:
        sys.path.remove(str(REPO / "bench"))
    out = tmp_path_factory.mktemp("corpus") / "agent"
    generate_agent_dir(out, sessions=30, target_bytes=15_000_000, seed=11)
    return out


def _stable(result):
    return json.dumps(result, sort_keys=True)


async def test_cancelled_build_leaves_no_partial_cache(corpus, tmp_path):
    query = {"query": "convert", "scope": "global", "pageSize": 50}
    index = tmp_path / "index-a"
    client = await start(corpus, "neovim@v0.11", init_options={"indexDir": str(index)}, env=server_env(corpus))
    try:
        msg_id = f"build-{time.monotonic_ns()}"
        fut = asyncio.wrap_future(client.protocol.send_request(protocol.RECALL, query, msg_id=msg_id))
        client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
        with pytest.raises(JsonRpcRequestCancelled) as info:
            await asyncio.wait_for(fut, 30)
        assert info.value.code == -32800
        after_cancel = await rpc(client, protocol.RECALL, query)
    finally:
        await stop(client)
    fresh = await start(
        corpus, "neovim@v0.11", init_options={"indexDir": str(tmp_path / "index-b")}, env=server_env(corpus)
    )
    try:
        clean = await rpc(fresh, protocol.RECALL, query)
    finally:
        await stop(fresh)
    assert clean["totalMatches"] > 0
    assert _stable(after_cancel) == _stable(clean)
