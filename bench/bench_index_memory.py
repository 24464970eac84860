#!/usr/bin/env python3
"""Benchmark: peak memory of building the recall index of a session of small entries.

A deterministic session from bench/corpus.py (``generate_message_session``: N message
entries of about 60 characters of text, ~230 bytes per line, every one indexed: the hot
tier's worst case per source byte). In fresh interpreters of the same run, the peak RSS
(VmHWM) of:

* python + the engine import (the floor every figure contains),
* ``msgspec.json.decode`` of every line, kept in a list (the baseline: what holding the
  decoded session costs),
* ``fabric-lsp index`` on an empty index dir (the build: a hot shard, written to disk),
* ``fabric-lsp index`` again (a fresh process loading that shard from the disk cache:
  what a restarted server or the next CLI call pays),
* the language server (``fabric-lsp`` over stdio, background indexer off) answering one
  global ``fabric/recall`` on an empty index: it builds the same hot shard and keeps it.

Each is printed in MB, as a multiple of the file size, and beside the decode baseline.
Target (issue 16, point 8): the index build's peak RSS <= 3x the source. Asserts
nothing: not a test.

    python bench/bench_index_memory.py [--entries 300000] [--seed 7] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
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
    ("python + engine import (floor)", "import fabric_lsp.engine.memory.api as a"),
    (
        "msgspec decode of every line, kept (baseline)",
        "import msgspec\nd = open(P, 'rb').read()\nx = [msgspec.json.decode(l) for l in d.split(b'\\n') if l]\ndel d",
    ),
    (
        "fabric-lsp index, empty index (the build)",
        "import sys, os\nsys.stdout = open(os.devnull, 'w')\nfrom fabric_lsp.cli import main\n"
        "rc = main(['index', '--agent-dir', A])\nassert rc == 0",
    ),
    (
        "fabric-lsp index again (from the disk cache)",
        "import sys, os\nsys.stdout = open(os.devnull, 'w')\nfrom fabric_lsp.cli import main\n"
        "rc = main(['index', '--agent-dir', A])\nassert rc == 0",
    ),
]


def probe(code: str, path: str, agent_dir: str) -> tuple[int, float]:
    """(VmHWM KiB, wall s) of a fresh interpreter running ``code`` (P = session, A = agent dir)."""
    return timed_peak_rss(code, {"P": path, "A": agent_dir}, agent_dir)


SERVER_PROBE = "the server: one recall, empty index"


def server_probe(agent_dir: str) -> tuple[int, float]:
    """(VmHWM KiB, wall s) of a real server process answering one global recall."""
    from fabric_lsp.commands.demo import StdioLspClient

    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PI_CODING_AGENT_DIR"] = agent_dir
    env["FABRIC_LSP_BACKGROUND_INDEX"] = "0"
    t0 = time.perf_counter()
    client = StdioLspClient([sys.executable, "-m", "fabric_lsp"], env=env)
    try:
        client.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
        client.notify("initialized", {})
        result = client.request("fabric/recall", {"query": "schema cache", "scope": "global"}, timeout=600)
        if result["coverage"]["indexedSessions"] != 1:
            raise SystemExit(f"the server indexed {result['coverage']}")
        with open(f"/proc/{client.proc.pid}/status") as fh:
            hwm = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
    finally:
        client.close()
    return hwm, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=300_000)
    ap.add_argument("--seed", default="7")
    ap.add_argument("--keep", help="agent dir to generate into and keep (the session is reused when it exists)")
    args = ap.parse_args(argv)

    import msgspec
    from corpus import encode_cwd, generate_message_session

    tmp = None
    if args.keep:
        agent = Path(args.keep)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="fabric-bench-index-")
        agent = Path(tmp.name)
    folder = agent / "sessions" / encode_cwd(CWD)
    existing = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if existing:
        path = existing[0]
    else:
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        path = generate_message_session(folder, entries=args.entries, seed=args.seed, cwd=CWD)
        print(f"generated {path} in {time.perf_counter() - t0:.1f}s")
    shutil.rmtree(agent / "fabric-lsp", ignore_errors=True)  # the build starts from an empty index
    size = path.stat().st_size
    with open(path, "rb") as fh:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 24), b""))
    print(f"python {sys.version.split()[0]}, msgspec {msgspec.__version__}, loadavg before {os.getloadavg()}")
    print(f"session: {path.name}  {size / 1e6:.1f} MB, {lines} lines, {size / max(1, lines):.0f} bytes/line")
    rss: dict[str, tuple[int, float]] = {}
    for name, code in PROBES:
        rss[name] = probe(code, str(path), str(agent))
        if name == PROBES[2][0]:
            shards = [
                p
                for p in (agent / "fabric-lsp" / "memory-index").glob("*.json")
                if not p.name.endswith((".files.json", ".terms.json"))  # (its tables beside it)
            ]
            if len(shards) != 1:
                raise SystemExit(f"the build wrote {len(shards)} index records, not one shard")
            print(f"  shard: {shards[0].stat().st_size / 1e6:.1f} MB on disk")
    shutil.rmtree(agent / "fabric-lsp", ignore_errors=True)
    rss[SERVER_PROBE] = server_probe(str(agent))
    base = rss[PROBES[1][0]][0] * 1024
    for name, (kb, wall) in rss.items():
        b = kb * 1024
        print(f"  {name:46} {b / 1e6:8.1f} MB = {b / size:5.2f}x file = {b / base:5.2f}x decode   ({wall:5.2f} s)")
    build = rss[PROBES[2][0]][0] * 1024
    served = rss[SERVER_PROBE][0] * 1024
    for what, b in (("CLI", build), ("server", served)):
        print(
            f"  target: index build peak RSS <= 3x source ({what}) -> {'MET' if b <= 3 * size else 'NOT MET'} ({b / size:.2f}x)"
        )
    print(f"loadavg after {os.getloadavg()}")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
