"""A hot build's record sink (`state_build.RecordSink`): it sees exactly the records the
state keeps, in order, equal to what `HotRecords` gives back — from the whole-file build
and from the streaming build (the team push encodes its rows from it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from memory_kit import assistant, header, tool_result, user, write_session

from fabric_lsp.commands.examples import write_examples
from fabric_lsp.engine.memory import state_build
from fabric_lsp.engine.memory.config import MemoryConfig


class Sink:
    def __init__(self) -> None:
        self.starts = 0
        self.seen: list[dict[str, Any]] = []

    def start(self) -> None:
        self.starts += 1
        self.seen = []

    def __call__(self, rec: dict[str, Any], /) -> None:
        self.seen.append(dict(rec))


def _sessions(tmp_path: Path) -> list[str]:
    write_examples(tmp_path / "agent")
    cwd = "/home/user/sink"
    rows = [
        header("sink01", cwd),
        user("u1", None, "first words", 1),
        assistant("a1", "u1", [{"type": "text", "text": "answer with a tool"}], 2),
        tool_result("t1", "a1", "call1", "bash", "output\twith\\escapes\nand lines", 3),
        user("u2", "t1", "ünïcödé words", 4),
    ]
    made = write_session(tmp_path / "agent", cwd, "sink01.jsonl", rows, 1_700_000_000)
    return sorted(str(p) for p in (tmp_path / "agent").rglob("*.jsonl")) + [str(made)]


@pytest.mark.parametrize("streaming", [False, True])
def test_sink_sees_the_records_the_state_keeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streaming: bool
) -> None:
    if streaming:
        monkeypatch.setattr(state_build, "SINGLE_PASS_MAX_BYTES", 0)  # every file through the streaming build
    cfg = MemoryConfig(hot_sessions=1000)
    total = 0
    for file in _sessions(tmp_path):
        sink = Sink()
        state = state_build.build_state(
            file, "active", "hot", cfg, ref_id="id", ref_cwd="/cwd", encode=False, sink=sink
        )
        assert state.entries is not None
        assert sink.starts == 1
        assert sink.seen == list(state.entries)
        total += len(sink.seen)
    assert total > 100
