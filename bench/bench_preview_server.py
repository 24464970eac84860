#!/usr/bin/env python3
"""Benchmark: `fabric/compactionPreview` of one ~50 MB session through a real server (issue 36).

For each round a fresh `fabric-lsp` process is started; the first preview is sent right
after `initialized` (the preview worker is started before the server's own imports and
keeps a reserve of object arenas, and the server's other start-up steps wait a quarter
second, so the first preview should cost what the second does), then a second one. Both are timed from request to answer and
compared with a same-run baseline: msgspec decode of every line of the file (median of
rounds interleaved with the server runs). Asserts nothing: not a test.

    python bench/bench_preview_server.py [--size 50000000] [--rounds 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import msgspec
from bench_common import add_session_arguments, describe, session_file

from fabric_lsp.commands.demo import StdioLspClient

REPO = Path(__file__).resolve().parent.parent


def decode_baseline(path: Path) -> float:
    t = time.perf_counter()
    data = path.read_bytes()
    decode = msgspec.json.Decoder().decode
    for line in data.split(b"\n"):
        if line:
            decode(line)
    return time.perf_counter() - t


def server_round(path: Path) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        agent = Path(tmp) / "agent"
        (agent / "sessions").mkdir(parents=True)
        env = dict(os.environ, PI_CODING_AGENT_DIR=str(agent), HOME=tmp, FABRIC_LSP_BACKGROUND_INDEX="0")
        # (run in this checkout: `python -m` puts the working directory first on the path,
        # so a comparison of two checkouts by PYTHONPATH measures the one it names)
        client = StdioLspClient([sys.executable, "-m", "fabric_lsp"], env=env, cwd=str(REPO))
        try:
            client.request("initialize", {"processId": os.getpid(), "rootUri": None, "capabilities": {}})
            client.notify("initialized", {})
            times = []
            for _ in range(2):
                t = time.perf_counter()
                out = client.request("fabric/compactionPreview", {"session": str(path)}, timeout=600)
                times.append(time.perf_counter() - t)
                assert "outcome" in out, out
            return times[0], times[1]
        finally:
            client.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_session_arguments(ap, rounds=3)
    args = ap.parse_args(argv)
    path, tmp = session_file(args)
    describe(path)
    base: list[float] = []
    first: list[float] = []
    second: list[float] = []
    for _ in range(args.rounds):
        base.append(decode_baseline(path))
        a, b = server_round(path)
        first.append(a)
        second.append(b)
    base.append(decode_baseline(path))
    d = statistics.median(base)
    f, s = statistics.median(first), statistics.median(second)
    print(f"decode baseline {d:.3f} s (median of {len(base)})")
    print(
        f"first preview after initialized  {f:.3f} s = {f / d:.2f}x decode   (runs {', '.join(f'{x:.2f}' for x in first)})"
    )
    print(
        f"second preview                   {s:.3f} s = {s / d:.2f}x decode   (runs {', '.join(f'{x:.2f}' for x in second)})"
    )
    print(f"target: <= 3x decode, the first included -> {'MET' if max(f, s) <= 3 * d else 'NOT MET'}")
    print(f"loadavg after {os.getloadavg()}")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
