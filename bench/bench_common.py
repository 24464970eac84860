"""Plumbing shared by the single-session benchmarks: the session file to measure and the
peak memory of a fresh interpreter. Figures are printed by each benchmark, never asserted."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def add_session_arguments(ap: argparse.ArgumentParser, *, rounds: int) -> None:
    ap.add_argument("--size", type=int, default=50_000_000, help="target session size in bytes")
    ap.add_argument("--seed", default="50")
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--file", help="use this session file instead of generating one")
    ap.add_argument("--keep", help="directory to generate into and keep (reused when the file exists)")


def session_file(args: argparse.Namespace) -> tuple[Path, tempfile.TemporaryDirectory[str] | None]:
    """The file to measure: --file, or a deterministic session from bench/corpus.py
    (kept in --keep and reused, else in a temporary directory the caller keeps alive)."""
    if args.file:
        return Path(args.file), None
    sys.path.insert(0, str(HERE))
    from corpus import generate_session

    tmp = None
    if args.keep:
        out = Path(args.keep)
        out.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="fabric-bench-")
        out = Path(tmp.name)
    path = out / f"session-{args.seed}-{args.size}.jsonl"
    if not path.exists():
        t0 = time.perf_counter()
        generate_session(path, target_bytes=args.size, seed=args.seed, cwd="/home/user/projects/orbit")
        print(f"generated {path} in {time.perf_counter() - t0:.2f}s")
    return path, tmp


def describe(path: Path) -> None:
    import msgspec

    size = path.stat().st_size
    with open(path, "rb") as fh:
        lines = fh.read().count(b"\n")
    print(f"file: {path}  {size / 1e6:.1f} MB, {lines} lines")
    print(f"python {sys.version.split()[0]}, msgspec {msgspec.__version__}, loadavg before {os.getloadavg()}")


def peak_rss_kb(code: str, path: str) -> int:
    """Peak RSS (VmHWM, KiB) of a fresh interpreter running ``code`` with ``P`` = path.

    VmHWM belongs to the exec'd process's own address space; ``ru_maxrss`` from wait4 would
    include this (large) parent's RSS, inherited through fork + exec.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = str(HERE.parent) + os.pathsep + env.get("PYTHONPATH", "")
    probe = (
        f"P = {path!r}\n{code}\nprint([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')][0])"
    )
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"RSS probe failed ({out.returncode}): {code}\n{out.stderr}")
    return int(out.stdout.strip().splitlines()[-1])


def msgspec_decode_lines(path: str) -> int:
    """The same-run baseline: decode every non-empty line with msgspec (one whole-file read)."""
    import msgspec

    dec = msgspec.json.Decoder()
    with open(path, "rb") as fh:
        data = fh.read()
    n = 0
    for line in data.split(b"\n"):
        if line:
            dec.decode(line)
            n += 1
    return n


def timed_peak_rss(code: str, names: dict[str, str], agent_dir: str) -> tuple[int, float]:
    """(VmHWM KiB, wall s) of a fresh interpreter running ``code`` with each of ``names``
    bound to its string, and ``PI_CODING_AGENT_DIR`` = ``agent_dir`` (no user config,
    leases or caches). The peak is read by the child itself, after ``code``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(HERE.parent) + os.pathsep + env.get("PYTHONPATH", "")
    env["PI_CODING_AGENT_DIR"] = agent_dir
    script = (
        "".join(f"{name} = {value!r}\n" for name, value in names.items()) + f"{code}\n"
        "sys_ = __import__('sys')\n"
        "sys_.stderr.write('VMHWM ' + [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')][0] + '\\n')\n"
    )
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("VMHWM ")]
    if out.returncode != 0 or not lines:
        raise SystemExit(f"probe failed ({out.returncode}): {code}\n{out.stderr[-2000:]}")
    return int(lines[-1].split()[1]), wall
