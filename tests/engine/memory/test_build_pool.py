"""The builder pool (build_pool.run_batch), which sends a child its next task before the
caller adopts its answer: every task is answered exactly once with its own state, and a
child that dies hands back every task it held and the rest (the caller builds those
itself). Real child processes throughout."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from memory_kit import assistant, header, tool_result, user, write_session

from fabric_lsp.engine.memory import build_pool, disk_cache
from fabric_lsp.engine.memory.cold_index import ColdTermTable, StateTable
from fabric_lsp.engine.memory.config import MemoryConfig
from fabric_lsp.engine.memory.file_history import PackedFileOps
from fabric_lsp.engine.memory.state import SessionState
from fabric_lsp.engine.memory.state_build import build_detached

CWD = "/home/user/pool"


class _ExitOnLoad:
    """Unpickling this in a child ends that child at once (os._exit), mid-batch."""

    def __reduce__(self):
        return (os._exit, (3,))


def _files(tmp_path: Path, n: int) -> list[str]:
    agent = tmp_path / "agent"
    out = []
    for i in range(n):
        rows = [header(f"p{i:02d}", CWD), user(f"u{i}", None, f"pool words session_{i:02d}", 1)]
        out.append(str(write_session(agent, CWD, f"p{i:02d}.jsonl", rows, 1_700_000_000 + i)))
    return out


def _task(file: str) -> build_pool.TaskArgs:
    return (file, "active", "cold", MemoryConfig(), "ref", CWD, None)


def test_every_task_is_answered_once_with_its_own_state(tmp_path: Path):
    files = _files(tmp_path, 9)
    answers: list[tuple[str, str, object]] = []
    failed = build_pool.run_batch(
        ((f, _task(f)) for f in files), 2, lambda key, reply: answers.append((key, *reply)), lambda: None
    )
    assert failed == []
    assert sorted(key for key, _, _ in answers) == sorted(files)
    for key, status, state in answers:
        assert status == "ok" and isinstance(state, SessionState)
        assert state.file == key and state.session_id == f"p{Path(key).stem[1:]}"


def test_a_child_that_dies_fails_every_task_it_held_and_the_rest(tmp_path: Path):
    files = _files(tmp_path, 5)
    tasks = [("dies", (_ExitOnLoad(),))] + [(f, _task(f)) for f in files]
    answers: list[str] = []
    failed = build_pool.run_batch(iter(tasks), 1, lambda key, reply: answers.append(key), lambda: None)
    assert answers == []
    assert sorted(failed) == sorted(["dies", *files])


def test_the_caller_works_between_polls_while_children_build(tmp_path: Path):
    files = _files(tmp_path, 6)
    local = list(range(4))
    done_here: list[int] = []

    def on_idle() -> bool:
        done_here.append(local.pop(0))
        return bool(local)

    answers: list[str] = []
    failed = build_pool.run_batch(
        ((f, _task(f)) for f in files), 2, lambda key, reply: answers.append(key), lambda: None, on_idle=on_idle
    )
    assert failed == [] and sorted(answers) == sorted(files) and done_here == [0, 1, 2, 3]


def test_a_cold_state_from_a_child_is_what_the_server_keeps_of_a_local_build(tmp_path: Path):
    """A child drops the digest's addresses and packs the file table before sending the
    state (less to pickle); adopted, it equals a state built here, and the record on disk
    keeps the addresses."""
    agent = tmp_path / "agent"
    rows = [
        header("fo", CWD),
        user("u1", None, "please read the config", 1),
        assistant(
            "a1", "u1", [{"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "src/config.ts"}}], 2
        ),
        tool_result("t1", "a1", "c1", "read", "export const x = 1", 3),
    ]
    file = str(write_session(agent, CWD, "fo.jsonl", rows, 1_700_000_000))
    index_dir = tmp_path / "index"
    disk_cache.claim_index_dir(str(index_dir), agent_dir=str(agent), session_dir=str(agent / "sessions"))
    replies: list[tuple[str, object]] = []
    task = (file, "active", "cold", MemoryConfig(), "ref", CWD, str(index_dir))
    assert build_pool.run_batch([(file, task)], 1, lambda key, reply: replies.append(reply), lambda: None) == []
    [(status, sent)] = replies
    assert status == "ok" and isinstance(sent, SessionState) and sent.written
    assert sent.digest is not None and "addresses" not in sent.digest and sent.digest["vocabulary"]
    assert isinstance(sent.file_ops, PackedFileOps)
    assert all(sys.intern(p) is p for p in sent.file_ops.paths)  # interned again on arrival
    data = (index_dir / disk_cache.cache_name(file, "active", "digest")).read_bytes()
    record = disk_cache.load_record(data, "digest", len(data))
    assert record is not None and [a[1] for a in record["addresses"]] == ["u1", "a1", "t1"]

    local = build_detached(file, "active", "cold", MemoryConfig(), ref_id="ref", ref_cwd=CWD)
    held_sent, held_local = StateTable(ColdTermTable()), StateTable(ColdTermTable())
    held_sent[(file, "active")] = sent
    held_local[(file, "active")] = local
    assert sent.digest == local.digest
    assert list(sent.digest_view().vocabulary) == list(local.digest_view().vocabulary)
    ops_sent, ops_local = sent.file_ops, local.file_ops
    assert isinstance(ops_local, PackedFileOps)
    assert ops_sent.data == ops_local.data and ops_sent.paths == ops_local.paths
    assert ops_sent.lookup(next(iter(ops_sent.paths))) == ops_local.lookup(next(iter(ops_local.paths)))


def test_replies_of_any_size_arrive_whole_and_in_order():
    """Replies cross the pipe straight into a buffer of their announced size, in pieces
    as small as the pipe gives: sizes around the pipe's capacities and several megabytes."""
    sizes = [0, 1, 7, 8, 9, 65_535, 65_536, 65_537, 1 << 20, (1 << 20) + 1, 5_000_003, 12_345_678]
    got: dict[int, object] = {}

    def on_result(key: int, reply: tuple[str, object]) -> None:
        assert key not in got
        got[key] = reply

    failed = build_pool.run_batch(
        ((i, ("builtins:bytes", (n,))) for i, n in enumerate(sizes)), 2, on_result, lambda: None, calls=True
    )
    assert failed == []
    assert sorted(got) == list(range(len(sizes)))
    for i, n in enumerate(sizes):
        assert got[i] == ("ok", bytes(n))


def test_without_pollable_pipes_the_caller_builds_everything_asking_skip_once(tmp_path: Path, monkeypatch):
    """Where a child's pipe cannot be waited on (Windows), no child is started: every
    session is built by the caller, and `skip` is asked exactly once for each."""
    monkeypatch.setattr(build_pool, "PIPES_POLLABLE", False)
    started: list[object] = []
    monkeypatch.setattr(build_pool, "spawn", lambda *a, **k: started.append(a))
    files = _files(tmp_path, 4)

    class _Ref:
        def __init__(self, file: str) -> None:
            self.file = file

    refs = [(_Ref(f), "cold") for f in files]
    asked: list[str] = []
    built: list[str] = []

    def skip(ref: _Ref, tier: str) -> bool:
        asked.append(ref.file)
        return ref.file == files[1]

    skipped = build_pool.build_split(
        refs,
        [],
        task=lambda ref, tier: _task(ref.file),
        workers=2,
        build_here=lambda ref, tier: built.append(ref.file),
        on_built=lambda ref, tier, state: built.append("from a child: " + ref.file),
        check_cancel=lambda: None,
        skip=skip,
    )
    assert started == []
    assert sorted(asked) == sorted(files)
    assert [r.file for r, _ in skipped] == [files[1]]
    assert sorted(built) == sorted(f for f in files if f != files[1])


@pytest.fixture
def started(monkeypatch) -> list[int]:
    """The pids of the children the pool starts from now on (real ones, counted)."""
    real_spawn = build_pool.spawn
    pids: list[int] = []

    def counting_spawn(*args, **kwargs):
        proc = real_spawn(*args, **kwargs)
        pids.append(proc.pid)
        return proc

    monkeypatch.setattr(build_pool, "spawn", counting_spawn)
    return pids


def test_children_start_only_for_tasks_left_to_build(tmp_path: Path, started: list[int]):
    """A batch whose tasks `skip` leaves out (a call is building them) starts no child; one
    with a single task left starts one child, not `workers`. Real children, counted."""
    files = _files(tmp_path, 5)
    asked: list[str] = []

    def skip_all(key: str) -> bool:
        asked.append(key)
        return True

    answers: list[str] = []
    failed = build_pool.run_batch(
        ((f, _task(f)) for f in files), 2, lambda key, reply: answers.append(key), lambda: None, skip=skip_all
    )
    assert (failed, answers, started) == ([], [], [])
    assert asked == files  # each asked once

    asked.clear()
    failed = build_pool.run_batch(
        ((f, _task(f)) for f in files),
        2,
        lambda key, reply: answers.append(key),
        lambda: None,
        skip=lambda key: asked.append(key) or key != files[3],
    )
    assert failed == [] and answers == [files[3]] and len(started) == 1
    assert asked == files


def test_prestarted_children_serve_the_next_batch_at_its_priority(tmp_path: Path, started: list[int]):
    """`prestart` starts builders ahead of a batch; the next batch takes them instead of
    starting its own (reniced to the batch's priority), and `drop_spares` ends the ones
    nothing took. Real children."""
    try:
        assert build_pool.prestart(2) == 2 and len(started) == 2
        spares = list(build_pool._spares)
        pids = [c.proc.pid for c in spares]
        niceness: list[int] = []

        def on_result(key: str, reply: tuple) -> None:
            niceness.extend(
                os.getpriority(os.PRIO_PROCESS, pid) for pid in pids if spares[pids.index(pid)].proc.poll() is None
            )
            answers.append(key)

        answers: list[str] = []
        files = _files(tmp_path, 4)
        failed = build_pool.run_batch(((f, _task(f)) for f in files), 2, on_result, lambda: None, nice=5)
        assert failed == [] and sorted(answers) == sorted(files)
        assert len(started) == 2  # no child besides the two prestarted ones
        assert niceness and all(n >= 5 for n in niceness)
        assert build_pool._spares == [] and all(c.proc.poll() is not None for c in spares)  # the batch ended them

        assert build_pool.prestart(1) == 1
        left = list(build_pool._spares)
        assert build_pool.drop_spares() == 1 and left[0].proc.poll() is not None and build_pool._spares == []
    finally:
        build_pool.drop_spares()


def test_the_server_prestarts_builders_only_for_a_fresh_enabled_index(tmp_path: Path):
    """`Engines.prestart_builders`: two builders for a fresh index with background indexing
    on; none with it off, with memory disabled, or once the index has its cold-term
    snapshot (a warm restart)."""
    from fabric_lsp.config import load_config
    from fabric_lsp.engine.index_dir import SNAPSHOT_FILE
    from fabric_lsp.engine_owner import Engines

    agent = tmp_path / "agent"
    (agent / "sessions").mkdir(parents=True)
    index = tmp_path / "index"

    def engines(**memory: object) -> Engines:
        opts = {"agentDir": str(agent), "indexDir": str(index), "memory": memory}
        cfg = load_config(init_options=opts, env={})
        return Engines(lambda: cfg)

    try:
        assert engines().prestart_builders() == 0  # background indexing not enabled
        on = engines()
        on.enable_background_index()
        if build_pool.BUILD_WORKERS < 2:
            assert on.prestart_builders() == 0
            return
        assert on.prestart_builders() == 2 and len(build_pool._spares) == 2
        assert build_pool.drop_spares() == 2
        off = engines(enabled=False)
        off.enable_background_index()
        assert off.prestart_builders() == 0
        index.mkdir(exist_ok=True)
        (index / SNAPSHOT_FILE).write_bytes(b"")
        assert on.prestart_builders() == 0 and build_pool._spares == []
    finally:
        build_pool.drop_spares()


def test_a_hot_state_from_a_child_is_sent_without_its_encoded_records_and_appends_as_a_rebuild(tmp_path: Path):
    """A builder writes the shard itself, so the state it sends keeps no encoded record list
    (the bulk of a hot reply); the server's first append encodes the list again, and the
    shard it then writes equals a fresh build's of the grown file."""
    from fabric_lsp.engine.memory.append import try_append
    from fabric_lsp.engine.memory.persist import write_records
    from fabric_lsp.engine.memory.source import stat_key
    from tests.support.sessions import append_rows

    rows = [header("h1", CWD), user("u1", None, "hot words to encode", 1)]
    rows += [
        assistant(f"a{i}", "u1" if i == 0 else f"a{i - 1}", [{"type": "text", "text": f"reply {i}"}], 2 + i)
        for i in range(5)
    ]
    path = write_session(tmp_path / "agent", CWD, "h1.jsonl", rows, 1_700_000_000)
    index, fresh_index = tmp_path / "index", tmp_path / "fresh"
    for d in (index, fresh_index):
        disk_cache.claim_index_dir(str(d), agent_dir=str(tmp_path / "agent"), session_dir=str(tmp_path / "agent"))
    cfg = MemoryConfig()
    state = build_detached(str(path), "active", "hot", cfg, ref_id="h1", ref_cwd=CWD, index_dir=str(index))
    assert state.written and (state.entries_json, state.entries_encoded, state.entries_bytes) == (b"", 0, 0)
    write_records(str(index), state)  # (the server's adoption: clears `written`, writes nothing)

    append_rows(path, [user("u2", "a4", "appended words", 9)])
    key = stat_key(str(path))
    assert key is not None and try_append(state, key, cfg)
    write_records(str(index), state)
    build_detached(str(path), "active", "hot", cfg, ref_id="h1", ref_cwd=CWD, index_dir=str(fresh_index))
    name = disk_cache.cache_name(str(path), "active", "shard")
    assert (index / name).read_bytes() == (fresh_index / name).read_bytes()


def test_builders_start_at_initialize_once_and_end_when_the_settings_do_not_want_them(tmp_path: Path):
    """`initialize` calls `prestart_builders(indexing=True)` (background indexing not yet
    enabled); `initialized` calls it again with the client's settings: no second pair of
    children, and settings that disable memory end the ones no batch took."""
    from fabric_lsp.config import load_config
    from fabric_lsp.engine_owner import Engines

    if build_pool.BUILD_WORKERS < 2:
        pytest.skip("one builder: nothing is prestarted")
    agent = tmp_path / "agent"
    (agent / "sessions").mkdir(parents=True)
    memory: dict[str, object] = {}
    opts = {"agentDir": str(agent), "indexDir": str(tmp_path / "index"), "memory": memory}
    engines = Engines(lambda: load_config(init_options=opts, env={}))
    try:
        assert engines.prestart_builders(indexing=True) == 2 and len(build_pool._spares) == 2
        started = list(build_pool._spares)
        engines.enable_background_index()
        assert engines.prestart_builders() == 0 and build_pool._spares == started  # the same two
        memory["enabled"] = False  # the client's settings turn memory off
        assert engines.prestart_builders() == 0 and build_pool._spares == []
        assert all(c.proc.wait(10) is not None for c in started)
    finally:
        build_pool.drop_spares()
