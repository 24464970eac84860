#!/usr/bin/env python3
"""Huge input through the real server: a big session (default 1 GiB) and a session with
one huge line (default 200 MiB), generated into a temporary directory (removed after).

Each operation runs on a fresh server process with an empty cache, so its peak RSS
(VmHWM: the server's plus its live children's, where previews are computed) and time are
its own, cold; an idle server's peak is the baseline. Also prints the streaming reader's throughput and
traced peak memory on the big file.

    .venv/bin/python bench/reliability/huge_input.py [--big-mib 1024] [--line-mib 200] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "reliability"))

from huge import big_session, long_line_session  # noqa: E402
from reliability_kit import ORBIT, RawServer, RpcError, example_agent, session_files  # noqa: E402

from fabric_lsp.engine.session import iter_session  # noqa: E402
from fabric_lsp.engine.session.discovery import encode_cwd  # noqa: E402

MiB = 1 << 20


def summary(method: str, result) -> str:
    if isinstance(result, dict):
        if "coverage" in result:
            cov = result["coverage"]
            extra = (
                f" matches={result.get('totalMatches')}"
                if "totalMatches" in result
                else f" sessions={result.get('totalItems')}"
            )
            return f"complete={cov['complete']} reasons={cov['reasons']}{extra}"
        if "error" in result:
            return f"error={result['error']['code']}"
        if "expanded" in result:
            return (
                f"expanded {len(result['expanded'])} entries, {sum(len(e['text']) for e in result['expanded'])} chars"
            )
        if "outcome" in result:
            return (
                f"outcome={result['outcome']} tokensBefore={result.get('tokensBefore')} "
                f"reason={result.get('reason', '')[:50]!r} warnings={result.get('warnings', [])}"
            )
    return str(result)[:80]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--big-mib", type=int, default=1024)
    ap.add_argument("--line-mib", type=int, default=200)
    ap.add_argument("--dir", default=os.environ.get("FABRIC_HUGE_DIR", "/tmp"))
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="fabric-huge-bench-", dir=args.dir))
    try:
        agent = example_agent(root / "agent")
        folder = agent / "sessions" / encode_cwd(ORBIT)
        src = next(p for p in session_files(agent) if p.stat().st_size > 100_000)
        t = time.monotonic()
        big = big_session(
            src, folder / "2026-11-01T00-00-00-000Z_01b0a6e1-0000-7000-8000-00000000100b.jsonl", args.big_mib * MiB
        )
        line = long_line_session(
            folder / "2026-11-02T09-00-00-000Z_01b0a6e1-0000-7000-8000-00000000200a.jsonl", args.line_mib * MiB, ORBIT
        )
        gen = time.monotonic() - t
        print(
            f"generated {big.stat().st_size / MiB:.0f} MiB session and a {line.stat().st_size / MiB:.0f} MiB "
            f"single-line session in {gen:.1f} s under {root}"
        )

        # the streaming reader on the big file
        tracemalloc.start()
        t = time.monotonic()
        n = 0
        with open(big, "rb") as fp:
            for _ in iter_session(fp):
                n += 1
        dt = time.monotonic() - t
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(
            f"iter_session over {big.stat().st_size / MiB:.0f} MiB: {n} items, {dt:.1f} s "
            f"({big.stat().st_size / MiB / dt:.0f} MiB/s), traced peak {peak / MiB:.1f} MiB"
        )

        ops = [
            ("idle server (initialize only)", None, None),
            ("fabric/sessions global", "fabric/sessions", {"scope": "global"}),
            ("recall global 'test'", "fabric/recall", {"query": "test", "scope": "global"}),
            ("recall session:<big>", "fabric/recall", {"query": "test", "scope": f"session:{big}"}),
            ("expand <big> indices [0]", "fabric/expand", {"session": str(big), "indices": [0]}),
            ("compactionPreview <big>", "fabric/compactionPreview", {"session": str(big), "keepRecentTokens": 2000}),
            ("recall session:<line>", "fabric/recall", {"query": "BUILDLOGEND compiling", "scope": f"session:{line}"}),
            ("expand <line> the huge entry", "fabric/expand", {"session": str(line), "indices": [2]}),
            ("compactionPreview <line>", "fabric/compactionPreview", {"session": str(line)}),
        ]
        print(f"\n{'operation':34s} {'wall s':>8s} {'peak RSS MiB':>13s}  outcome")
        for label, method, params in ops:
            shutil.rmtree(agent / "fabric-lsp", ignore_errors=True)  # every operation starts cold
            srv = RawServer(agent, stderr_path=root / "server.log")
            try:
                srv.initialize(ORBIT)
                t = time.monotonic()
                if method is None:
                    out = "-"
                else:
                    try:
                        out = summary(method, srv.call(method, params, timeout=3600))
                    except RpcError as err:
                        out = f"RPC error {err}"
                dt = time.monotonic() - t
                vm = srv.status()  # previews run in worker children: count them too
                rss = (vm.get("VmHWM", 0) + vm["ChildrenVmHWM"]) / 1024
                alive = srv.alive()
            finally:
                srv.stop(timeout=60)
            print(f"{label:34s} {dt:8.1f} {rss:13.0f}  {out}{'' if alive else '  (SERVER DIED)'}", flush=True)
        print(f"\nload {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
