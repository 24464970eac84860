"""File-history benchmark (issue 17): `textDocument/codeLens` on a source file, warm, over
the real server and a generated 200-session / 200 MB agent dir. Target: p50 <= 20 ms.

Printed beside same-run baselines: a bare msgspec decode of one (median-size) session,
the `fabric/compact/status` round trip (executor + engine, no memory work) and the
engine's own `file_history` call without LSP. Figures are printed, never asserted.

Usage: python bench/bench_file_history.py [--corpus DIR] [--sessions 200] [--bytes 200000000]
       [--requests 200]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from msgspec import to_builtins

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_recall import ensure_corpus, session_files  # noqa: E402

from fabric_lsp.commands.demo import StdioLspClient  # noqa: E402


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def most_touched(agent: Path) -> tuple[str, int]:
    """The absolute path the corpus's Pi calls touch most (relative paths joined to the cwd)."""
    import msgspec

    counts: collections.Counter[str] = collections.Counter()
    for path in session_files(agent):
        with open(path, "rb") as fh:
            head = json.loads(fh.readline())
            cwd = head.get("cwd", "")
            for line in fh:
                if b'"toolCall"' not in line:
                    continue
                raw = msgspec.json.decode(line)
                for part in (raw.get("message") or {}).get("content") or []:
                    if (
                        isinstance(part, dict)
                        and part.get("type") == "toolCall"
                        and part.get("name") in ("read", "edit", "write")
                    ):
                        p = (part.get("arguments") or {}).get("path")
                        if isinstance(p, str):
                            counts[os.path.normpath(os.path.join(cwd, p))] += 1
    return counts.most_common(1)[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=os.path.join(tempfile.gettempdir(), "fabric-lsp-bench-200"))
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--bytes", type=int, default=200_000_000)
    ap.add_argument("--requests", type=int, default=200)
    args = ap.parse_args()

    agent = ensure_corpus(Path(args.corpus), args.sessions, args.bytes)
    files = session_files(agent)
    total = sum(p.stat().st_size for p in files)
    target, touches = most_touched(agent)
    print(f"corpus {agent}: {len(files)} sessions, {total / 1e6:.1f} MB; lens file {target} ({touches} Pi calls)")
    print(f"loadavg before {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs")

    # baseline 1: a bare msgspec decode of every line of the median-size session
    import msgspec

    median_file = sorted(files, key=lambda p: p.stat().st_size)[len(files) // 2]
    data = median_file.read_bytes()
    decoder = msgspec.json.Decoder()

    def decode_one() -> None:
        for line in data.splitlines():
            if line:
                decoder.decode(line)

    decode = timed(decode_one, 20)

    # the engine call alone (a fresh index dir: the first call builds the index)
    from fabric_lsp.engine.memory.api import MemoryConfig, MemoryEngine

    with tempfile.TemporaryDirectory(prefix="bench-fh-index-") as index_dir:
        eng = MemoryEngine(MemoryConfig(), agent_dir=str(agent), index_dir=index_dir)
        t0 = time.perf_counter()
        first = to_builtins(eng.file_history({"path": target}))
        first_s = time.perf_counter() - t0
        engine_warm = timed(lambda: eng.file_history({"path": target, "pageSize": 1}), args.requests)
        eng.close()

        env = dict(os.environ, PI_CODING_AGENT_DIR=str(agent), HOME=str(Path(index_dir).parent))
        client = StdioLspClient(
            [sys.executable, "-m", "fabric_lsp", "serve"], env=env, settings={"indexDir": index_dir}
        )
        root = Path(first["items"][0]["cwd"]) if first["items"] else Path("/")
        client.request(
            "initialize",
            {
                "processId": None,
                "rootUri": root.as_uri(),
                "capabilities": {},
                "initializationOptions": {"indexDir": index_dir},
            },
        )
        client.notify("initialized", {})
        uri = Path(target).as_uri()
        client.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": "x = 1\n"}},
        )
        lens_params = {"textDocument": {"uri": uri}}
        t0 = time.perf_counter()
        lens = client.request("textDocument/codeLens", lens_params, timeout=600)
        lens_first = time.perf_counter() - t0
        warm = timed(lambda: client.request("textDocument/codeLens", lens_params), args.requests)
        status = {"session": str(files[0])}
        baseline_rt = timed(lambda: client.request("fabric/compact/status", status), args.requests)
        client.request("shutdown")
        client.notify("exit")
        client.close()

    print(
        f"\nlens: {lens[0]['command']['title'] if lens else '(none)'}; history: {first['totalItems']} operations "
        f"in {first['totalSessions']} sessions; coverage complete={first['coverage']['complete']}"
    )
    print("\n                                           p50          p95")
    print(
        f"  baseline: msgspec decode of one session {ms(statistics.median(decode))}  "
        f"({median_file.stat().st_size / 1e6:.1f} MB)"
    )
    print(
        f"  baseline: compact/status round trip     {ms(statistics.median(baseline_rt))} {ms(pct(baseline_rt, 0.95))}"
    )
    print(
        f"  engine file_history, warm (no LSP)      {ms(statistics.median(engine_warm))} {ms(pct(engine_warm, 0.95))}"
    )
    p50 = statistics.median(warm)
    print(
        f"  textDocument/codeLens, warm             {ms(p50)} {ms(pct(warm, 0.95))}   target p50 <= 20 ms: "
        f"{'met' if p50 <= 0.020 else 'NOT met'}"
    )
    print(f"\n  first engine call (empty index)         {first_s:8.2f} s")
    print(f"  first codeLens (fresh server, warm disk cache) {lens_first:8.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
