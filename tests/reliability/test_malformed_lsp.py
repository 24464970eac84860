"""Malformed LSP traffic against the real server: random JSON-RPC messages and params.
Every request of ours gets exactly one answer — a result, or a proper error (-32602
naming the field, -32600, -32601, -32800), never -32603 — and afterwards the server is alive and
answers exactly as before. CI sends a few hundred messages; FABRIC_LONG=1 (or
bench/reliability/long_tests.py lsp) generates 14,000 (≥ 10k sent)."""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest
from lsp_fuzz import traffic
from reliability_kit import ORBIT, RawServer, example_agent, long_run, session_files

COUNT = int(os.environ.get("FABRIC_LSP_FUZZ", "14000" if long_run() else "400"))
SEED = int(os.environ.get("FABRIC_LSP_FUZZ_SEED", "1"))
BATCH = 40
PROPER = {-32600, -32602, -32601, -32800}


def reference(srv: RawServer, files: list[str]) -> list:
    return [
        srv.call("fabric/recall", {"query": "test", "scope": "global"}),
        srv.call("fabric/sessions", {"scope": "global"}),
        srv.call("fabric/expand", {"session": files[0], "indices": [0, 1]}),
        srv.call("fabric/compactionPreview", {"session": files[1]}),
    ]


def run_traffic(srv: RawServer, files: list[str], count: int, seed: int) -> Counter:
    tally: Counter[str] = Counter()
    pending: list[tuple[int, str, str]] = []

    def drain() -> None:
        for i, cat, msg_id in pending:
            resp = srv.wait(msg_id, 120)
            if "result" in resp:
                tally[f"{cat}:result"] += 1
            else:
                code = resp["error"]["code"]
                tally[f"{cat}:error{code}"] += 1
                assert code in PROPER, f"message {i} (seed {seed}, {cat}) answered {resp['error']}"
                if code == -32602:
                    assert resp["error"]["message"], resp
        pending.clear()

    for i, cat, data, msg_id in traffic(seed, count, files):
        srv.send_bytes(data)
        tally[cat] += 1
        if msg_id is not None:
            pending.append((i, cat, msg_id))
        if len(pending) >= BATCH:
            drain()
    drain()
    return tally


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lspfuzz")
    agent = example_agent(tmp / "agent")
    srv = RawServer(agent, stderr_path=tmp / "server.log")
    srv.initialize(ORBIT)
    srv.files = [str(p) for p in session_files(agent)]  # type: ignore[attr-defined]
    yield srv
    srv.stop()


def test_random_traffic_gets_proper_answers_and_the_server_stays_correct(server):
    files = server.files
    before = reference(server, files)
    tally = run_traffic(server, files, COUNT, SEED)
    assert server.alive()
    assert reference(server, files) == before
    assert sum(v for k, v in tally.items() if ":" not in k) >= min(COUNT, 300) * 0.8
    print(
        f"lsp-fuzz-tally: {COUNT} generated (seed {SEED}); sent by category and answers: {dict(sorted(tally.items()))}"
    )


def test_invalid_standard_params_are_answered(server):
    """Found here (fixed in be3d661): pygls dropped standard requests whose params do not
    fit the LSP type, so the client waited forever."""
    for i, params in enumerate(({"x": 1}, [1, 2], {"textDocument": 5, "position": {"line": "a"}})):
        rid = f"std-bad-{i}"
        server.send({"jsonrpc": "2.0", "id": rid, "method": "textDocument/hover", "params": params})
        assert server.wait(rid, 30)["error"]["code"] == -32602


def test_request_without_jsonrpc_version_is_answered(server):
    """Found here (fixed in be3d661): a request without "jsonrpc": "2.0" was dropped."""
    server.send({"id": "nover-1", "method": "fabric/sessions", "params": {}})
    assert server.wait("nover-1", 30)["error"]["code"] == -32600


def test_request_with_a_non_string_method_is_invalid_request(server):
    """Found here: pygls answered -32603 (TypeError in its handler lookup)."""
    server.send({"jsonrpc": "2.0", "id": "nullmethod-1", "method": None})
    assert server.wait("nullmethod-1", 5)["error"]["code"] == -32600


def test_request_with_an_object_id_is_invalid_request(server):
    """Found here: pygls answered -32603 (unhashable type); JSON-RPC wants -32600, id null."""
    before = len(server.unmatched)
    server.send({"jsonrpc": "2.0", "id": {"a": 1}, "method": "fabric/sessions", "params": {}})
    deadline = time.monotonic() + 5
    while len(server.unmatched) == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.unmatched[before:] and server.unmatched[before]["error"]["code"] == -32600
