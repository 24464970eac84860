"""Back-pressure and fairness against the real server: previews queue in their own
bounded pool (handlers/scheduling.py), identical ones are computed once, excess is
answered at once with -32803, cancels of queued previews answer -32800, and a cheap
request is answered promptly while the previews run."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from reliability_kit import RawServer, server_env

ROOT = Path(__file__).resolve().parents[2]
ORBIT = "/home/user/projects/orbit"
BUSY = -32803
CANCELLED = -32800


def big_agent(tmp: Path) -> tuple[Path, str]:
    sys.path.insert(0, str(ROOT / "bench"))
    from corpus import encode_cwd, generate_session

    agent = tmp / "agent"
    folder = agent / "sessions" / encode_cwd(ORBIT)
    folder.mkdir(parents=True)
    path = generate_session(folder, target_bytes=8 << 20, seed="backpressure", cwd=ORBIT)
    return agent, str(path)


def test_previews_are_bounded_shared_cancellable_and_never_hold_a_cheap_request(tmp_path):
    agent, session = big_agent(tmp_path)
    srv = RawServer(agent, stderr_path=tmp_path / "server.log", env=server_env(agent, FABRIC_LSP_BACKGROUND_INDEX="0"))
    try:
        srv.initialize(ORBIT)
        # 40 distinct previews (different budgets): 16 are taken, the rest refused at once
        ids = [srv.request("fabric/compactionPreview", {"session": session, "keepRecentTokens": 1000 + i})
               for i in range(40)]
        # a cheap request behind them
        t0 = time.monotonic()
        status = srv.call("fabric/compact/status", {"session": session}, timeout=30)
        cheap_ms = (time.monotonic() - t0) * 1000
        assert "settled" in status
        print(f"cheap request behind 40 previews: {cheap_ms:.0f} ms")
        assert cheap_ms < 1000, f"a status request waited {cheap_ms:.0f} ms behind the previews"
        # cancel the newest accepted previews while they are queued
        for i in ids[10:16]:
            srv.cancel(i)
        answers = {i: srv.wait(i, timeout=300) for i in ids}
        busy = [i for i in ids if answers[i].get("error", {}).get("code") == BUSY]
        cancelled = [i for i in ids if answers[i].get("error", {}).get("code") == CANCELLED]
        done = [i for i in ids if "result" in answers[i]]
        assert len(busy) == 24 and all("at most 16" in answers[i]["error"]["message"] for i in busy), len(busy)
        assert set(cancelled) == set(ids[10:16]), cancelled
        assert len(done) == 10 and all(answers[i]["result"]["sessionFile"] == session for i in done)
        # identical previews in flight are computed once: the same answer for all
        same = [srv.request("fabric/compactionPreview", {"session": session, "workDoneToken": f"t{i}"}) for i in range(8)]
        results = [srv.wait(i, timeout=300) for i in same]
        assert all("result" in r for r in results), results[0]
        assert all(r["result"] == results[0]["result"] for r in results)
    finally:
        srv.stop()
