"""Settled-boundary detection on real Pi sessions and on hand-built turns."""

from __future__ import annotations

import os
import shutil

import pytest
from intents_kit import REAL_SESSIONS, age, line, session_writer  # noqa: F401 (fixture)

from fabric_lsp.engine.intents.boundary import ERROR_QUIET_S, finished_turn
from fabric_lsp.engine.session import read_session
from tests.support.wire import WireIntentsService


@pytest.mark.parametrize("path", sorted(REAL_SESSIONS.glob("*.jsonl")), ids=lambda p: p.name[:2])
def test_every_real_session_ends_a_finished_turn(path):
    verdict = finished_turn(read_session(path), 2.0)
    assert verdict.finished, verdict.why
    assert verdict.min_quiet_s == 2.0


def test_real_session_cut_mid_turn_is_not_settled(tmp_path):
    src = REAL_SESSIONS / "01-print-default-tools.jsonl"
    lines = src.read_bytes().splitlines(keepends=True)
    # Drop the final assistant message: the branch now ends with a tool result.
    (tmp_path / "a.jsonl").write_bytes(b"".join(lines[:-1]))
    assert not finished_turn(read_session(tmp_path / "a.jsonl")).finished
    # Drop the tool result too: the assistant waits for tool results (stopReason toolUse).
    (tmp_path / "b.jsonl").write_bytes(b"".join(lines[:-2]))
    verdict = finished_turn(read_session(tmp_path / "b.jsonl"))
    assert not verdict.finished and "toolUse" in verdict.why


def test_user_message_leaf_is_a_turn_in_progress(session_writer):
    s = session_writer()
    s.turn("hi", "hello")
    s.user("next")
    assert not finished_turn(read_session(s.path)).finished


def test_open_tool_call_in_the_last_turn_blocks(session_writer):
    s = session_writer()
    s.user("go")
    s.assistant(stop="toolUse", calls=["c1", "c2"])
    s.tool_result("c1")
    # A (malformed) finished assistant although c2 never got its result.
    s.assistant("done")
    verdict = finished_turn(read_session(s.path))
    assert not verdict.finished and "c2" in verdict.why
    s.tool_result("c2")
    s.assistant("really done")
    assert finished_turn(read_session(s.path)).finished


def test_aborted_assistant_tool_calls_do_not_block(session_writer):
    s = session_writer()
    s.user("go")
    s.assistant(stop="aborted", calls=["c9"])
    assert finished_turn(read_session(s.path)).finished


def test_metadata_after_the_turn_is_skipped(session_writer):
    s = session_writer()
    s.turn("hi", "hello", tools=1)
    s.entry("label", targetId=s.leaf, label="checkpoint")
    s.entry("session_info", name="demo")
    assert finished_turn(read_session(s.path)).finished


def test_error_stop_needs_a_longer_quiet(session_writer):
    s = session_writer()
    s.user("hi")
    s.assistant(stop="error")
    verdict = finished_turn(read_session(s.path), 2.0)
    assert verdict.finished and verdict.min_quiet_s == ERROR_QUIET_S


def test_compaction_leaf_waits_for_the_next_turn(session_writer):
    s = session_writer()
    s.turn("hi", "hello")
    s.entry("compaction", summary="x", firstKeptEntryId="", tokensBefore=5)
    verdict = finished_turn(read_session(s.path))
    assert not verdict.finished and "compaction" in verdict.why
    s.turn("next", "done")
    assert finished_turn(read_session(s.path)).finished


def test_cycle_and_non_session_are_not_settled(tmp_path, session_writer):
    s = session_writer()
    with open(s.path, "ab") as fp:
        fp.write(
            line(
                {
                    "type": "message",
                    "id": "a",
                    "parentId": "b",
                    "timestamp": "t",
                    "message": {"role": "assistant", "content": [], "stopReason": "stop"},
                }
            )
        )
        fp.write(
            line(
                {
                    "type": "message",
                    "id": "b",
                    "parentId": "a",
                    "timestamp": "t",
                    "message": {"role": "assistant", "content": [], "stopReason": "stop"},
                }
            )
        )
    verdict = finished_turn(read_session(s.path))
    assert not verdict.finished and "invalid_parent_graph" in verdict.why
    (tmp_path / "n.jsonl").write_bytes(b'{"type":"message"}\n')
    assert not finished_turn(read_session(tmp_path / "n.jsonl")).finished


def test_settled_needs_the_quiet_interval(tmp_path):
    path = tmp_path / "s.jsonl"
    shutil.copy(REAL_SESSIONS / "01-print-default-tools.jsonl", path)
    service = WireIntentsService(state_dir=tmp_path / "state", quiet_interval_s=30.0)
    os.utime(path)  # just written
    assert service.status(path)["settled"] is False
    age(path, 29.0)
    assert service.is_settled(path) is False
    age(path, 31.0)
    assert service.status(path)["settled"] is True
    with open(path, "ab") as fp:  # a new prompt arrives
        fp.write(
            line(
                {
                    "type": "message",
                    "id": "ffff0001",
                    "parentId": "d3b9c871",
                    "timestamp": "t",
                    "message": {"role": "user", "content": "more", "timestamp": 1},
                }
            )
        )
    age(path, 60.0)
    assert service.is_settled(path) is False


@pytest.mark.parametrize("path", sorted(REAL_SESSIONS.glob("*.jsonl")), ids=lambda p: p.name[:2])
def test_tail_verdict_agrees_with_the_full_parse_on_every_prefix(tmp_path, path):
    from fabric_lsp.engine.intents.boundary import tail_verdict
    from fabric_lsp.engine.session import parse_session_bytes

    lines = path.read_bytes().splitlines(keepends=True)
    decided = 0
    for k in range(2, len(lines) + 1):
        data = b"".join(lines[:k])
        full = finished_turn(parse_session_bytes(data), 2.0)
        target = tmp_path / "prefix.jsonl"
        target.write_bytes(data)
        fd = os.open(target, os.O_RDONLY)
        try:
            for window in (512, 2048, 8192):
                tail = tail_verdict(fd, len(data), 2.0, window=window)
                if tail is not None:
                    decided += 1
                    assert (tail.finished, tail.why, tail.leaf_id, tail.min_quiet_s) == (
                        full.finished,
                        full.why,
                        full.leaf_id,
                        full.min_quiet_s,
                    ), (k, window)
        finally:
            os.close(fd)
    assert decided > 0
