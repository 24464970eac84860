"""Concurrency: 50 concurrent recall / compaction preview / expand / sessions requests to
the real server, with cancellations mixed in, give exactly the results of serial runs; a
cancelled request leaves nothing behind (later serial runs and a fresh server reading the
disk cache still give the same results)."""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from reliability_kit import LEDGER, ORBIT, RawServer, example_agent, session_files

CONCURRENT = int(os.environ.get("FABRIC_CONCURRENT", "50"))
SEED = int(os.environ.get("FABRIC_CONCURRENCY_SEED", "9"))


def request_pool(files: list[Path], counts: dict[str, int]) -> list[tuple[str, Any]]:
    pool: list[tuple[str, Any]] = []
    for q in ["test", "fix failing test", "read", "error", "README", "ledger", "orbit", "définition", "zzznothing"]:
        for scope in ("global", "project", "session"):
            pool.append(("fabric/recall", {"query": q, "scope": scope}))
    for q in [r"def \w+", "fix.*test", "[0-9]{3,}"]:
        pool.append(("fabric/recall", {"query": q, "queryMode": "regex", "scope": "global"}))
    pool.append(("fabric/recall", {"scope": "global", "pageSize": 5, "page": 2}))
    pool.append(("fabric/recall", {"query": "test", "scope": "global", "branches": "all"}))
    for f in files:
        n = counts[str(f)]
        pool.append(("fabric/compactionPreview", {"session": str(f)}))
        pool.append(("fabric/compactionPreview", {"session": str(f), "contextWindow": 0, "keepRecentTokens": 500}))
        pool.append(("fabric/expand", {"session": str(f), "entryRange": {"first": 0, "last": min(7, n - 1)}}))
        pool.append(("fabric/expand", {"session": str(f), "indices": [0, n - 1]}))
        pool.append(("fabric/recall", {"query": "test", "scope": f"session:{f}"}))
    pool.append(("fabric/sessions", {"scope": "global"}))
    pool.append(("fabric/sessions", {"scope": "project", "cwd": LEDGER}))
    return pool


def serial(server: RawServer, pool: list[tuple[str, Any]]) -> list[Any]:
    out = []
    for method, params in pool:
        resp = server.wait(server.request(method, params), 120)
        assert "result" in resp, (method, params, resp)
        out.append(resp["result"])
    return out


def run_concurrent(server: RawServer, pool, expected, rng: random.Random, n: int) -> dict[str, int]:
    picks = [rng.randrange(len(pool)) for _ in range(n)]
    cancel = set(rng.sample(range(n), n // 5))
    ids = []
    for k, p in enumerate(picks):
        method, params = pool[p]
        ids.append(server.request(method, params, msg_id=f"c{k}-{time.monotonic_ns()}"))
        if k in cancel:
            time.sleep(rng.choice([0, 0, 0.002, 0.01, 0.03]))
            server.cancel(ids[-1])
    tally = {"answered": 0, "cancelled": 0, "cancel_too_late": 0}
    for k, (p, msg_id) in enumerate(zip(picks, ids)):
        resp = server.wait(msg_id, 300)
        if "error" in resp:
            assert k in cancel and resp["error"]["code"] == -32800, (pool[p], resp)
            tally["cancelled"] += 1
            continue
        assert resp["result"] == expected[p], f"concurrent result differs from serial for {pool[p]}"
        tally["cancel_too_late" if k in cancel else "answered"] += 1
    return tally


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("concurrency")
    agent = example_agent(tmp / "agent")
    files = session_files(agent)
    return tmp, agent, files


def test_concurrent_requests_with_cancellations_equal_serial_results(setup):
    tmp, agent, files = setup
    server = RawServer(agent, stderr_path=tmp / "server1.log")
    try:
        server.initialize(ORBIT)
        sessions = server.call("fabric/sessions", {"scope": "global"})["sessions"]
        counts = {s["sessionFile"]: s["entryCount"] for s in sessions}
        pool = request_pool(files, counts)
        expected = serial(server, pool)
        rng = random.Random(SEED)
        tally = run_concurrent(server, pool, expected, rng, CONCURRENT)
        assert tally["answered"] > 0
        # nothing was left half-done: serial answers are unchanged after the storm
        assert serial(server, pool) == expected
    finally:
        server.stop()
    # a fresh process reading the disk cache the first one wrote gives the same answers
    fresh = RawServer(agent, stderr_path=tmp / "server2.log")
    try:
        fresh.initialize(ORBIT)
        assert serial(fresh, pool) == expected
        tally2 = run_concurrent(fresh, pool, expected, random.Random(SEED + 1), CONCURRENT)
        assert tally2["answered"] > 0
        # cold again (disk cache removed, memory dropped): indexing happens during the storm
        shutil.rmtree(agent / "fabric-lsp" / "memory-index", ignore_errors=True)
        fresh.call("workspace/executeCommand", {"command": "fabric.reload", "arguments": []})
        tally3 = run_concurrent(fresh, pool, expected, random.Random(SEED + 2), CONCURRENT)
        assert serial(fresh, pool) == expected
    finally:
        fresh.stop()
    for rec in (agent / "fabric-lsp" / "memory-index").glob("*.json"):
        json.loads(rec.read_bytes())  # every record on disk is whole
    (tmp / "tally.json").write_text(json.dumps([tally, tally2, tally3]))
    print(f"concurrency-tally: {CONCURRENT} concurrent x 3 rounds, pool of {len(pool)}: {[tally, tally2, tally3]}")
