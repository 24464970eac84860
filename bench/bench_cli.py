#!/usr/bin/env python3
"""`fabric-lsp recall` as whole processes (issue 36): with a warm server running, and without.

The latency of a shell query is a whole process: interpreter start, imports, settings,
the answer. For each corpus (an agent dir with `sessions/`, e.g. /work/corpora/c200 or one
bench/corpus.py made) it prints p50 / p95 over `--runs` processes of

  * `python -c pass` and `python -I -S -c pass`: the floor no CLI can go under here;
  * `fabric-lsp recall Q --scope global --json` without a server (`FABRIC_LSP_SOCKET=0`),
    over the warm disk index a server or `fabric-lsp index` leaves (built once first);
  * the same with a warm server running: `fabric-lsp serve --daemon`, and (`--lsp`) a real
    language server started over stdio as an editor would; every answer is checked to be
    the server's (`-v` note) and byte-identical to the process' own answer;

beside the load average, the hypervisor's steal share and the same-run msgspec decode of
the corpus. Targets (issue 36): with a server p50 <= 50 ms per process, without one
p50 <= 0.5 s at 200 MB. Nothing is written into the corpus: a temporary agent dir points
`sessionDir` at its sessions, with its own index dir.

With `--baseline DIR` (a directory holding another `fabric_lsp` package, e.g. an earlier
commit's `git archive` with its compiled accelerator copied in) the no-server processes
alternate between that code (run with PYTHONPATH=DIR) and this one in the same run, and
their answers are checked to be byte-identical.

Usage:
  python bench/bench_cli.py [--corpus /work/corpora/c200] [--runs 30] [--lsp] [--baseline DIR] [--json]
Run it with the interpreter of the install to measure: the development venv's editable
install pays ~15 ms more per process start (its import finder) than a regular install.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

QUERIES = [
    "parse epoch",
    "satellite orbit",
    "error",
    "fix failing test",
    "zzzz_no_such_term",
    "ValueError",
    "src/orbit/tle.py",
    "timeout retry",
]
CWD = "/home/user/projects/atlas"
TARGETS = {"served_p50_s": 0.050, "alone_p50_s": 0.5}


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[max(0, min(len(values) - 1, round(q * (len(values) - 1))))]


def fabric_lsp() -> list[str]:
    """The installed console script (what a user runs), else `python -m fabric_lsp`."""
    script = Path(sys.executable).parent / "fabric-lsp"
    return [str(script)] if script.exists() else [sys.executable, "-m", "fabric_lsp"]


# every process runs in a directory of its own, so `python -m fabric_lsp` is this
# interpreter's install (an editable checkout, or a copy installed into a venv)
RUN_DIR = Path(tempfile.gettempdir())


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, env=env, cwd=str(RUN_DIR))
    return time.perf_counter() - t, out


def series(make: Any, runs: int, env: dict[str, str]) -> tuple[list[float], list[subprocess.CompletedProcess[bytes]]]:
    times, outs = [], []
    for i in range(runs):
        dt, out = timed(make(i), env)
        if out.returncode not in (0,):
            raise SystemExit(f"failed ({out.returncode}): {make(i)}\n{out.stderr.decode(errors='replace')[-2000:]}")
        times.append(dt)
        outs.append(out)
    return times, outs


def steal() -> tuple[int, int]:
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v[:8]), v[7] if len(v) > 7 else 0
    except (OSError, ValueError):
        return 0, 0


def decode_baseline(files: list[Path]) -> float:
    import msgspec

    dec = msgspec.json.Decoder()
    t = time.perf_counter()
    for f in files:
        for line in f.read_bytes().split(b"\n"):
            if line:
                try:
                    dec.decode(line)
                except msgspec.DecodeError:
                    pass
    return time.perf_counter() - t


def start_daemon(env: dict[str, str], index_dir: Path) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [*fabric_lsp(), "serve", "--daemon", "--index-dir", str(index_dir), "--cwd", CWD],
        stderr=subprocess.PIPE,
        env=env,
        cwd=str(RUN_DIR),
        text=True,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    if "serving" not in line:
        proc.kill()
        raise SystemExit(f"the daemon did not serve: {line}{proc.stderr.read()}")
    return proc, proc.pid


def start_lsp(agent: Path, index_dir: Path) -> Any:
    import bench_scale  # the minimal LSP client of the scale benchmark

    bench_scale.REPO = RUN_DIR  # its server's working directory: this interpreter's fabric_lsp
    client = bench_scale.Client(agent, index_dir)
    client.start()
    return client


def wait_served(cmd: list[str], env: dict[str, str], pid: int, timeout: float = 120) -> None:
    """Until a `-v` run says the server `pid` answered (it binds right after `initialized`)."""
    deadline = time.monotonic() + timeout
    while True:
        out = subprocess.run(cmd, capture_output=True, env=env, cwd=str(RUN_DIR))
        if f"answered by the fabric-lsp server (pid {pid})".encode() in out.stderr:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"the server (pid {pid}) never answered the CLI:\n{out.stderr.decode(errors='replace')}")
        time.sleep(0.2)


def alternating(
    make: Any, runs: int, env: dict[str, str], baseline_env: dict[str, str]
) -> tuple[
    list[float], list[subprocess.CompletedProcess[bytes]], list[float], list[subprocess.CompletedProcess[bytes]]
]:
    """`series` of this code and of the baseline's, one process of each in turn."""
    times, outs, base_times, base_outs = [], [], [], []
    for i in range(runs):
        for t, o, e in ((base_times, base_outs, baseline_env), (times, outs, env)):
            dt, out = timed(make(i), e)
            if out.returncode != 0:
                raise SystemExit(f"failed ({out.returncode}): {make(i)}\n{out.stderr.decode(errors='replace')[-2000:]}")
            t.append(dt)
            o.append(out)
    return times, outs, base_times, base_outs


def measure(corpus: Path, runs: int, lsp: bool, baseline: Path | None = None) -> dict[str, Any]:
    sessions = corpus / "sessions"
    files = sorted(sessions.rglob("*.jsonl"))
    size = sum(f.stat().st_size for f in files)
    tmp = Path(tempfile.mkdtemp(prefix="fabric-bench-cli-"))
    try:
        agent = tmp / "agent"
        agent.mkdir()
        (agent / "fabric.json").write_text(json.dumps({"sessionDir": str(sessions)}))
        index_dir = tmp / "index"
        env = dict(os.environ)
        env.pop("FABRIC_LSP_SOCKET", None)
        env.update(PI_CODING_AGENT_DIR=str(agent), FABRIC_LSP_INTENTS_AUTOSTART="0")
        alone_env = dict(env, FABRIC_LSP_SOCKET="0")
        row: dict[str, Any] = {"corpus": str(corpus), "sessions": len(files), "bytes": size, "runs": runs}
        row["decode_s"] = decode_baseline(files)

        def recall(i: int, *extra: str) -> list[str]:
            return [
                *fabric_lsp(),
                *extra,
                "recall",
                QUERIES[i % len(QUERIES)],
                "--scope",
                "global",
                "--json",
                "--index-dir",
                str(index_dir),
                "--cwd",
                CWD,
            ]

        t = time.perf_counter()
        subprocess.run(
            [*fabric_lsp(), "index", "--scope", "global", "--index-dir", str(index_dir), "--cwd", CWD],
            check=True,
            capture_output=True,
            env=alone_env,
            cwd=str(RUN_DIR),
        )
        row["index_s"] = time.perf_counter() - t

        row["load_before"] = os.getloadavg()
        s0 = steal()
        floor, _ = series(lambda i: [sys.executable, "-c", "pass"], runs, env)
        floor_isolated, _ = series(lambda i: [sys.executable, "-I", "-S", "-c", "pass"], runs, env)
        if baseline is None:
            alone, alone_outs = series(recall, runs, alone_env)
        else:
            base_env = dict(alone_env, PYTHONPATH=str(baseline))
            alone, alone_outs, base, base_outs = alternating(recall, runs, alone_env, base_env)
            if any(a.stdout != b.stdout for a, b in zip(alone_outs, base_outs)):
                raise SystemExit("an answer differs from the baseline's")
            row["baseline"] = str(baseline)
            row["baseline_alone_p50_s"], row["baseline_alone_p95_s"] = pct(base, 0.5), pct(base, 0.95)
        row["python_p50_s"], row["python_isolated_p50_s"] = pct(floor, 0.5), pct(floor_isolated, 0.5)
        row["alone_p50_s"], row["alone_p95_s"] = pct(alone, 0.5), pct(alone, 0.95)

        for name in ["daemon"] + (["lsp"] if lsp else []):
            stop: Any
            if name == "daemon":
                stop, pid = start_daemon(env, index_dir)
            else:
                stop = start_lsp(agent, index_dir)
                pid = stop.proc.pid
            try:
                wait_served(recall(0, "-v"), env, pid)
                for i in range(len(QUERIES)):  # warm: every query once
                    subprocess.run(recall(i), capture_output=True, env=env, cwd=str(RUN_DIR))
                served, served_outs = series(recall, runs, env)
                checked = subprocess.run(recall(0, "-v"), capture_output=True, env=env, cwd=str(RUN_DIR))
                assert f"answered by the fabric-lsp server (pid {pid})".encode() in checked.stderr, checked.stderr
                same = all(a.stdout == b.stdout for a, b in zip(served_outs, alone_outs))
                if not same:
                    raise SystemExit(f"{name}: a served answer differs from the process' own")
                row[f"{name}_p50_s"], row[f"{name}_p95_s"] = pct(served, 0.5), pct(served, 0.95)
                row[f"{name}_identical"] = same
            finally:
                if name == "daemon":
                    stop.terminate()
                    stop.wait(30)
                else:
                    stop.close()
        s1 = steal()
        row["load_after"] = os.getloadavg()
        row["steal_share"] = (s1[1] - s0[1]) / max(1, s1[0] - s0[0])
        row["served_p50_s"] = row["daemon_p50_s"]
        return row
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(row: dict[str, Any]) -> None:
    ms = lambda s: f"{s * 1000:.0f} ms"  # noqa: E731
    print(
        f"corpus {row['corpus']}: {row['sessions']} sessions, {row['bytes'] / 1e6:.0f} MB; "
        f"msgspec decode {row['decode_s']:.2f} s; `fabric-lsp index` {row['index_s']:.1f} s; {row['runs']} runs each"
    )
    print(
        f"  load average {tuple(round(x, 2) for x in row['load_before'])} -> "
        f"{tuple(round(x, 2) for x in row['load_after'])}, {os.cpu_count()} CPUs, steal {row['steal_share']:.1%}"
    )
    print(
        f"  python -c pass                  p50 {ms(row['python_p50_s'])}   (python -I -S: {ms(row['python_isolated_p50_s'])})"
    )
    print(
        f"  recall, no server               p50 {ms(row['alone_p50_s'])}  p95 {ms(row['alone_p95_s'])}"
        f"   target at 200 MB p50 <= {ms(TARGETS['alone_p50_s'])}: {'met' if row['alone_p50_s'] <= TARGETS['alone_p50_s'] else 'NOT met'}"
    )
    if "baseline_alone_p50_s" in row:
        print(
            f"  recall, no server, baseline     p50 {ms(row['baseline_alone_p50_s'])}  "
            f"p95 {ms(row['baseline_alone_p95_s'])}   ({row['baseline']}, alternating; answers byte-identical)"
        )
    for name in ("daemon", "lsp"):
        if f"{name}_p50_s" in row:
            label = "serve --daemon" if name == "daemon" else "language server"
            p50 = row[f"{name}_p50_s"]
            print(
                f"  recall, warm {label:<18} p50 {ms(p50)}  p95 {ms(row[f'{name}_p95_s'])}"
                f"   target p50 <= {ms(TARGETS['served_p50_s'])}: {'met' if p50 <= TARGETS['served_p50_s'] else 'NOT met'}"
                f"; answers byte-identical: {row[f'{name}_identical']}"
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", action="append", help="an agent dir with sessions/ (default /work/corpora/c200)")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--lsp", action="store_true", help="also with a language server over stdio")
    ap.add_argument("--baseline", metavar="DIR", help="a directory with another fabric_lsp package to run beside")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    # compiled modules, as an installed package has them (PYTHONDONTWRITEBYTECODE may be set here)
    import fabric_lsp

    package = Path(fabric_lsp.__file__).parent
    compileall.compile_dir(str(package), quiet=1)
    print(f"fabric_lsp from {package}; python {sys.version.split()[0]} ({sys.executable})")
    rows = []
    for corpus in args.corpus or ["/work/corpora/c200"]:
        path = Path(corpus)
        if not (path / "sessions").is_dir():
            raise SystemExit(f"{path} has no sessions/ (an agent dir, e.g. bench/corpus.py --out DIR)")
        baseline = Path(args.baseline).resolve() if args.baseline else None
        if baseline is not None:
            if not (baseline / "fabric_lsp" / "__init__.py").is_file():
                raise SystemExit(f"--baseline {baseline}: no fabric_lsp package there")
            compileall.compile_dir(str(baseline / "fabric_lsp"), quiet=1)
        rows.append(measure(path, args.runs, args.lsp, baseline))
        report(rows[-1])
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
