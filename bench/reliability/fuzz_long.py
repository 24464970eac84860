#!/usr/bin/env python3
"""Long fuzz run: the properties of tests/reliability/test_fuzz_decoders.py with many
examples (fresh random examples, not the CI's derandomized ones), then the totals.

    .venv/bin/python bench/reliability/fuzz_long.py [--examples N]

N examples for each light property and N/4 for the heavy ones (memory build, compaction
preview, engine behind the wire decoder): 5 N + 3 N/4 examples in total (N=18000 → 103,500).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=18000)
    ap.add_argument("-k", dest="select", help="only the properties matching this pytest -k expression")
    args = ap.parse_args()
    os.environ["FABRIC_FUZZ_EXAMPLES"] = str(args.examples)
    import pytest

    t0 = time.monotonic()
    rc = pytest.main(
        ["-q", "-p", "no:cacheprovider", "--durations=0", str(REPO / "tests" / "reliability" / "test_fuzz_decoders.py")]
        + (["-k", args.select] if args.select else [])
    )
    wall = time.monotonic() - t0
    mod = sys.modules.get("test_fuzz_decoders")
    counts = dict(sorted(mod.COUNTS.items())) if mod else {}
    examples = (
        sum(v for k, v in counts.items() if k.endswith(".examples"))
        + sum(
            counts.get(k, 0)
            for k in (
                "instructions.ok",
                "instructions.rejected",
                "instructions.round_trips",
                "instructions.encode_rejected",
                "wire.accepted",
                "wire.rejected",
            )
        )
        + sum(v for k, v in counts.items() if k.startswith("engine.") or k.startswith("preview."))
    )
    print(f"\nfuzz_long: pytest exit {rc}, {wall:.0f} s wall, load {os.getloadavg()[0]:.1f}")
    print(f"examples run (all properties): {examples}")
    for k, v in counts.items():
        print(f"  {k:40s} {v}")
    return int(rc)


if __name__ == "__main__":
    sys.exit(main())
