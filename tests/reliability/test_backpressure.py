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
        ids = [
            srv.request("fabric/compactionPreview", {"session": session, "keepRecentTokens": 1000 + i})
            for i in range(40)
        ]
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
        same = [
            srv.request("fabric/compactionPreview", {"session": session, "workDoneToken": f"t{i}"}) for i in range(8)
        ]
        results = [srv.wait(i, timeout=300) for i in same]
        assert all("result" in r for r in results), results[0]
        assert all(r["result"] == results[0]["result"] for r in results)
    finally:
        srv.stop()


def bench_agent(tmp: Path) -> tuple[Path, str]:
    """The 50 MB benchmark session (bench/corpus.py, as bench/reliability/backpressure.py
    makes it)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from corpus import encode_cwd, generate_session

    agent = tmp / "agent"
    folder = agent / "sessions" / encode_cwd(ORBIT)
    folder.mkdir(parents=True)
    path = generate_session(folder, target_bytes=50_000_000, seed="backpressure", cwd=ORBIT)
    return agent, str(path)


CHEAP_MS = 200


def test_cheap_requests_answer_within_200_ms_while_50_previews_of_the_50_mb_session_are_queued(tmp_path):
    agent, session = bench_agent(tmp_path)
    srv = RawServer(agent, stderr_path=tmp_path / "server.log", env=server_env(agent, FABRIC_LSP_BACKGROUND_INDEX="0"))
    try:
        srv.initialize(ORBIT)
        # the cheap requests' engines started before the clock starts (the first status call
        # starts the intents engine; the first sessions call reads the headers)
        srv.call("fabric/compact/status", {"session": session}, timeout=60)
        srv.call("fabric/sessions", {"scope": "global"}, timeout=60)
        ids = [
            srv.request(
                "fabric/compactionPreview", {"session": session, "keepRecentTokens": 1000 + i, "workDoneToken": f"p{i}"}
            )
            for i in range(50)
        ]
        wait_for("a preview of the 50 MB session is running", lambda: progress_reports(srv, "p0") > 0)
        timings: dict[str, list[float]] = {"fabric/compact/status": [], "fabric/sessions": []}
        for _ in range(5):
            for method, params in (
                ("fabric/compact/status", {"session": session}),
                ("fabric/sessions", {"scope": "global"}),
            ):
                t0 = time.monotonic()
                result = srv.call(method, params, timeout=30)
                timings[method].append((time.monotonic() - t0) * 1000)
                assert result is not None
        # the previews were still queued while every cheap answer came
        pending = [i for i in ids if i not in srv.responses]
        assert len(pending) >= 10, "the previews finished before the cheap requests were timed"
        print({m: [round(t) for t in ts] for m, ts in timings.items()})
        for method, ts in timings.items():
            assert max(ts) < CHEAP_MS, f"{method} waited {max(ts):.0f} ms behind 50 queued previews: {ts}"
        # cancel every preview not answered yet: the queued ones answer -32800 (the two that
        # are running stop at their next check, or finish first)
        for i in pending:
            srv.cancel(i)
        answers = {i: srv.wait(i, timeout=300) for i in ids}
        busy = [i for i in ids if answers[i].get("error", {}).get("code") == BUSY]
        cancelled = [i for i in pending if answers[i].get("error", {}).get("code") == CANCELLED]
        assert len(busy) == 34, len(busy)  # at most 16 queued or running: the rest refused at once
        assert all("result" in answers[i] or i in cancelled for i in pending), [answers[i] for i in pending]
        assert len(cancelled) >= len(pending) - 2, (len(cancelled), len(pending))
    finally:
        srv.stop()


# -- previews in worker processes (engine/procpool.py) ------------------------------------


def preview_requests(agent: Path) -> list[tuple[str, dict]]:
    """A compaction preview (with QA) and a branch summary preview of every example session,
    plus one preview the engine refuses (an unknown leaf)."""
    import json

    from reliability_kit import session_files

    out: list[tuple[str, dict]] = []
    for path in session_files(agent):
        ids = [json.loads(line).get("id") for line in path.read_text().splitlines()[1:] if line.strip()]
        out.append(("fabric/compactionPreview", {"session": str(path), "includeQa": True}))
        out.append(("fabric/compactionPreview", {"session": str(path), "keepRecentTokens": 300}))
        out.append(("fabric/branchSummaryPreview", {"session": str(path), "targetId": ids[len(ids) // 3]}))
    out.append(("fabric/compactionPreview", {"session": str(session_files(agent)[0]), "leafId": "no-such-entry"}))
    return out


def answers_bytes(agent: Path, tmp: Path, name: str, **env: str) -> tuple[list[bytes], list[int]]:
    requests = preview_requests(agent)
    srv = RawServer(
        agent, stderr_path=tmp / f"{name}.log", env=server_env(agent, FABRIC_LSP_BACKGROUND_INDEX="0", **env)
    )
    try:
        srv.initialize(ORBIT)
        bodies = []
        for n, (method, params) in enumerate(requests):
            msg_id = srv.request(method, params, msg_id=1000 + n)  # the same ids on both servers
            srv.wait(msg_id, timeout=120)
            bodies.append(srv.raw_bodies[msg_id])
        return bodies, srv.preview_workers()
    finally:
        srv.stop()


def test_a_worker_process_answers_the_same_bytes_as_the_server_itself(tmp_path):
    from reliability_kit import example_agent

    agent = example_agent(tmp_path / "example")
    in_process, none = answers_bytes(agent, tmp_path, "in-process", FABRIC_LSP_PREVIEW_POOL="0")
    pooled, workers = answers_bytes(agent, tmp_path, "pooled")
    assert none == [] and workers, (none, workers)  # the pool really computed them
    assert len(in_process) == len(pooled) == len(preview_requests(agent))
    for n, (a, b) in enumerate(zip(in_process, pooled)):
        assert a == b, (preview_requests(agent)[n], a[:300], b[:300])
    assert b'"result":' in in_process[0] and b'"code": -32602' in in_process[-1]


def progress_reports(srv: RawServer, token: str) -> int:
    return sum(
        1
        for n in list(srv.notifications)
        if n.get("method") == "$/progress"
        and n["params"].get("token") == token
        and n["params"]["value"].get("kind") == "report"
    )


def wait_for(what: str, ready, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(f"never happened: {what}")
        time.sleep(0.02)


def test_cancelled_queued_previews_answer_cancelled_and_never_run(tmp_path):
    agent, session = big_agent(tmp_path)
    srv = RawServer(agent, stderr_path=tmp_path / "server.log", env=server_env(agent, FABRIC_LSP_BACKGROUND_INDEX="0"))
    try:
        srv.initialize(ORBIT)
        ids = [
            srv.request(
                "fabric/compactionPreview", {"session": session, "keepRecentTokens": 2000 + i, "workDoneToken": f"q{i}"}
            )
            for i in range(16)
        ]
        wait_for("the first previews report progress", lambda: progress_reports(srv, "q0") > 0)
        for i in ids[4:]:  # two run (two workers); the 12 from the fifth on wait in the queue
            srv.cancel(i)
        answers = {i: srv.wait(i, timeout=300) for i in ids}
        assert all(answers[i].get("error", {}).get("code") == CANCELLED for i in ids[4:]), answers
        assert all("result" in answers[i] for i in ids[:2]), [answers[i] for i in ids[:2]]
        assert [progress_reports(srv, f"q{n}") for n in range(4, 16)] == [0] * 12  # never started
    finally:
        srv.stop()


def test_the_preview_worker_starts_with_the_server_and_computes_the_first_preview(tmp_path):
    """`fabric-lsp serve` starts its first preview worker before its own imports
    (fabric_lsp/preview_workers.py), so it already runs when `initialize` is answered; the
    first preview is computed in that very process and no second one is started for it.
    With FABRIC_LSP_PREVIEW_POOL=0 there is none."""
    agent, session = big_agent(tmp_path)
    srv = RawServer(agent, stderr_path=tmp_path / "server.log", env=server_env(agent, FABRIC_LSP_BACKGROUND_INDEX="0"))
    try:
        srv.call("initialize", {"processId": None, "capabilities": {}, "rootUri": None}, timeout=60)
        early = srv.preview_workers()
        assert len(early) == 1, early  # before `initialized`: started with the process
        with open(f"/proc/{early[0]}/environ", "rb") as fh:
            assert not any(v.startswith(b"MALLOC_MMAP_THRESHOLD_=") for v in fh.read().split(b"\0"))
        srv.notify("initialized", {})
        first = srv.request("fabric/compactionPreview", {"session": session, "workDoneToken": "p"})
        wait_for("the preview reports progress", lambda: progress_reports(srv, "p") > 0)
        assert srv.preview_workers() == early  # computing in the early worker, no other started
        assert "result" in srv.wait(first, timeout=300)
        assert srv.preview_workers() == early
    finally:
        srv.stop()
    off = RawServer(
        agent,
        stderr_path=tmp_path / "off.log",
        env=server_env(agent, FABRIC_LSP_BACKGROUND_INDEX="0", FABRIC_LSP_PREVIEW_POOL="0"),
    )
    try:
        off.call("initialize", {"processId": None, "capabilities": {}, "rootUri": None}, timeout=60)
        assert off.preview_workers() == []
    finally:
        off.stop()


def test_a_killed_worker_is_replaced_and_the_preview_still_answered(tmp_path):
    import os
    import signal

    agent, session = big_agent(tmp_path)
    srv = RawServer(agent, stderr_path=tmp_path / "server.log", env=server_env(agent, FABRIC_LSP_BACKGROUND_INDEX="0"))
    try:
        srv.initialize(ORBIT)
        # one worker is started with the server (the first preview does not wait for it)
        wait_for("a preview worker started with the server", lambda: len(srv.preview_workers()) == 1)
        warmed = srv.preview_workers()
        first = srv.request("fabric/compactionPreview", {"session": session, "workDoneToken": "k"})
        wait_for("the preview reports progress", lambda: progress_reports(srv, "k") > 0)
        killed = srv.preview_workers()
        assert killed == warmed, (killed, warmed)  # the warm worker computes the first preview
        os.kill(killed[0], signal.SIGKILL)  # mid-computation
        answer = srv.wait(first, timeout=300)
        assert "result" in answer, answer
        again = srv.wait(srv.request("fabric/compactionPreview", {"session": session}, msg_id="again"), timeout=300)
        assert again["result"] == answer["result"]
        replaced = srv.preview_workers()
        assert replaced and killed[0] not in replaced, (killed, replaced)
        # an idle worker that died is replaced on the next preview
        for pid in replaced:
            os.kill(pid, signal.SIGKILL)
        idle_killed = srv.wait(
            srv.request("fabric/compactionPreview", {"session": session, "keepRecentTokens": 500}), timeout=300
        )
        assert "result" in idle_killed, idle_killed
        assert not set(srv.preview_workers()) & set(replaced)
        assert "died during a task" in (tmp_path / "server.log").read_text()
    finally:
        srv.stop()


# -- output to a client that stops reading (fabric_lsp/outbox.py) --------------------------


def unknown_requests(srv: RawServer, first: int, count: int) -> bytes:
    from reliability_kit import frame

    return b"".join(
        frame({"jsonrpc": "2.0", "id": first + n, "method": "fabric/noSuchMethod", "params": {"pad": "x" * 40}})
        for n in range(count)
    )


def test_a_client_that_stops_reading_never_stalls_the_server(tmp_path):
    import threading

    from reliability_kit import example_agent

    agent = example_agent(tmp_path / "example")
    srv = RawServer(agent, stderr_path=tmp_path / "server.log", env=server_env(agent, FABRIC_LSP_BACKGROUND_INDEX="0"))
    try:
        srv.initialize(ORBIT)
        srv.pause_reading()
        # 4,000 requests answered on the loop (-32601), ≈ 500 KB of answers: the stdout pipe
        # fills long before the server has read them all
        first_batch = unknown_requests(srv, 10_000, 4000)
        sent = threading.Event()

        def send() -> None:
            srv.send_bytes(first_batch)
            srv.send_bytes(unknown_requests(srv, 20_000, 4000))  # and as much again after that
            sent.set()

        writer = threading.Thread(target=send, daemon=True)
        writer.start()

        def stuck() -> bool:  # the stdout pipe is full: the server waits in a write
            waiting, capacity = srv.output_waiting()
            return waiting > capacity // 2 and srv.blocked_writing()

        wait_for("the server's stdout pipe is full", stuck)
        # a server that wrote on its loop would now be stuck in that write, reading nothing:
        # ≈ 1 MB of input could never be taken
        assert sent.wait(120), "the server stopped reading while its client did not read"
        assert stuck()
        srv.resume_reading()
        expected = list(range(10_000, 14_000)) + list(range(20_000, 24_000))
        answers = [srv.wait(i, timeout=120) for i in expected]
        assert all(a.get("error", {}).get("code") == -32601 for a in answers)
        got = [k for k in srv.arrival if isinstance(k, int) and k >= 10_000]
        assert got == expected  # every answer, once, in the order the loop made them
        assert srv.call("fabric/compact/status", {"session": str(next((agent / "sessions").rglob("*.jsonl")))})
    finally:
        srv.stop()


def test_past_the_output_bound_input_pauses_and_nothing_is_lost(tmp_path):
    import threading

    from reliability_kit import example_agent

    agent = example_agent(tmp_path / "example")
    log = tmp_path / "server.log"
    srv = RawServer(
        agent,
        stderr_path=log,
        env=server_env(agent, FABRIC_LSP_BACKGROUND_INDEX="0", FABRIC_LSP_MAX_PENDING_OUTPUT="100000"),
    )
    try:
        srv.initialize(ORBIT)
        srv.pause_reading()
        payload = unknown_requests(srv, 10_000, 6000)  # ≈ 750 KB of answers: over the 100 kB bound
        writer = threading.Thread(target=srv.send_bytes, args=(payload,), daemon=True)
        writer.start()
        wait_for("the server pauses its input", lambda: "input is paused" in log.read_text())
        srv.resume_reading()
        writer.join(120)
        assert not writer.is_alive()
        expected = list(range(10_000, 16_000))
        answers = [srv.wait(i, timeout=120) for i in expected]
        assert all(a.get("error", {}).get("code") == -32601 for a in answers)
        assert [k for k in srv.arrival if isinstance(k, int) and k >= 10_000] == expected
        wait_for("the server logs that the client reads again", lambda: "the client reads again" in log.read_text())
    finally:
        srv.stop()
