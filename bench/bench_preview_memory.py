#!/usr/bin/env python3
"""Benchmark: peak memory of a compaction preview against the session size.

Two deterministic sessions of about the same size from bench/corpus.py (generated, or
reused from --keep): one of many small entries (``generate_tiny_session``: nine lines in
ten are ~120-byte extension/label lines, mean ≈ 150 bytes) and one of ordinary coding
turns (``generate_session``, ~1.5 KB per line). For each, in fresh interpreters of the
same run, the peak RSS (VmHWM) of:

* python + the engine import (the floor every figure contains),
* ``msgspec.json.decode`` of every line, kept in a list (what holding the decoded session
  costs: the baseline the preview is compared with),
* ``fabric-lsp preview FILE --json`` (the CLI, output to /dev/null),
* ``preview_compaction(path)`` called in-process (the engine alone).

Each is printed in MB, as a multiple of the file size, and beside the decode baseline.
With --chained-mib N it also measures issue 15's big session: renamed copies of the
bundled example's largest session chained into one active branch up to N MiB
(tests/reliability/huge.py, as bench/reliability/huge_input.py builds it).
Target (issue 16.8, issue 15): the preview's peak RSS <= 2x the file. Asserts nothing:
not a test.

    python bench/bench_preview_memory.py [--size 50000000] [--seed 50] [--keep DIR] [--tiny FILE] [--normal FILE]
                                         [--only tiny|normal|none] [--chained-mib 1024]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from bench_common import timed_peak_rss  # noqa: E402

CWD = "/home/user/projects/orbit"

PROBES = [
    ("python + engine import (floor)", "import fabric_lsp.engine.compaction.api as a"),
    (
        "msgspec decode of every line, kept (baseline)",
        "import msgspec\nd = open(P, 'rb').read()\nx = [msgspec.json.decode(l) for l in d.split(b'\\n') if l]\ndel d",
    ),
    (
        "fabric-lsp preview FILE --json",
        "import sys, os\nsys.stdout = open(os.devnull, 'w')\nfrom fabric_lsp.cli import main\n"
        "rc = main(['preview', P, '--json'])",
    ),
    (
        "preview_compaction(path) in-process",
        "import fabric_lsp.engine.compaction.api as a\nr = a.preview_compaction(P)",
    ),
]


def probe(code: str, path: str, agent_dir: str) -> tuple[int, float]:
    """(VmHWM KiB, wall s) of a fresh interpreter running ``code`` with ``P`` = path."""
    return timed_peak_rss(code, {"P": path}, agent_dir)


def session(kind: str, args: argparse.Namespace, out: Path) -> Path:
    given = getattr(args, kind)
    if given:
        return Path(given)
    from corpus import generate_session, generate_tiny_session

    path = out / f"{kind}-{args.seed}-{args.size}.jsonl"
    if not path.exists():
        gen = generate_tiny_session if kind == "tiny" else generate_session
        t0 = time.perf_counter()
        gen(path, target_bytes=args.size, seed=args.seed, cwd=CWD)
        print(f"generated {path} in {time.perf_counter() - t0:.1f}s")
    return path


def chained(mib: int, out: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tests" / "reliability"))
    from huge import big_session

    path = out / f"chained-{mib}mib.jsonl"
    if not path.exists():
        src = max(
            (ROOT / "fabric_lsp" / "examples" / "agent" / "sessions").rglob("*.jsonl"), key=lambda p: p.stat().st_size
        )
        t0 = time.perf_counter()
        big_session(src, path, mib << 20)
        print(f"generated {path} from {src.name} in {time.perf_counter() - t0:.1f}s")
    return path


def measure(kind: str, path: Path, agent_dir: str) -> None:
    size = path.stat().st_size
    with open(path, "rb") as fh:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 24), b""))
    print(f"\n{kind} session: {path}  {size / 1e6:.1f} MB, {lines} lines, {size / max(1, lines):.0f} bytes/line")
    rss: dict[str, tuple[int, float]] = {}
    for name, code in PROBES:
        rss[name] = probe(code, str(path), agent_dir)
    base = rss[PROBES[1][0]][0] * 1024
    for name, (kb, wall) in rss.items():
        b = kb * 1024
        print(f"  {name:48} {b / 1e6:8.1f} MB = {b / size:5.2f}x file = {b / base:5.2f}x decode   ({wall:5.2f} s)")
    peak = rss[PROBES[2][0]][0] * 1024
    print(f"  target: preview peak RSS <= 2x file -> {'MET' if peak <= 2 * size else 'NOT MET'} ({peak / size:.2f}x)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--size", type=int, default=50_000_000, help="target size of each session in bytes")
    ap.add_argument("--seed", default="50")
    ap.add_argument("--keep", help="directory to generate into and keep (reused when the files exist)")
    ap.add_argument("--tiny", metavar="FILE", help="use this small-entry session instead of generating one")
    ap.add_argument("--normal", metavar="FILE", help="use this ordinary session instead of generating one")
    ap.add_argument("--only", choices=("tiny", "normal", "none"), help="measure one of the two sessions (or neither)")
    ap.add_argument("--chained-mib", type=int, metavar="N", help="also measure issue 15's chained session of N MiB")
    args = ap.parse_args(argv)

    import msgspec

    tmp = None
    if args.keep:
        out = Path(args.keep)
        out.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="fabric-bench-mem-")
        out = Path(tmp.name)
    agent = tempfile.TemporaryDirectory(prefix="fabric-bench-agent-")
    agent_dir = agent.name
    print(f"python {sys.version.split()[0]}, msgspec {msgspec.__version__}, loadavg before {os.getloadavg()}")
    kinds = {None: ["tiny", "normal"], "none": []}.get(args.only, [args.only])
    for kind in kinds:
        measure(kind, session(kind, args, out), agent_dir)
    if args.chained_mib:
        measure("chained", chained(args.chained_mib, out), agent_dir)
    print(f"\nloadavg after {os.getloadavg()}")
    agent.cleanup()
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
