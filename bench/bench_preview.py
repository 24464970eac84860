#!/usr/bin/env python3
"""Benchmark: deterministic compaction preview of one large Pi session.

Generates (or reuses) a deterministic ~50 MB session with bench/corpus.py, then times in
interleaved rounds, in the same process and run:

* baseline: ``msgspec.json.Decoder().decode`` of every line of the file (one whole-file
  read, decode only, results dropped),
* ``preview_compaction(path)`` with the protocol defaults (window 200000, Pi's reserve
  16384 / keepRecent 20000, ratio 0.65),
* ``preview_compaction(path, context_window=0)`` (legacy cut, no model metadata).

Wall and CPU medians are printed with the preview/decode ratio (target: <= 4x), then the
peak RSS (VmHWM) of fresh interpreters: one that only imports the engine (baseline) and one
that runs a preview, against the file size (target: peak <= 2x file size). The reference
engine takes 2.2-2.8 s and ~350 MB for a 50 MB session on the same machine class
(shared/guides/performance.md). Asserts nothing: not a test.

    python bench/bench_preview.py [--size 50000000] [--rounds 5] [--seed 50] [--file PATH] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))


from bench_common import add_session_arguments, describe, msgspec_decode_lines, peak_rss_kb, session_file  # noqa: E402

from fabric_lsp.engine.compaction.api import preview_compaction  # noqa: E402


def preview_default(path: str) -> str:
    return preview_compaction(path)["outcome"]


def preview_legacy(path: str) -> str:
    return preview_compaction(path, context_window=0)["outcome"]


METHODS = [
    ("msgspec decode per line (baseline)", msgspec_decode_lines),
    ("preview_compaction (window 200000)", preview_default),
    ("preview_compaction (no model: legacy cut)", preview_legacy),
]

RSS_SCRIPTS = {
    "python + engine import (baseline)": "import fabric_lsp.engine.compaction.api as a",
    "preview_compaction(path)": "import fabric_lsp.engine.compaction.api as a; r = a.preview_compaction(P)",
    "preview_compaction(bytes) (caller holds the bytes)": (
        "import fabric_lsp.engine.compaction.api as a; d = open(P, 'rb').read(); "
        "r = a.preview_compaction(d, session_path=P)"
    ),
    "msgspec decode of every line, kept in a list": (
        "import msgspec; d = open(P, 'rb').read(); x = [msgspec.json.decode(l) for l in d.split(b'\\n') if l]"
    ),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_session_arguments(ap, rounds=5)
    args = ap.parse_args(argv)

    path, tmp = session_file(args)
    describe(path)
    size = path.stat().st_size

    first = preview_compaction(str(path), include_qa=True)
    summary = first.get("summary", "")
    print(
        f"preview: outcome={first['outcome']} reason={first.get('reason')!r} tokensBefore={first['tokensBefore']} "
        f"firstKeptEntryId={first.get('firstKeptEntryId')!r} summary={len(summary.encode())} bytes "
        f"qa={first.get('qa', {}).get('score')}"
    )

    wall: dict[str, list[float]] = {name: [] for name, _ in METHODS}
    cpu: dict[str, list[float]] = {name: [] for name, _ in METHODS}
    for _ in range(args.rounds):
        for name, fn in METHODS:  # interleaved: each round runs every method once
            w0, c0 = time.perf_counter(), time.process_time()
            fn(str(path))
            cpu[name].append(time.process_time() - c0)
            wall[name].append(time.perf_counter() - w0)
    base = METHODS[0][0]
    bw, bc = statistics.median(wall[base]), statistics.median(cpu[base])
    mw, mc = min(wall[base]), min(cpu[base])
    print(
        f"\n{'method':44} {'wall s':>8} {'cpu s':>8} {'wall/dec':>9} {'cpu/dec':>8} | {'min wall':>8} {'min cpu':>8} {'ratio':>6} {'ratio':>6}"
    )
    for name, _ in METHODS:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        w0, c0 = min(wall[name]), min(cpu[name])
        print(
            f"{name:44} {w:8.3f} {c:8.3f} {w / bw:8.2f}x {c / bc:7.2f}x | {w0:8.3f} {c0:8.3f} {w0 / mw:5.2f}x {c0 / mc:5.2f}x"
        )
    print(
        f"(medians, then minima, of {args.rounds} interleaved rounds; cpu includes the hashing thread; "
        f"on a loaded machine trust the minima and the cpu ratios)"
    )
    pw = statistics.median(wall[METHODS[1][0]])
    pmin = min(wall[METHODS[1][0]])
    print(
        f"target: preview <= 4x decode -> {'MET' if min(pw / bw, pmin / mw) <= 4 else 'NOT MET'} "
        f"(wall median {pw / bw:.2f}x, min {pmin / mw:.2f}x; cpu median "
        f"{statistics.median(cpu[METHODS[1][0]]) / bc:.2f}x); reference engine 2.2-2.8 s -> preview median "
        f"{pw:.2f} s, min {pmin:.2f} s ({pmin / 2.5:.2f}x of 2.5 s)"
    )

    print("\npeak RSS of a fresh process (VmHWM):")
    rss = {name: peak_rss_kb(code, str(path)) for name, code in RSS_SCRIPTS.items()}
    b = rss["python + engine import (baseline)"]
    for name, kb in rss.items():
        total = kb * 1024
        extra = (kb - b) * 1024
        print(
            f"  {name:52} {total / 1e6:8.1f} MB = {total / size:5.2f}x file  (+{extra / 1e6:7.1f} MB over baseline = {extra / size:5.2f}x)"
        )
    peak = rss["preview_compaction(path)"] * 1024
    print(
        f"target: peak RSS <= 2x file size -> {'MET' if peak <= 2 * size else 'NOT MET'} ({peak / size:.2f}x; reference ~350 MB)"
    )
    print(f"loadavg after {os.getloadavg()}")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
