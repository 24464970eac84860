#!/usr/bin/env python3
"""Run the long versions of the reliability tests once and print their figures.

    .venv/bin/python bench/reliability/long_tests.py crash      # 200 kill -9 during cache writes, 200 during CLI commits, 200 during server commits
    .venv/bin/python bench/reliability/long_tests.py lsp        # 14,000 random JSON-RPC messages (~11.7k sent)
    .venv/bin/python bench/reliability/long_tests.py race       # 60 s of file changes during recall/expand
    .venv/bin/python bench/reliability/long_tests.py concurrency  # 50 concurrent requests x 3 rounds
    .venv/bin/python bench/reliability/long_tests.py huge       # 1 GB session + 200 MB line through the server

Each is the same test as in the CI suite with FABRIC_LONG=1 (bigger counts); the tests
print their tallies (lines starting with crash-tally, lsp-fuzz-tally, race, ...).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = {
    "crash": "tests/reliability/test_crash_safety.py",
    "lsp": "tests/reliability/test_malformed_lsp.py",
    "race": "tests/reliability/test_changing_files.py",
    "concurrency": "tests/reliability/test_concurrency.py",
    "huge": "tests/reliability/test_huge_input.py",
}


def main(argv: list[str]) -> int:
    names = argv or list(TESTS)
    env = dict(os.environ, FABRIC_LONG="1")
    rc = 0
    for name in names:
        t0 = time.monotonic()
        code = subprocess.call(
            [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", str(REPO / TESTS[name])],
            env=env,
            cwd=REPO,
        )
        print(
            f"\n== {name}: pytest exit {int(code)}, {time.monotonic() - t0:.0f} s wall, "
            f"load {os.getloadavg()[0]:.1f}\n",
            flush=True,
        )
        rc = rc or int(code)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
