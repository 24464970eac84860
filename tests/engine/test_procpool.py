"""engine/procpool.py with real child interpreters: results and events come back, a cancel
stops the task in the child (or the child is replaced when it does not stop), exceptions
keep their type and message, a dying child is replaced, and a pool whose children cannot
start computes in the calling process (and says why)."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from fabric_lsp.engine import procpool
from fabric_lsp.engine.activity import Cancelled, CancelToken, ProgressEvent
from fabric_lsp.engine.procpool import ProcessPool, WorkerDied

TASKS_DIR = Path(__file__).parent / "procpool_child"
DISPATCH = "pool_test_tasks:run"


@pytest.fixture
def pool(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(TASKS_DIR) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = ProcessPool(DISPATCH, size=2)
    yield p
    p.close()


def test_results_and_events_come_from_a_child(pool):
    events = []
    got = pool.run("echo", {"x": [1, 2.5, "\ud800"]}, None, events.append)
    assert got["kwargs"] == {"x": [1, 2.5, "\ud800"]}  # a lone surrogate survives the trip
    assert got["pid"] != os.getpid() and pool.pids() == [got["pid"]]
    assert events == [ProgressEvent(message="echo", percentage=50)]  # typed, across the pipe
    again = pool.run("echo", {}, None, None)
    assert again["pid"] == got["pid"]  # the child stays


def test_exceptions_keep_their_type_and_message(pool):
    with pytest.raises(ValueError) as bad:
        pool.run("value_error", {}, None, None)
    assert str(bad.value) == "bad value"  # the message the server answers with
    assert "in the worker process" in bad.value.__notes__[0]  # the child's traceback, for the log
    with pytest.raises(procpool.RemoteError) as err:
        pool.run("unpicklable", {}, None, None)
    assert type(err.value).__name__ == "Unpicklable" and str(err.value) == "unpicklable: detail"
    with pytest.raises(KeyError):
        pool.run("nothing", {}, None, None)
    assert len(pool.pids()) == 1  # errors are answers: the child is kept


def test_a_cancel_stops_the_task_in_the_child(pool):
    token = CancelToken()
    started = threading.Event()
    out: list[BaseException] = []

    def run() -> None:
        try:
            pool.run("spin", {}, token, lambda _e: started.set())
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            out.append(exc)

    t = threading.Thread(target=run)
    t.start()
    assert started.wait(60)
    pid = pool.pids()[0]
    token.cancel()
    t.join(30)
    assert not t.is_alive() and len(out) == 1 and isinstance(out[0], Cancelled)
    assert pool.pids() == [pid]  # it stopped by itself: not killed


def test_a_child_that_ignores_a_cancel_is_replaced(pool, monkeypatch):
    monkeypatch.setattr(procpool, "CANCEL_GRACE_S", 0.2)
    token = CancelToken()
    token.cancel()  # cancelled before it runs: the child is told at once, and ignores it
    with pytest.raises(Cancelled):
        pool.run("deaf", {"seconds": 30}, token, None)
    assert pool.pids() == []  # killed
    assert pool.run("echo", {}, None, None)["pid"]  # and a new one serves the next task


def test_a_child_that_dies_is_replaced_then_the_error_is_clear(pool, caplog):
    caplog.set_level(logging.WARNING, "fabric_lsp.procpool")
    with pytest.raises(WorkerDied, match=r"died twice \(exit code 3\)"):
        pool.run("die", {}, None, None)
    assert pool.restarts == 2
    assert "retrying in a new one" in caplog.text
    assert pool.run("echo", {}, None, None)["pid"] not in (None, os.getpid())


def test_without_children_the_caller_computes_and_says_why(monkeypatch, caplog):
    # the child cannot import the tasks (not on its path); this process can
    monkeypatch.syspath_prepend(str(TASKS_DIR))
    monkeypatch.setenv("PYTHONPATH", "")
    caplog.set_level(logging.WARNING, "fabric_lsp.procpool")
    p = ProcessPool(DISPATCH, size=2)
    try:
        got = p.run("echo", {"a": 1}, None, None)
        assert got == {"pid": os.getpid(), "kwargs": {"a": 1}}
        assert p.unavailable and "exited before it was ready" in p.unavailable
        assert "computing in the server process instead" in caplog.text
        assert p.run("echo", {}, None, None)["pid"] == os.getpid()  # no new attempt each time
    finally:
        p.close()
    assert sys.modules["pool_test_tasks"]


def test_a_closed_pool_cancels_instead_of_computing_here(pool):
    token = CancelToken()
    started = threading.Event()
    out: list[BaseException] = []

    def run() -> None:
        try:
            pool.run("spin", {}, token, lambda _e: started.set())
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            out.append(exc)

    t = threading.Thread(target=run)
    t.start()
    assert started.wait(60)
    pool.close()  # the server exits while a task runs: its child is killed
    t.join(30)
    assert not t.is_alive() and len(out) == 1 and isinstance(out[0], Cancelled), out
    with pytest.raises(Cancelled):
        pool.run("echo", {}, None, None)


def test_warm_starts_one_child_that_the_first_task_uses(pool):
    """The server warms the pool at `initialized`: the first task runs in that child, and a
    task arriving while it starts waits for it instead of starting a second one."""
    started = threading.Thread(target=pool.warm)
    started.start()
    got = pool.run("echo", {}, None, None)  # (may arrive while the warm-up child starts)
    started.join(60)
    assert pool.pids() == [got["pid"]]
    pool.warm()  # a child exists: nothing more is started
    assert pool.pids() == [got["pid"]]


def _wait_exit(worker: procpool._Worker) -> int:
    return worker.proc.wait(timeout=30)


def test_a_prestarted_child_is_the_pools_first(monkeypatch):
    """`prestart` (the server calls it before its own imports) starts a child before any
    pool exists; the pool's first task (or its warm-up) adopts that very child, with the
    allocator setting asked for, and no second one is started."""
    monkeypatch.setenv("PYTHONPATH", str(TASKS_DIR) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procpool.prestart(DISPATCH, tuned_alloc=False)
    early = procpool._prestarted[(DISPATCH, False, 0)]
    procpool.prestart(DISPATCH, tuned_alloc=False)  # at most one per dispatch
    assert procpool._prestarted[(DISPATCH, False, 0)] is early
    other = ProcessPool(DISPATCH, size=2)  # the server's setting differs: not this pool's child
    p = ProcessPool(DISPATCH, size=2, tuned_alloc=False)
    try:
        assert other.run("echo", {}, None, None)["pid"] != early.pid
        got = p.run("echo", {}, None, None)
        assert got["pid"] == early.pid and p.pids() == [early.pid]
        assert (DISPATCH, False, 0) not in procpool._prestarted
        with open(f"/proc/{early.pid}/environ", "rb") as fh:
            env = fh.read().split(b"\0")
        assert not any(v.startswith(b"MALLOC_MMAP_THRESHOLD_=") for v in env)  # glibc's own threshold
    finally:
        p.close()
        other.close()
    assert _wait_exit(early) < 0  # killed with its pool


def test_a_prestarted_child_that_died_is_replaced_and_an_unused_one_is_stopped(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(TASKS_DIR) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procpool.prestart(DISPATCH)
    dead = procpool._prestarted[(DISPATCH, True, 0)]
    dead.proc.kill()
    _wait_exit(dead)
    p = ProcessPool(DISPATCH, size=1)
    try:
        got = p.run("echo", {}, None, None)
        assert got["pid"] != dead.pid and p.unavailable is None  # a fresh child, not "unavailable"
    finally:
        p.close()
    procpool.prestart(DISPATCH)
    unused = procpool._prestarted[(DISPATCH, True, 0)]
    ProcessPool(DISPATCH, size=1).close()  # the server exits before its first preview
    assert _wait_exit(unused) < 0 and (DISPATCH, True, 0) not in procpool._prestarted


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_an_idle_child_gives_its_heap_back(monkeypatch):
    """With glibc's own threshold (the preview workers') a task's freed blocks stay in the
    heap as holes; the child trims it after each task (alloc.trim), so an idle child does
    not hold a finished preview's memory."""
    monkeypatch.setenv("PYTHONPATH", str(TASKS_DIR) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = ProcessPool(DISPATCH, size=1, tuned_alloc=False)
    try:
        pid = p.run("echo", {}, None, None)["pid"]
        before = _rss_mb(pid)
        assert p.run("holes", {}, None, None) > 0
        deadline = time.monotonic() + 30
        while _rss_mb(pid) > before + 40 and time.monotonic() < deadline:
            time.sleep(0.05)  # the trim runs right after the answer is sent
        assert _rss_mb(pid) <= before + 40, (before, _rss_mb(pid))  # ~150 MB were allocated
    finally:
        p.close()


def test_the_server_names_preview_tasks_without_importing_the_engine(tmp_path):
    """The language server hands previews to worker processes by name: naming a task
    imports nothing of the preview engine, and `Engines.warm_previews` (run after
    `initialized`, handlers/lifecycle.start_up_chores) imports what the server itself needs
    for a preview — the options resolver, and the engine only when previews run in the
    server (no worker pool)."""
    import subprocess

    script = (
        "import sys, os\n"
        "os.environ['PI_CODING_AGENT_DIR'] = sys.argv[1]\n"
        "from fabric_lsp.engine.compaction.task_names import COMPACTION_PREVIEW\n"
        "from fabric_lsp.config import load_config\n"
        "from fabric_lsp.engine_owner import Engines\n"
        "heavy = ('fabric_lsp.engine.compaction.api', 'fabric_lsp.engine.compaction.options',\n"
        "         'fabric_lsp.engine.compaction.hook')\n"
        "print([m in sys.modules for m in heavy])\n"
        "cfg = load_config()\n"
        "eng = Engines(lambda: cfg)\n"
        "eng.preview_runner = lambda *a: None  # previews in workers\n"
        "eng.warm_previews()\n"
        "print([m in sys.modules for m in heavy])\n"
        "eng.preview_runner = None  # previews here\n"
        "eng.warm_previews()\n"
        "print([m in sys.modules for m in heavy])\n"
    )
    (tmp_path / "agent" / "sessions").mkdir(parents=True)
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "agent")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert out.returncode == 0, out.stderr
    # (the options resolver reads its defaults from compaction/defaults.py: no engine module)
    assert out.stdout.split("\n")[:3] == ["[False, False, False]", "[False, True, False]", "[True, True, True]"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="page faults and RSS from /proc")
def test_a_child_keeps_its_object_arena_reserve(monkeypatch):
    """A pool's `reserve_mb` (the preview workers': preview_workers.RESERVE_MB) is resident
    in each child from its start and serves its first task's small objects: that task
    faults in a fraction of the pages the same task costs a child without a reserve, and
    the reserve stays after the task (alloc.reserve_object_arenas)."""
    monkeypatch.setenv("PYTHONPATH", str(TASKS_DIR) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    plain = ProcessPool(DISPATCH, size=1, tuned_alloc=False)
    reserved = ProcessPool(DISPATCH, size=1, tuned_alloc=False, reserve_mb=32)
    try:
        pid_plain = plain.run("echo", {}, None, None)["pid"]
        pid_reserved = reserved.run("echo", {}, None, None)["pid"]
        assert _rss_mb(pid_reserved) >= _rss_mb(pid_plain) + 24, (_rss_mb(pid_reserved), _rss_mb(pid_plain))
        faults_plain = plain.run("small_churn", {}, None, None)
        faults_reserved = reserved.run("small_churn", {}, None, None)
        assert faults_plain > 5000, faults_plain  # ~28 MB of fresh arenas
        assert faults_reserved < faults_plain / 3, (faults_reserved, faults_plain)
        assert reserved.run("small_churn", {}, None, None) < faults_plain / 3  # still there
    finally:
        plain.close()
        reserved.close()
