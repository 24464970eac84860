#!/usr/bin/env python3
"""Regex denial of service, measured on the real server (default regexTimeoutMs 250).

For ROUNDS catastrophic queries, prints how long past the timeout the `regex_timeout`
answer came (with a warm worker), what the first regex query after a timeout costs (the
killed worker is restarted then), and the round trips of other requests sent while the regex ran, next to
the same requests' round trips on an idle server (same run).

    .venv/bin/python bench/reliability/regex_dos.py [--rounds 20] [--timeout-ms 250]
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

from reliability_kit import ORBIT, RawServer, example_agent  # noqa: E402
from test_regex_dos import plant_haystack  # noqa: E402

PROBES = {
    "fabric/compact/status": lambda s: {"session": s},
    "fabric/compactionPreview": lambda s: {"session": s},
    "fabric/sessions": lambda s: {"scope": "global"},
    "fabric/recall": lambda s: {"query": "test", "scope": "global"},
}


def ms(xs: list[float]) -> str:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]
    return f"p50 {1000 * statistics.median(xs):7.1f}  p95 {1000 * p95:7.1f}  max {1000 * xs[-1]:7.1f}"


def rtt(srv: RawServer, method: str, params: dict) -> float:
    t = time.monotonic()
    i = srv.request(method, params)
    srv.wait(i, 60)
    return srv.answer_times[i] - t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--timeout-ms", type=int, default=250)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="fabric-regex-bench-"))
    agent = example_agent(tmp / "agent")
    session = str(plant_haystack(agent))
    srv = RawServer(agent, stderr_path=tmp / "server.log", settings={"memory": {"regexTimeoutMs": args.timeout_ms}})
    srv.initialize(ORBIT)
    srv.call("fabric/recall", {"query": "warm", "scope": "global"})
    idle = {m: [] for m in PROBES}
    busy = {m: [] for m in PROBES}
    over: list[float] = []
    after_kill: list[float] = []
    warm: list[float] = []
    for _ in range(args.rounds):
        for m, p in PROBES.items():  # idle baseline, interleaved
            idle[m].append(rtt(srv, m, p(session)))
        # an ordinary regex right after a timeout: pays the worker's restart
        after_kill.append(rtt(srv, "fabric/recall", {"query": "a{48}!", "queryMode": "regex", "scope": "global"}))
        warm.append(rtt(srv, "fabric/recall", {"query": "a{48}!", "queryMode": "regex", "scope": "global"}))
        t0 = time.monotonic()
        rid = srv.request("fabric/recall", {"query": "(a+)+$", "queryMode": "regex", "scope": "global"})
        time.sleep(0.03)
        sent = {}
        for m, p in PROBES.items():
            sent[m] = (time.monotonic(), srv.request(m, p(session)))
        res = srv.wait(rid, 60)
        over.append(srv.answer_times[rid] - t0 - args.timeout_ms / 1000)
        assert res["result"]["coverage"]["error"]["code"] == "regex_timeout", res
        for m, (t, i) in sent.items():
            srv.wait(i, 60)
            busy[m].append(srv.answer_times[i] - t)
    srv.stop()
    print(
        f"regex DoS: {args.rounds} rounds of (a+)+$ over a 49-char 'a…!' entry, regexTimeoutMs {args.timeout_ms}, "
        f"load {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs"
    )
    print(f"  regex_timeout answered after timeout + {ms(over)} ms  (worker warm)")
    print(f"  ordinary regex query, first after a timeout  {ms(after_kill)} ms  (includes the worker restart)")
    print(f"  ordinary regex query, warm worker            {ms(warm)} ms")
    print("  round trips (ms)             idle server                               while the regex runs")
    for m in PROBES:
        print(f"  {m:26s} {ms(idle[m])}   {ms(busy[m])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
