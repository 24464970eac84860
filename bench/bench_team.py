#!/usr/bin/env python3
"""Team recall on PostgreSQL: push and query figures beside a same-run msgspec decode of
the pushed corpus (docs/team.md, "Speed").

A private PostgreSQL cluster is started for the run (the tests' own:
tests/team/conftest.py; Debian's server binaries, scripts/deps/postgres.sh), the team
schema migrated, and M members (each its own database role) push their own generated
agent dir (bench/corpus.py). Printed:

* baseline: msgspec-decoding every line of every member's sessions (median of 3 passes);
* first push (all members, one after the other) and its ratio to the baseline, in
  `--rounds` rounds (the team tables emptied before each, the baseline measured again
  right before each push: the median ratio is the figure), with where the CPU went
  (the builder processes, the database backends, this process; Linux /proc);
* re-push with nothing changed, and its ratio;
* a push after appending 2 entries to each of 10 sessions: time and entries sent;
* team recall warm p50/p95 over a query mix (rare, common and multi-term queries);
* the database size (tables and indexes of the team schema) per corpus byte.

    .venv/bin/python bench/bench_team.py --members 5 --mb 20 [--sessions 12] [--queries 40] [--rounds 3]

`--mb` is per member. Run twice with different `--mb` for the growth.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import msgspec
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "team"))

from corpus import generate_agent_dir  # noqa: E402

QUERIES = [
    "test",
    "error",
    "function",
    "timeout retry",
    "src index ts",
    "the",
    "fix failing test auth",
    "migration",
    "parse config",
    "cache invalidation bug",
    "zzzunlikely",
    "import",
    "assert equal",
    "refactor module",
    "ledger",
    "orbit",
    "build",
    "docs",
    "login",
    "handler request response",
]


def decode_baseline(dirs: list[Path]) -> tuple[float, int]:
    dec = msgspec.json.Decoder()
    nbytes = 0
    t0 = time.perf_counter()
    for d in dirs:
        for f in sorted(d.rglob("*.jsonl")):
            data = f.read_bytes()
            nbytes += len(data)
            for line in data.splitlines():
                if line:
                    dec.decode(line)
    return time.perf_counter() - t0, nbytes


def median_decode(dirs: list[Path]) -> tuple[float, int]:
    """The median of three `decode_baseline` passes (one pass moved ±15 % between rounds)."""
    passes = [decode_baseline(dirs) for _ in range(3)]
    return statistics.median(p[0] for p in passes), passes[0][1]


def _cpu_by_kind() -> dict[tuple[str, int], float]:
    """CPU seconds so far of each live process, keyed (name, pid) (Linux /proc; empty elsewhere)."""
    out: dict[tuple[str, int], float] = {}
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        out[(name, int(pid))] = (int(fields[11]) + int(fields[12])) / tick
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=5)
    ap.add_argument("--mb", type=float, default=20.0, help="corpus size per member, MB")
    ap.add_argument("--sessions", type=int, default=12, help="sessions per member")
    ap.add_argument("--queries", type=int, default=40, help="timed team queries")
    ap.add_argument("--rounds", type=int, default=1, help="first pushes (each from empty tables)")
    ap.add_argument(
        "--corpus", default=None, help="where generated corpora are kept (default $TMPDIR/fabric-team-bench)"
    )
    ap.add_argument(
        "--shared-buffers",
        default=None,
        help="PostgreSQL shared_buffers of the private cluster (default: the tests' 64MB), e.g. 1GB",
    )
    args = ap.parse_args()
    if args.shared_buffers:
        os.environ["FABRIC_TEST_PG_SHARED_BUFFERS"] = args.shared_buffers

    import conftest  # tests/team/conftest.py: the private cluster

    from fabric_lsp.engine.memory.api import MemoryConfig, MemoryEngine
    from fabric_lsp.engine.team.api import TeamEngine
    from fabric_lsp.engine.team.schema import migrate
    from fabric_lsp.engine.team.settings import TeamSettings

    base = Path(args.corpus or os.path.join(tempfile.gettempdir(), "fabric-team-bench"))
    dirs: list[Path] = []
    for m in range(args.members):
        d = base / f"m{m}-{args.mb:g}mb-{args.sessions}"
        if not (d / "sessions").is_dir():
            print(f"generating member {m}'s corpus ({args.mb:g} MB) in {d} ...", file=sys.stderr)
            generate_agent_dir(d, sessions=args.sessions, target_bytes=int(args.mb * 1e6), seed=f"team-{m}")
        dirs.append(d)
    work = Path(tempfile.mkdtemp(prefix="fabric-team-bench-"))
    import shutil

    agents = []
    for m, d in enumerate(dirs):  # a copy: the bench appends to sessions
        a = work / f"m{m}"
        shutil.copytree(d, a, copy_function=shutil.copy2)
        agents.append(a)
    if hasattr(os, "sync"):
        os.sync()  # the copies' writeback would otherwise run during the first push
    decode_s, corpus_bytes = median_decode(agents)
    print(
        f"corpus: {args.members} members x {args.mb:g} MB = {corpus_bytes / 1e6:.1f} MB, "
        f"{sum(1 for a in agents for _ in a.rglob('*.jsonl'))} sessions"
    )
    print(f"baseline msgspec decode of every line: {decode_s:.2f} s")

    gen = conftest.pg_cluster.__wrapped__()
    cluster = next(gen)
    try:
        with psycopg.connect(cluster.url(), autocommit=True) as admin:
            migrate(admin)
            for m in range(args.members):
                admin.execute(f"CREATE ROLE member{m} LOGIN PASSWORD 'pw{m}' IN ROLE fabric_team")
        cfg = MemoryConfig(hot_sessions=100_000)
        members = []
        for m, a in enumerate(agents):
            local = MemoryEngine(cfg, agent_dir=str(a), index_dir=str(work / f"idx{m}"))
            settings = TeamSettings(
                url=f"postgresql://member{m}:pw{m}@127.0.0.1:{cluster.port}/{cluster.dbname}",
                member=f"member{m}@bench",
                projects=("*",),
            )
            members.append((TeamEngine(settings, cfg, lambda local=local: local), local))

        def push_all() -> tuple[float, int]:
            t0 = time.perf_counter()
            sent = 0
            for team, local in members:
                report = team.push(local)
                sent += sum(s.entries_sent for s in report.steps)
            return time.perf_counter() - t0, sent

        ratios = []
        for r in range(args.rounds):
            if r:
                with psycopg.connect(cluster.url(), autocommit=True) as admin:
                    admin.execute(
                        "TRUNCATE fabric_team.postings, fabric_team.entries, fabric_team.segments, "
                        "fabric_team.file_ops, fabric_team.sessions, fabric_team.pushes"
                    )
                    admin.execute("CHECKPOINT")
                decode_s, _ = median_decode(agents)
            cpu0, kids0 = _cpu_by_kind(), resource.getrusage(resource.RUSAGE_CHILDREN)
            first_s, first_sent = push_all()
            cpu1, kids1 = _cpu_by_kind(), resource.getrusage(resource.RUSAGE_CHILDREN)
            builders = kids1.ru_utime + kids1.ru_stime - kids0.ru_utime - kids0.ru_stime
            db_s = sum(v - cpu0.get(k, 0.0) for k, v in cpu1.items() if k[0] == "postgres")
            own = sum(v - cpu0.get(k, 0.0) for k, v in cpu1.items() if k[1] == os.getpid())
            ratios.append(first_s / decode_s)
            print(
                f"first push (round {r + 1}): {first_s:.2f} s = {first_s / decode_s:.2f}x a {decode_s:.2f} s decode "
                f"({first_sent} entries); CPU: builders {builders:.1f} s, database {db_s:.1f} s, "
                f"this process {own:.1f} s = {(builders + db_s + own) / first_s:.2f} cores busy"
            )
        print(f"first push: median {statistics.median(ratios):.2f}x decode over {len(ratios)} round(s)  [target <= 8x]")
        again_s, again_sent = push_all()
        print(
            f"re-push, nothing changed: {again_s:.3f} s = {again_s / decode_s:.3f}x decode ({again_sent} entries sent)"
            "  [target <= 0.2x]"
        )
        # append 2 entries to 10 sessions (spread over the members)
        files = sorted((f for a in agents for f in a.rglob("*.jsonl")), key=lambda p: str(p))[:10]
        for i, f in enumerate(files):
            last = json.loads(f.read_bytes().splitlines()[-1])
            with open(f, "a", encoding="utf-8") as fh:
                for k in range(2):
                    eid = f"{0xBE000000 + i * 2 + k:08x}"
                    fh.write(
                        json.dumps(
                            {
                                "type": "message",
                                "id": eid,
                                "parentId": last["id"],
                                "timestamp": "2027-01-01T00:00:00.000Z",
                                "message": {
                                    "role": "user",
                                    "content": f"appended note {i} {k} quokka",
                                    "timestamp": 1_800_000_000_000,
                                },
                            }
                        )
                        + "\n"
                    )
                    last = {"id": eid}
        app_s, app_sent = push_all()
        print(f"push after appending 2 entries to 10 sessions: {app_s:.3f} s, {app_sent} entries sent  [expected 20]")

        team = members[0][0]
        mix = [QUERIES[i % len(QUERIES)] for i in range(args.queries)]
        for q in QUERIES:  # warm
            team.recall({"query": q, "scope": "team"})
        times = []
        for q in mix:
            t0 = time.perf_counter()
            team.recall({"query": q, "scope": "team"})
            times.append((time.perf_counter() - t0) * 1000)
        times.sort()
        p50 = statistics.median(times)
        p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
        print(
            f"team recall warm, {len(mix)} queries: p50 {p50:.1f} ms, p95 {p95:.1f} ms  [target p50 <= 100, p95 <= 300]"
        )
        with psycopg.connect(cluster.url(), autocommit=True) as admin:
            size = admin.execute(
                "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'fabric_team' AND c.relkind = 'r'"
            ).fetchone()[0]
        print(f"database size: {int(size) / 1e6:.1f} MB = {int(size) / corpus_bytes:.2f} bytes per corpus byte")
        for team, local in members:
            team.close()
            local.close()
    finally:
        gen.close()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
