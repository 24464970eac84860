"""Crash safety: kill -9 the real server while it writes the memory cache, and the CLI
(`fabric-lsp compact --wait`, the same commit path the server's committer runs) while it
commits, many times. A cache record is never found half-written, a session file is never
torn (its old bytes stay a prefix, and at most one complete compaction line is added),
and the next start recovers by itself (same recall answers as a clean rebuild; exactly
one committed compaction, recorded in the intent state, nothing left pending).

CI runs a few iterations; FABRIC_LONG=1 (or bench/reliability/crash_loop.py) runs 200.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from reliability_kit import ORBIT, REPO, RawServer, long_run, server_command, server_env

from fabric_lsp.engine.owned_dir import MARKER

KILL_POINT_SERVER = Path(__file__).with_name("kill_point_server.py")

CACHE_KILLS = int(os.environ.get("FABRIC_CACHE_KILLS", "200" if long_run() else "8"))
COMMIT_KILLS = int(os.environ.get("FABRIC_COMMIT_KILLS", "200" if long_run() else "8"))
SEED = int(os.environ.get("FABRIC_CRASH_SEED", "17"))
FIXTURE = REPO / "tests" / "fixtures" / "real-sessions" / "02-print-continue-errors-retries-truncation.jsonl"


def corpus_agent(dest: Path, sessions: int = 16, size: int = 2_500_000) -> Path:
    import sys

    sys.path.insert(0, str(REPO / "bench"))
    from corpus import generate_agent_dir

    generate_agent_dir(dest, sessions=sessions, target_bytes=size, seed="crash")
    return dest


def check_cache_records(index: Path) -> tuple[int, int]:
    """Every record under its final name is one whole JSON document whose `cacheBytes`
    equals its size (a torn write cannot match); returns (records, leftover temp files)."""
    records = temps = 0
    if not index.exists():
        return 0, 0
    for p in index.iterdir():
        if p.name.startswith(".tmp-"):
            temps += 1
            continue
        if p.name == MARKER:  # the ownership marker (engine/owned_dir.py), not a record
            continue
        data = p.read_bytes()
        rec = json.loads(data)
        assert rec["cacheBytes"] == len(data), p
        assert rec["cacheVersion"] == 5
        records += 1
    return records, temps


def recall_all(srv: RawServer) -> list:
    out = []
    for q in ("test", "fix failing", "error", "read the file"):
        for scope in ("global", "project"):
            out.append(srv.call("fabric/recall", {"query": q, "scope": scope}, timeout=300))
    out.append(srv.call("fabric/sessions", {"scope": "global", "pageSize": 200}, timeout=300))
    return out


def test_kill_9_during_cache_writes(tmp_path):
    agent = corpus_agent(tmp_path / "agent")
    index = agent / "fabric-lsp" / "memory-index"
    rng = random.Random(SEED)
    tally: Counter[str] = Counter()
    # how long a first build takes, to spread the kills over it
    srv = RawServer(agent, stderr_path=tmp_path / "server.log")
    t0 = time.monotonic()
    srv.initialize(ORBIT)
    srv.call("fabric/recall", {"query": "test", "scope": "global"}, timeout=300)
    build = time.monotonic() - t0
    srv.kill()
    for i in range(CACHE_KILLS):
        for p in list(index.glob("*.json")):
            if rng.random() < 0.5:
                p.unlink()  # force rewrites of about half the records
        mode = i % 4
        env = None
        if mode == 3:  # the server kills itself at a chosen point of a chosen record write
            at = f"{rng.choice(['half', 'rename', 'renamed'])}:{rng.randint(1, 4)}"
            env = server_env(agent, FABRIC_KILL_AT=at)
        srv = RawServer(
            agent,
            stderr_path=tmp_path / "server.log",
            env=env,
            command=[sys.executable, str(KILL_POINT_SERVER)] if mode == 3 else None,
        )
        srv.request("initialize", {"processId": None, "rootUri": Path(ORBIT).as_uri(), "capabilities": {}})
        srv.notify("initialized", {})
        srv.request("fabric/recall", {"query": "test", "scope": rng.choice(["global", "project"])})
        if mode == 3:
            try:
                srv.proc.wait(timeout=build * 3)
                tally[f"killed_itself_at_{at.split(':')[0]}"] += 1
            except subprocess.TimeoutExpired:
                tally["kill_point_not_reached"] += 1
        elif mode % 2:
            time.sleep(rng.uniform(0.0, build * 1.2))
        else:
            # aim at a write: kill as soon as a temp record file shows up
            deadline = time.monotonic() + build * 3
            while time.monotonic() < deadline:
                try:
                    if any(n.startswith(".tmp-") for n in os.listdir(index)):
                        tally["kills_aimed_at_a_temp_file"] += 1
                        break
                except FileNotFoundError:
                    pass
        srv.kill()
        records, temps = check_cache_records(index)
        tally["records_seen"] += records
        tally["kills_with_temp_leftover"] += 1 if temps else 0
    # the next start recovers by itself: same answers as a rebuild from an empty cache
    srv = RawServer(agent, stderr_path=tmp_path / "server.log")
    srv.initialize(ORBIT)
    recovered = recall_all(srv)
    srv.stop()
    assert not list(index.glob(".tmp-*")), "leftover temp files are cleaned on the next start"
    check_cache_records(index)
    clean_agent = tmp_path / "clean"
    shutil.copytree(agent / "sessions", clean_agent / "sessions")
    srv = RawServer(clean_agent, stderr_path=tmp_path / "server.log")
    srv.initialize(ORBIT)
    clean = recall_all(srv)
    srv.stop()
    assert json.dumps(recovered).replace(str(agent), "AGENT") == json.dumps(clean).replace(str(clean_agent), "AGENT")
    (tmp_path / "tally.json").write_text(json.dumps(tally))
    print(f"crash-tally cache: kills={CACHE_KILLS} first-build={build:.2f}s {dict(tally)}")


# ---------------------------------------------------------------- commits


def cli(args: list[str], env: dict, **kw) -> subprocess.Popen:
    return subprocess.Popen(server_command() + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, **kw)


def leaf_id(data: bytes) -> str:
    return json.loads(data.splitlines()[-1])["id"]


def check_session(path: Path, v0: bytes) -> dict | None:
    """The old bytes are a prefix; after them nothing, or exactly one complete compaction
    line whose parent is the old leaf. Returns that entry or None."""
    data = path.read_bytes()
    assert data.startswith(v0), "existing session bytes were changed"
    rest = data[len(v0) :]
    if not rest:
        return None
    assert rest.endswith(b"\n") and rest.count(b"\n") == 1, "a torn or extra line was appended"
    entry = json.loads(rest)
    assert entry["type"] == "compaction" and entry["parentId"] == leaf_id(v0)
    return entry


def test_kill_9_during_commits(tmp_path):
    rng = random.Random(SEED)
    session = tmp_path / "s.jsonl"
    state = tmp_path / "state"
    env = dict(os.environ, PI_CODING_AGENT_DIR=str(tmp_path / "agent"), HOME=str(tmp_path))
    v0 = FIXTURE.read_bytes()
    args = ["--state-dir", str(state), "--quiet-interval", "0", "--keep-recent", "100", "--context-window", "0"]
    tally: Counter[str] = Counter()

    def reset() -> None:
        session.write_bytes(v0)
        past = time.time() - 3600
        os.utime(session, (past, past))
        shutil.rmtree(state, ignore_errors=True)

    # one undisturbed run, to spread the kills over its duration
    reset()
    t0 = time.monotonic()
    done = cli(["compact", str(session), "--wait", "--json", *args], env)
    out, err = done.communicate(timeout=120)
    full = time.monotonic() - t0
    assert done.returncode == 0, err
    assert check_session(session, v0) is not None
    for _ in range(COMMIT_KILLS):
        reset()
        proc = cli(["compact", str(session), "--wait", "--json", *args], env)
        time.sleep(rng.uniform(0.0, full * 1.1))
        proc.kill()
        proc.communicate()
        entry = check_session(session, v0)
        for p in state.glob("*") if state.exists() else []:
            if p.is_file() and p.suffix == ".json":
                saved = json.loads(p.read_bytes())  # intent state is never half-written
                if isinstance(saved, dict) and saved.get("committing"):
                    tally["killed_between_append_and_state"] += 1
        tally["appended_before_kill" if entry else "nothing_appended"] += 1
        # the next start: status (recovers a half-finished commit), then commit again
        status = subprocess.run(
            server_command() + ["compact-status", str(session), "--json", *args[:2]],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert status.returncode == 0, status.stderr
        st = json.loads(status.stdout)
        if entry is not None:
            assert st.get("last", {}).get("entryId") == entry["id"], st  # recovered by itself
            tally["recovered_by_status"] += 1
        if entry is None:
            # not committed: asking again commits (a compaction leaf would instead wait for
            # the next finished turn, by design, so we only ask when nothing was appended)
            again = subprocess.run(
                server_command() + ["compact", str(session), "--wait", "--json", *args],
                capture_output=True,
                text=True,
                env=env,
                timeout=120,
            )
            assert again.returncode == 0, again.stderr
        final = check_session(session, v0)
        assert final is not None, "the intent was committed in the end"
        assert entry is None or final == entry
        st = json.loads(
            subprocess.run(
                server_command() + ["compact-status", str(session), "--json", *args[:2]],
                capture_output=True,
                text=True,
                env=env,
                timeout=120,
            ).stdout
        )
        assert st["last"]["status"] == "committed" and st["last"]["entryId"] == final["id"], st
        assert "pending" not in st
    (tmp_path / "tally.json").write_text(json.dumps(tally))
    print(f"crash-tally commits: kills={COMMIT_KILLS} undisturbed-run={full:.2f}s {dict(tally)}")
    assert tally["appended_before_kill"] + tally["nothing_appended"] == COMMIT_KILLS


SERVER_COMMIT_KILLS = int(os.environ.get("FABRIC_SERVER_COMMIT_KILLS", "200" if long_run() else "4"))


def _wait_committed(srv: RawServer, session: Path, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        st = srv.call("fabric/compact/status", {"session": str(session)})
        if "pending" not in st and st.get("last", {}).get("status") == "committed":
            return st
        if time.monotonic() > deadline:
            raise AssertionError(f"not committed: {st}")
        time.sleep(0.05)


def test_kill_9_server_during_commits(tmp_path):
    """The server's own committer (fabric/compact/request, commit at a settled boundary),
    killed with kill -9 at random moments; the next server start finishes the job."""
    rng = random.Random(SEED + 3)
    agent = tmp_path / "agent"
    (agent / "sessions" / "--p--").mkdir(parents=True)
    (agent / "settings.json").write_text(json.dumps({"compaction": {"keepRecentTokens": 100}}))
    session = agent / "sessions" / "--p--" / "s.jsonl"
    state = agent / "fabric-lsp" / "intents"
    settings = {"compaction": {"commitQuietMs": 0, "contextWindow": 0}}
    v0 = FIXTURE.read_bytes()
    tally: Counter[str] = Counter()

    def reset() -> None:
        session.write_bytes(v0)
        past = time.time() - 3600
        os.utime(session, (past, past))
        shutil.rmtree(state, ignore_errors=True)

    def start() -> RawServer:
        srv = RawServer(agent, stderr_path=tmp_path / "server.log", settings=settings)
        srv.initialize(ORBIT)
        return srv

    reset()
    srv = start()
    t0 = time.monotonic()
    srv.call("fabric/compact/request", {"session": str(session)})
    _wait_committed(srv, session)
    full = time.monotonic() - t0
    srv.stop()
    assert check_session(session, v0) is not None
    for _ in range(SERVER_COMMIT_KILLS):
        reset()
        srv = start()
        srv.request("fabric/compact/request", {"session": str(session)})
        time.sleep(rng.uniform(0.0, full * 1.2))
        srv.kill()
        entry = check_session(session, v0)
        for p in state.glob("*.json") if state.exists() else []:
            saved = json.loads(p.read_bytes())  # intent state is never half-written
            if isinstance(saved, dict) and saved.get("committing"):
                tally["killed_between_append_and_state"] += 1
        tally["appended_before_kill" if entry else "nothing_appended"] += 1
        srv = start()  # the next start: recovers a half-finished commit, commits what is pending
        try:
            st = srv.call("fabric/compact/status", {"session": str(session)})
            if entry is None and "pending" not in st and "last" not in st:
                tally["killed_before_the_request_was_recorded"] += 1
                srv.call("fabric/compact/request", {"session": str(session)})
            st = _wait_committed(srv, session)
        finally:
            srv.stop()
        final = check_session(session, v0)
        assert final is not None and (entry is None or final == entry)
        assert st["last"]["entryId"] == final["id"], st
    print(f"crash-tally server commits: kills={SERVER_COMMIT_KILLS} undisturbed={full:.2f}s {dict(tally)}")
