"""The builder pool (build_pool.run_batch) with tasks queued ahead in each child: every
task is answered exactly once with its own state, and a child that dies hands back every
task it held (the caller builds those itself). Real child processes throughout."""

from __future__ import annotations

import os
from pathlib import Path

from memory_kit import header, user, write_session

from fabric_lsp.engine.memory import build_pool
from fabric_lsp.engine.memory.config import MemoryConfig
from fabric_lsp.engine.memory.sessions import SessionState

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
    failed = build_pool.run_batch(((f, _task(f)) for f in files), 2,
                                  lambda key, reply: answers.append((key, *reply)), lambda: None)
    assert failed == []
    assert sorted(key for key, _, _ in answers) == sorted(files)
    for key, status, state in answers:
        assert status == "ok" and isinstance(state, SessionState)
        assert state.file == key and state.session_id == f"p{Path(key).stem[1:]}"


def test_a_child_that_dies_fails_every_task_it_held_and_the_rest(tmp_path: Path):
    files = _files(tmp_path, 5)
    assert build_pool.IN_FLIGHT >= 2  # the second task is already queued in the dying child
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
    failed = build_pool.run_batch(((f, _task(f)) for f in files), 2,
                                  lambda key, reply: answers.append(key), lambda: None, on_idle=on_idle)
    assert failed == [] and sorted(answers) == sorted(files) and done_here == [0, 1, 2, 3]
