#!/usr/bin/env python3
"""Benchmark: the language server's fixed costs, next to same-run baselines.

* Start-up: process start → `initialize` answered, and → first request after
  `initialized` answered, for `fabric-lsp serve`; baselines `python -c pass`,
  `python -c "import pygls.lsp.server"` and a bare pygls LanguageServer (no handlers).
* Round trip p50/p95 of trivial requests over stdio, one at a time:
  `textDocument/hover` on a plain line (event loop only), `fabric/recall` with malformed
  params (strict decode → -32602), `fabric/compact/status` (decode → executor → intents
  engine → JSON); baseline: a custom request answered by the bare pygls server.

The client is fabric_lsp.commands.demo.StdioLspClient (plain JSON-RPC framing, no pygls).
Rounds are interleaved; medians are printed with the load average. Asserts nothing.

    python bench/bench_server.py [--rounds 5] [--requests 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fabric_lsp.commands.demo import LspError, StdioLspClient  # noqa: E402

BARE_SERVER = textwrap.dedent(
    """
    from pygls.lsp.server import LanguageServer
    server = LanguageServer("bare", "0")

    @server.feature("bench/echo")
    def echo(ls, params):
        return params

    server.start_io()
    """
)

INIT = {
    "processId": None,
    "rootUri": None,
    "capabilities": {"window": {"workDoneProgress": True}, "workspace": {"configuration": True}},
}


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def time_process(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdin=subprocess.DEVNULL)
    return time.perf_counter() - t0


def time_start(
    argv: list[str], env: dict[str, str], first: Callable[[StdioLspClient], Any] | None
) -> tuple[float, float, StdioLspClient]:
    t0 = time.perf_counter()
    client = StdioLspClient(argv, env=env)
    client.request("initialize", INIT)
    t_init = time.perf_counter() - t0
    client.notify("initialized", {})
    if first is not None:
        first(client)
    t_first = time.perf_counter() - t0
    return t_init, t_first, client


def round_trips(client: StdioLspClient, fn: Callable[[StdioLspClient], Any], n: int) -> list[float]:
    for _ in range(20):  # warm up
        fn(client)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn(client)
        out.append(time.perf_counter() - t0)
    return out


def expect_error(client: StdioLspClient, method: str, params: Any) -> None:
    try:
        client.request(method, params)
    except LspError:
        return
    raise AssertionError(f"{method} should have failed")


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=300)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-server-") as tmp:
        tmpdir = Path(tmp)
        agent = tmpdir / "agent"
        session = agent / "sessions" / "--tmp-proj--" / "s.jsonl"
        session.parent.mkdir(parents=True)
        session.write_text(
            '{"type":"session","version":3,"id":"bench-session","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp/proj"}\n'
            '{"type":"model_change","id":"aaaa0001","parentId":null,"timestamp":"2026-01-01T00:00:00.001Z","provider":"p","modelId":"m"}\n'
        )
        bare = tmpdir / "bare_server.py"
        bare.write_text(BARE_SERVER)
        env = dict(os.environ, PI_CODING_AGENT_DIR=str(agent), HOME=str(tmpdir))
        py = sys.executable
        fabric = [py, "-m", "fabric_lsp", "serve"]
        plain_uri = (tmpdir / "notes.txt").as_uri()

        def open_plain(c: StdioLspClient) -> None:
            c.notify(
                "textDocument/didOpen",
                {"textDocument": {"uri": plain_uri, "languageId": "plaintext", "version": 1, "text": "hello\n"}},
            )

        starts: dict[str, list[float]] = {
            k: []
            for k in (
                "python -c pass",
                "import pygls.lsp.server",
                "bare pygls: initialize answered",
                "fabric-lsp: initialize answered",
                "fabric-lsp: first request answered",
            )
        }
        trips: dict[str, list[float]] = {
            k: []
            for k in (
                "bare pygls: bench/echo",
                "fabric-lsp: hover (loop only)",
                "fabric-lsp: recall bad params (-32602)",
                "fabric-lsp: compact/status (executor+engine)",
            )
        }

        for _ in range(args.rounds):
            starts["python -c pass"].append(time_process([py, "-c", "pass"], env))
            starts["import pygls.lsp.server"].append(time_process([py, "-c", "import pygls.lsp.server"], env))

            t_init, _, client = time_start([py, str(bare)], env, None)
            starts["bare pygls: initialize answered"].append(t_init)
            trips["bare pygls: bench/echo"] += round_trips(
                client, lambda c: c.request("bench/echo", {"x": 1}), args.requests
            )
            client.close()

            status = {"session": str(session)}
            t_init, t_first, client = time_start(fabric, env, lambda c: c.request("fabric/compact/status", status))
            starts["fabric-lsp: initialize answered"].append(t_init)
            starts["fabric-lsp: first request answered"].append(t_first)
            open_plain(client)
            hover = {"textDocument": {"uri": plain_uri}, "position": {"line": 0, "character": 1}}
            trips["fabric-lsp: hover (loop only)"] += round_trips(
                client, lambda c: c.request("textDocument/hover", hover), args.requests
            )
            trips["fabric-lsp: recall bad params (-32602)"] += round_trips(
                client, lambda c: expect_error(c, "fabric/recall", {"pageSize": 0}), args.requests
            )
            trips["fabric-lsp: compact/status (executor+engine)"] += round_trips(
                client, lambda c: c.request("fabric/compact/status", status), args.requests
            )
            client.close()

    print(
        f"fabric-lsp server benchmark: {args.rounds} rounds, {args.requests} requests per round; "
        f"loadavg {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs"
    )
    print("\nstart-up (median of rounds)")
    base = statistics.median(starts["python -c pass"])
    for name, values in starts.items():
        med = statistics.median(values)
        print(f"  {name:<40} {ms(med)}   ({med / base:5.1f}x python -c pass)")
    print("\nround trip, one request at a time over stdio")
    base = statistics.median(trips["bare pygls: bench/echo"])
    for name, values in trips.items():
        p50 = statistics.median(values)
        print(f"  {name:<46} p50 {ms(p50)}  p95 {ms(pct(values, 0.95))}   ({p50 / base:4.2f}x bare pygls)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
