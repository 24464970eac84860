"""Leases name a live process of this user with its start time; anything else is stale.

Real processes (a `sleep` child for a live pid, a reaped child for a dead one, a `sleep`
run as another user) and the real CLI: `fabric-lsp pi hold` refuses what could only give
a stale lease, and a forged lease (pid 1, a live pid with another start time, a dead pid,
another user's process) blocks no outside commit and its leafId is not the live branch."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fabric_lsp.engine.session.lease import LeaseBook, _identity_from_ps, process_identity, session_key

REAL_SESSIONS = Path(__file__).resolve().parents[2] / "fixtures" / "real-sessions"
FIXTURE = "02-print-continue-errors-retries-truncation.jsonl"


def run(tmp: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PI_CODING_AGENT_DIR=str(tmp / "agent"), HOME=str(tmp / "home"))
    return subprocess.run(
        [sys.executable, "-m", "fabric_lsp", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
        input=stdin,
        timeout=120,
    )


def session(tmp: Path) -> Path:
    folder = tmp / "agent" / "sessions" / "--home-user-proj--"
    folder.mkdir(parents=True)
    path = folder / FIXTURE
    shutil.copy(REAL_SESSIONS / FIXTURE, path)
    t = time.time() - 60  # quiet for a minute: the commit need not wait
    os.utime(path, (t, t))
    return path


def ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: the pid names no process now
    return proc.pid


@pytest.fixture
def sleeper():
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def other_users_process():
    """A running process of another user: a `sleep` as nobody when we are root, else any
    process of another uid that runs here (pid 1 excluded: it is refused for itself)."""
    if os.geteuid() == 0:
        # started as root, then it becomes nobody itself (no exec as nobody: that would
        # need every directory on the way to be searchable by nobody)
        code = "import os, sys\nos.setgid(65534)\nos.setuid(65534)\nprint('nobody', flush=True)\nsys.stdin.read()\n"
        proc = subprocess.Popen(
            [sys.executable, "-I", "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline() == "nobody\n"
        yield proc.pid
        proc.kill()
        proc.wait()
        return
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) > 1:
            try:
                if os.stat(f"/proc/{name}").st_uid != os.geteuid():
                    yield int(name)
                    return
            except OSError:
                continue
    pytest.fail("no process of another user runs here: run as root, or with one running")


def hold(tmp: Path, path: Path, pid: object) -> subprocess.CompletedProcess:
    return run(tmp, "pi", "hold", stdin=json.dumps({"session": str(path), "pid": pid, "leafId": "x"}))


def lease_files(tmp: Path) -> list[Path]:
    return sorted((tmp / "agent" / "fabric-lsp" / "leases").glob("*.json"))


def test_pi_hold_refuses_pid_1_dead_and_other_users_pids(tmp_path, sleeper, other_users_process):
    path = session(tmp_path)
    for pid, words in (
        (1, "pid` 1 is the system's init process"),
        (0, "positive process id"),
        (dead_pid(), "is running"),
        (other_users_process, "belongs to another user"),
    ):
        out = hold(tmp_path, path, pid)
        assert out.returncode != 0, (pid, out.stdout)
        err = json.loads(out.stdout)["error"]
        assert words in err["message"] and "Pi" in err["message"], (pid, err)
        assert err["message"].startswith("fabric-lsp pi hold:")
        assert not lease_files(tmp_path), pid
        # the same refusal for a claim or a settled boundary in that pid's name
        for action in ("claim", "settled"):
            out = run(tmp_path, "pi", action, stdin=json.dumps({"session": str(path), "pid": pid}))
            assert out.returncode != 0 and words in json.loads(out.stdout)["error"]["message"], (action, pid)
    # a live process of this user holds: the lease records who it is
    out = hold(tmp_path, path, sleeper.pid)
    assert out.returncode == 0, out.stdout + out.stderr
    lease = json.loads(out.stdout)["lease"]
    assert lease["pid"] == sleeper.pid and lease["uid"] == os.geteuid()
    assert lease["processStart"] == process_identity(sleeper.pid).start
    if os.path.exists("/proc/sys/kernel/random/boot_id"):
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        assert lease["processStart"].startswith(f"linux:{boot}:")


def write_lease(tmp: Path, path: Path, pid: int, leaf: str, **fields: object) -> Path:
    """A lease file written by hand, as anyone who can write the agent dir could."""
    real = os.path.realpath(path)
    now = int(time.time() * 1000)
    lease = {"version": 2, "session": real, "pid": pid, "leafId": leaf, "since": now, "updatedAt": now, **fields}
    folder = tmp / "agent" / "fabric-lsp" / "leases"
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / f"{session_key(real)}.{pid}.json"
    file.write_text(json.dumps(lease))
    return file


def genuine(pid: int) -> dict:
    ident = process_identity(pid)
    assert ident is not None
    return {"uid": ident.uid, "processStart": ident.start, "startTime": ident.start_time}


CASES = [
    "genuine",
    "pid-1",
    "wrong-start-time",
    "dead-pid",
    "other-user",
    "no-start-at-all",
    "legacy-v1-matching",
    "legacy-v1-wrong-start",
    "renamed-to-another-pid",
]


@pytest.mark.parametrize("case", CASES)
def test_a_forged_lease_is_stale_blocks_no_commit_and_its_leaf_is_not_used(
    tmp_path, sleeper, other_users_process, case
):
    path = session(tmp_path)
    entries = ids(path)
    file_leaf, earlier = entries[-1], entries[len(entries) // 2]
    live_pid = sleeper.pid
    if case == "genuine":  # the control: the same file for a live process of ours counts
        write_lease(tmp_path, path, live_pid, earlier, **genuine(live_pid))
    elif case == "pid-1":
        write_lease(tmp_path, path, 1, earlier, **genuine(1))
    elif case == "wrong-start-time":
        g = genuine(live_pid)
        forged = dict(
            g,
            processStart=g["processStart"][:-1] + ("7" if not g["processStart"].endswith("7") else "8"),
            startTime=(g["startTime"] or 0) + 1,
        )
        write_lease(tmp_path, path, live_pid, earlier, **forged)
    elif case == "dead-pid":
        pid = dead_pid()
        write_lease(tmp_path, path, pid, earlier, uid=os.geteuid(), processStart="linux:x:1")
    elif case == "other-user":
        write_lease(tmp_path, path, other_users_process, earlier, **genuine(other_users_process))
    elif case == "no-start-at-all":  # a live pid of ours, nothing saying which process it was
        write_lease(tmp_path, path, live_pid, earlier)
    elif case == "legacy-v1-matching":  # written by an earlier fabric-lsp for the same process: counts
        write_lease(tmp_path, path, live_pid, earlier, version=1, startTime=genuine(live_pid)["startTime"])
    elif case == "legacy-v1-wrong-start":
        write_lease(tmp_path, path, live_pid, earlier, version=1, startTime=genuine(live_pid)["startTime"] + 5)
    elif case == "renamed-to-another-pid":  # a genuine lease copied under another pid's name
        file = write_lease(tmp_path, path, live_pid, earlier, **genuine(live_pid))
        file.rename(file.with_name(f"{session_key(os.path.realpath(path))}.{os.getpid()}.json"))
    counts = case in ("genuine", "legacy-v1-matching")
    if case == "legacy-v1-matching" and process_identity(live_pid).start_time is None:
        pytest.fail("this platform gives no Linux start time: the legacy lease cannot be checked here")

    book = LeaseBook(tmp_path / "agent")
    assert (book.live(str(path)) is not None) is counts, case
    assert (book.live_leaf(str(path)) == earlier) is counts
    preview = json.loads(run(tmp_path, "preview", str(path), "--json").stdout)
    assert preview["leafId"] == (earlier if counts else file_leaf), case
    # an outside commit: blocked by a live lease only
    before = path.read_bytes()
    out = run(
        tmp_path,
        "compact",
        str(path),
        "--wait",
        "--timeout",
        "3",
        "--quiet-interval",
        "0",
        "--context-window",
        "0",
        "--keep-recent",
        "100",
        "--json",
    )
    if counts:
        assert path.read_bytes() == before, "appended to a session a live Pi holds"
        assert "live Pi" in out.stderr, out.stderr
        status = json.loads(run(tmp_path, "compact-status", str(path), "--json").stdout)
        assert status["heldBy"]["pid"] == live_pid
        assert [h["pid"] for h in status["holders"]] == [live_pid]
    else:
        assert out.returncode == 0, out.stderr
        record = json.loads(out.stdout)["record"]
        assert record["status"] == "committed", record
        assert ids(path)[-1] == record["entryId"]
        added = json.loads(path.read_bytes()[len(before) :])
        assert added["type"] == "compaction" and added["parentId"] == file_leaf, "the forged leaf was used"
        assert not lease_files(tmp_path), "a stale lease is left behind"


def test_ps_gives_the_same_answer_for_the_portable_path(sleeper, other_users_process):
    """The non-Linux path (ps) on a real process: the same user, a stable start token, None
    for a pid that is gone."""
    first = _identity_from_ps(sleeper.pid)
    assert first is not None and first.uid == os.geteuid() and first.start and first.start.startswith("ps:")
    assert _identity_from_ps(sleeper.pid) == first
    other = _identity_from_ps(other_users_process)
    assert other is not None and other.uid != os.geteuid()
    assert _identity_from_ps(dead_pid()) is None


def test_windows_never_signals_a_process(monkeypatch):
    """On Windows os.kill(pid, 0) terminates the process: the identity check must never
    call it there (it asks the process API instead; where that is missing: unknown)."""
    import os

    from fabric_lsp.engine.session import lease

    def no_kill(*_args):
        raise AssertionError("os.kill called on Windows")

    monkeypatch.setattr(os, "kill", no_kill)
    monkeypatch.setattr(lease, "_WINDOWS", True)
    assert lease.process_identity(os.getpid()) is None  # (no kernel32 here: unknown, never killed)
    assert lease._identity_from_kill(os.getpid()) is None
