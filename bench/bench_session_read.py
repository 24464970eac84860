#!/usr/bin/env python3
"""Benchmark: reading one large Pi session with fabric_lsp.engine.session.read_session.

Generates (or reuses) a deterministic ~50 MB session with bench/corpus.py, then times, in
interleaved rounds, against same-run baselines:

* raw ``read()`` of the file,
* ``msgspec.json.Decoder().decode`` per line (decode only, from one whole-file read),
* ``json.loads`` per line,
* ``read_session(path)`` (streaming reader: offsets, ordinals, stats, records),
* ``read_session`` + ``SessionTree`` + active branch.

Then peak RSS of a fresh subprocess that only imports the engine (baseline) vs one that
runs ``read_session`` (and one that decodes all lines untyped into a list, for scale),
read from the child's own /proc/self/status VmHWM. Prints medians and ratios; asserts nothing (not a test).

    python bench/bench_session_read.py [--size 50000000] [--rounds 3] [--seed 50] [--file PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))


from bench_common import add_session_arguments, describe, msgspec_decode_lines, peak_rss_kb, session_file  # noqa: E402

from fabric_lsp.engine.session import SessionTree, read_session  # noqa: E402


def _raw_read(path: str) -> int:
    with open(path, "rb") as fh:
        return len(fh.read())


def _json_lines(path: str) -> int:
    with open(path, "rb") as fh:
        data = fh.read()
    n = 0
    for line in data.split(b"\n"):
        if line:
            json.loads(line)
            n += 1
    return n


def _reader(path: str) -> int:
    return len(read_session(path).records)


def _reader_tree(path: str) -> int:
    log = read_session(path)
    tree = SessionTree.from_records(log.records)
    return len(tree.branch().entries)


METHODS = [
    ("raw read()", _raw_read),
    ("msgspec decode per line", msgspec_decode_lines),
    ("json.loads per line", _json_lines),
    ("read_session", _reader),
    ("read_session + tree + branch", _reader_tree),
]

RSS_SCRIPTS = {
    "python + engine import (baseline)": "import fabric_lsp.engine.session as s",
    "read_session": "import fabric_lsp.engine.session as s; log = s.read_session(P); assert log.records",
    "read_session + tree + branch": (
        "import fabric_lsp.engine.session as s; log = s.read_session(P); "
        "b = s.SessionTree.from_records(log.records).branch(); assert b.entries"
    ),
    "untyped msgspec decode of all lines kept in a list": (
        "import msgspec; d = open(P, 'rb').read(); x = [msgspec.json.decode(l) for l in d.split(b'\\n') if l]; del d"
    ),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_session_arguments(ap, rounds=3)
    args = ap.parse_args(argv)

    path, tmp = session_file(args)
    describe(path)
    size = path.stat().st_size
    mb = size / 1e6

    times: dict[str, list[float]] = {name: [] for name, _ in METHODS}
    results: dict[str, int] = {}
    for _ in range(args.rounds):
        for name, fn in METHODS:  # interleaved: each round runs every method once
            t0 = time.perf_counter()
            results[name] = fn(str(path))
            times[name].append(time.perf_counter() - t0)

    med = {name: statistics.median(v) for name, v in times.items()}
    base_msgspec = med["msgspec decode per line"]
    base_json = med["json.loads per line"]
    print(f"\n{'method':34} {'median s':>9} {'MB/s':>8} {'vs msgspec':>11} {'vs json':>8}  (rounds: {args.rounds})")
    for name, _ in METHODS:
        m = med[name]
        print(f"{name:34} {m:9.3f} {mb / m:8.0f} {base_msgspec / m:10.2f}x {base_json / m:7.2f}x")
    print(
        f"records read by read_session: {results['read_session']}; active branch length: "
        f"{results['read_session + tree + branch']}"
    )

    print("\npeak RSS of a fresh process (VmHWM):")
    rss = {name: peak_rss_kb(code, str(path)) for name, code in RSS_SCRIPTS.items()}
    base = rss["python + engine import (baseline)"]
    for name, kb in rss.items():
        extra = (kb - base) * 1024
        print(
            f"  {name:52} {kb / 1024:8.1f} MB   (+{extra / 1e6:7.1f} MB over baseline = {extra / size:5.2f}x file size)"
        )
    print(f"loadavg after {os.getloadavg()}")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
