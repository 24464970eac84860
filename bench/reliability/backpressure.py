#!/usr/bin/env python3
"""Back-pressure figures of issue 16, point 7: previews in worker processes (the default)
next to the same server with `FABRIC_LSP_PREVIEW_POOL=0` (previews in the server's own
threads), in the same run, rounds interleaved.

One session of `--mb` MB (bench/corpus.py, as `corpus.py --single`) in a private agent dir;
a real `fabric-lsp` over stdio per configuration and round (tests/reliability/
reliability_kit.RawServer). Per round and configuration:

1. read rate: 16 distinct previews queued (the first has reported progress), then 1,000
   requests the loop answers itself (an unknown method → -32601) sent at once: messages
   answered per second (and how many previews were still queued or running when the last
   was answered, so the figure is taken under load); then a cancel for each of the 16;
2. latency behind the backlog: 50 distinct previews sent at once (16 taken, 34 answered
   -32803), then `fabric/compact/status` and an unknown-method request: each one's
   round trip;
3. cancels: a `$/cancelRequest` for each of the 16 taken previews, right after step 2:
   the fraction answered -32800 (the rest ran to a result; counted with step 1's), and
   the time until all 50 are answered;
4. mixed: `--mixed` requests sent at once (per 25: one preview of 4 budgets, then status,
   `fabric/sessions`, an unknown method, a recall with invalid params, in turn): the time
   until the last is answered, and how many were refused busy.

Asserts nothing; prints one table per step with the load average.

    .venv/bin/python bench/reliability/backpressure.py [--mb 50] [--rounds 5] [--mixed 1000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "reliability"))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))

from reliability_kit import ORBIT, RawServer, server_env  # noqa: E402

CONFIGS = {"threads (FABRIC_LSP_PREVIEW_POOL=0)": {"FABRIC_LSP_PREVIEW_POOL": "0"}, "worker processes": {}}


def make_session(root: Path, mb: int) -> tuple[Path, str]:
    from corpus import encode_cwd, generate_session

    agent = root / "agent"
    folder = agent / "sessions" / encode_cwd(ORBIT)
    folder.mkdir(parents=True, exist_ok=True)
    existing = sorted(folder.glob("*.jsonl"))
    if existing:
        return agent, str(existing[0])
    t0 = time.monotonic()
    path = generate_session(folder, target_bytes=mb << 20, seed="backpressure-bench", cwd=ORBIT)
    print(f"generated {path.stat().st_size / 1e6:.1f} MB in {time.monotonic() - t0:.0f} s: {path}", flush=True)
    return agent, str(path)


def reports(srv: RawServer, token: str) -> int:
    return sum(
        1
        for n in list(srv.notifications)
        if n.get("method") == "$/progress"
        and n["params"].get("token") == token
        and n["params"]["value"].get("kind") == "report"
    )


def wait_until(ready, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError
        time.sleep(0.01)


PROBES = 1000


def unknown(srv: RawServer, n: int) -> list[int]:
    return [srv.request("bench/noSuchMethod", {"n": i}) for i in range(n)]


def read_rate(srv: RawServer, session: str, tag: str) -> dict[str, float]:
    queued = [
        srv.request(
            "fabric/compactionPreview", {"session": session, "keepRecentTokens": 100 + i, "workDoneToken": f"{tag}r{i}"}
        )
        for i in range(16)
    ]
    wait_until(lambda: reports(srv, f"{tag}r0") > 0)
    t0 = time.monotonic()
    ids = unknown(srv, PROBES)
    for i in ids:
        srv.wait(i, timeout=600)
    last = max(srv.answer_times[i] for i in ids)
    running = sum(1 for i in queued if i not in srv.responses)  # still queued or running at the end
    for i in queued:
        srv.cancel(i)
    answers = [srv.wait(i, timeout=1800) for i in queued]
    cancelled = sum(1 for a in answers if a.get("error", {}).get("code") == -32800)
    return {"read_rate": PROBES / (last - t0), "read_busy_until_end": running, "read_cancelled": cancelled}


def backlog(srv: RawServer, session: str, tag: str) -> dict[str, float]:
    ids = [
        srv.request("fabric/compactionPreview", {"session": session, "keepRecentTokens": 1000 + i}) for i in range(50)
    ]
    t0 = time.monotonic()
    status = srv.request("fabric/compact/status", {"session": session})
    srv.wait(status, timeout=600)
    status_ms = (srv.answer_times[status] - t0) * 1000
    t1 = time.monotonic()
    probe = srv.request("bench/noSuchMethod", {})
    srv.wait(probe, timeout=600)
    probe_ms = (srv.answer_times[probe] - t1) * 1000
    # the refusals are answered at once; cancel the others (queued or running)
    taken = [i for i in ids if srv.responses.get(i, {}).get("error", {}).get("code") != -32803]
    t2 = time.monotonic()
    for i in taken:
        srv.cancel(i)
    answers = {i: srv.wait(i, timeout=1800) for i in ids}
    all_done_s = max(srv.answer_times[i] for i in ids) - t2
    busy = sum(1 for i in ids if answers[i].get("error", {}).get("code") == -32803)
    taken = [i for i in ids if answers[i].get("error", {}).get("code") != -32803]
    cancelled = sum(1 for i in taken if answers[i].get("error", {}).get("code") == -32800)
    return {
        "status_ms": status_ms,
        "probe_ms": probe_ms,
        "busy": busy,
        "taken": len(taken),
        "cancelled": cancelled,
        "all_answered_s": all_done_s,
    }


def mixed(srv: RawServer, session: str, count: int) -> dict[str, float]:
    kinds = [
        ("fabric/compact/status", {"session": session}),
        ("fabric/sessions", {}),
        ("bench/noSuchMethod", {}),
        ("fabric/recall", {"limit": "x"}),
    ]
    ids = []
    t0 = time.monotonic()
    for n in range(count):
        if n % 25 == 0:
            ids.append(
                srv.request("fabric/compactionPreview", {"session": session, "keepRecentTokens": 3000 + (n // 25) % 4})
            )
        else:
            method, params = kinds[n % len(kinds)]
            ids.append(srv.request(method, params))
    answers = [srv.wait(i, timeout=3600) for i in ids]
    total = max(srv.answer_times[i] for i in ids) - t0
    busy = sum(1 for a in answers if a.get("error", {}).get("code") == -32803)
    previews = sum(1 for n in range(count) if n % 25 == 0)
    return {"total_s": total, "busy": busy, "previews": previews}


def one(agent: Path, session: str, env: dict[str, str], tag: str, mixed_count: int, log: Path) -> dict[str, float]:
    srv = RawServer(agent, stderr_path=log, env=server_env(agent, FABRIC_LSP_BACKGROUND_INDEX="0", **env))
    try:
        srv.initialize(ORBIT)
        srv.call("fabric/compact/status", {"session": session}, timeout=600)  # engines started: not measured
        out: dict[str, float] = read_rate(srv, session, tag)
        out.update(backlog(srv, session, tag))
        out.update({f"mixed_{k}": v for k, v in mixed(srv, session, mixed_count).items()})
        return out
    finally:
        srv.stop(timeout=60)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mixed", type=int, default=1000)
    ap.add_argument("--dir", help="where the session is made (kept, reused); default a temporary dir")
    args = ap.parse_args(argv)
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="fabric-backpressure-"))
    agent, session = make_session(root, args.mb)
    results: dict[str, list[dict[str, float]]] = {name: [] for name in CONFIGS}
    for r in range(args.rounds):
        order = list(CONFIGS) if r % 2 == 0 else list(reversed(CONFIGS))
        for name in order:
            t0 = time.monotonic()
            got = one(agent, session, CONFIGS[name], f"x{r}{len(results[name])}", args.mixed, root / f"server-{r}.log")
            results[name].append(got)
            print(
                f"round {r + 1} {name}: {got} ({time.monotonic() - t0:.0f} s, load {os.getloadavg()[0]:.1f})",
                flush=True,
            )

    def med(name: str, key: str) -> float:
        return statistics.median(x[key] for x in results[name])

    size = Path(session).stat().st_size / 1e6
    print(f"\n{size:.1f} MB session, {args.rounds} round(s) per configuration, medians; load {os.getloadavg()}")
    print(
        f"{'':40} {'msgs/s read':>12} {'status ms':>10} {'probe ms':>9} {'cancels':>9} {'backlog s':>10} "
        f"{'mixed s':>8} {'busy':>5}"
    )
    for name in CONFIGS:
        done = sum(x["cancelled"] + x["read_cancelled"] for x in results[name])
        cancels = f"{done:.0f}/{sum(x['taken'] + 16 for x in results[name]):.0f}"
        print(
            f"{name:40} {med(name, 'read_rate'):12.0f} {med(name, 'status_ms'):10.0f} {med(name, 'probe_ms'):9.0f} "
            f"{cancels:>9} {med(name, 'all_answered_s'):10.1f} {med(name, 'mixed_total_s'):8.1f} "
            f"{med(name, 'mixed_busy'):5.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
