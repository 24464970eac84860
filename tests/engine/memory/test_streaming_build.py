"""A session built streaming (files over SINGLE_PASS_MAX_BYTES: read in chunks twice), or
read whole and scanned before its selected lines are decoded (kept values over
KEPT_VALUES_MAX_BYTES), gives exactly the state the one-pass build gives: the same
persisted record, records, coverage and file operations, whatever the chunk size and
wherever lines break."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memory_kit import REAL_SESSIONS

from fabric_lsp.engine.memory import state, state_build
from fabric_lsp.engine.memory.api import MemoryConfig
from fabric_lsp.engine.memory.state import SourceMissing
from fabric_lsp.engine.memory.state_build import build_state
from tests.support.examples import profile_examples

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "fabric_lsp" / "examples" / "agent" / "sessions").glob("*/*.jsonl"))
REAL = sorted(REAL_SESSIONS.glob("*.jsonl"))


def _build(
    path: Path, tier: str, branches: str, *, stream: bool, chunk: int, monkeypatch, keep: bool = True
) -> state.SessionState:
    monkeypatch.setattr(state_build, "SINGLE_PASS_MAX_BYTES", 0 if stream else 1 << 40)
    monkeypatch.setattr(state_build, "KEPT_VALUES_MAX_BYTES", 1 << 40 if keep else 0)
    monkeypatch.setattr(state_build, "STREAM_CHUNK_BYTES", chunk)
    return build_state(str(path), branches, tier, MemoryConfig(), ref_id="ref", ref_cwd="/ref")


def _facts(state: state.SessionState) -> tuple:
    ops = state.file_ops.ops if state.file_ops is not None else None
    return (
        state.persisted,
        state.entries,
        state.coverage,
        state.entry_count,
        state.source_hash,
        state.lineage.fingerprint,
        state.lineage.ids,
        state.path_ordinals,
        state.session_id,
        state.cwd,
        [tuple(getattr(o, f) for f in o.__struct_fields__) for o in ops] if ops is not None else None,
        [(ln.ordinal, ln.line, ln.offset, ln.length, ln.type, ln.id, ln.parent_id) for ln in state.scan.lines],
        state.scan.ends_complete,
        state.scan.end_offset,
        state.scan.next_line,
        state.scan.next_ordinal,
    )


@pytest.mark.parametrize("tier", ["hot", "cold"])
@pytest.mark.parametrize("branches", ["active", "all"])
@pytest.mark.parametrize("path", REAL + EXAMPLES, ids=lambda p: p.name[:40])
def test_streaming_equals_in_memory(path, tier, branches, monkeypatch):
    whole = _facts(_build(path, tier, branches, stream=False, chunk=1 << 20, monkeypatch=monkeypatch))
    assert _facts(_build(path, tier, branches, stream=False, chunk=1, monkeypatch=monkeypatch, keep=False)) == whole
    for chunk in (1, 97, 4096):
        assert _facts(_build(path, tier, branches, stream=True, chunk=chunk, monkeypatch=monkeypatch)) == whole


lines_st = st.lists(
    st.one_of(
        st.sampled_from(
            [
                {"type": "session", "version": 3, "id": "s-1", "cwd": "/w", "timestamp": "2025-01-01T00:00:00.000Z"},
                {
                    "type": "message",
                    "id": "a1",
                    "parentId": None,
                    "timestamp": "2025-01-01T00:00:01.000Z",
                    "message": {"role": "user", "content": "parse epoch please"},
                },
                {
                    "type": "message",
                    "id": "a2",
                    "parentId": "a1",
                    "timestamp": "2025-01-01T00:00:02.000Z",
                    "message": {
                        "role": "assistant",
                        "content": [
                            {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "src/x.py"}}
                        ],
                    },
                },
                {
                    "type": "message",
                    "id": "a3",
                    "parentId": "a2",
                    "timestamp": "2025-01-01T00:00:03.000Z",
                    "message": {
                        "role": "toolResult",
                        "toolCallId": "c1",
                        "toolName": "read",
                        "content": [{"type": "text", "text": "def epoch(): ü" * 30}],
                        "isError": False,
                    },
                },
                {"type": "message", "id": "b2", "parentId": "a1", "message": {"role": "user", "content": "branch"}},
            ]
        ).map(json.dumps),
        st.sampled_from(["", "   ", "not json", "[1,2]", '{"type":"message"', "[" * 600 + "]" * 600]),
    ),
    max_size=14,
)


@settings(max_examples=profile_examples(120), deadline=None)
@given(lines_st, st.booleans(), st.integers(min_value=1, max_value=300), st.sampled_from(["hot", "cold"]))
def test_streaming_equals_in_memory_on_odd_files(tmp_path_factory, lines, trailing_newline, chunk, tier):
    path = tmp_path_factory.mktemp("s") / "x.jsonl"
    text = "\n".join(lines) + ("\n" if trailing_newline and lines else "")
    path.write_bytes(text.encode("utf-8"))
    mp = pytest.MonkeyPatch()
    try:

        def facts(stream: bool, size: int, keep: bool = True):
            try:
                return _facts(_build(path, tier, "active", stream=stream, chunk=size, monkeypatch=mp, keep=keep))
            except SourceMissing as missing:
                return ("missing", missing.reason)

        assert facts(True, chunk) == facts(False, 1 << 20) == facts(False, 1 << 20, keep=False)
    finally:
        mp.undo()


@settings(max_examples=profile_examples(200), deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=5000), max_size=300),
    st.lists(st.one_of(st.integers(min_value=-3, max_value=5100), st.none(), st.text(max_size=2)), max_size=50),
)
def test_ordinal_bitmap_answers_membership_like_a_set(ordinals, probes):
    from fabric_lsp.engine.memory.source import OrdinalSet

    bitmap, plain = OrdinalSet(ordinals), set(ordinals)
    assert len(bitmap) == len(plain) and sorted(bitmap) == sorted(plain) and bitmap == plain
    for probe in probes + ordinals:
        assert (probe in bitmap) == (probe in plain)


def test_one_pass_takes_a_file_whose_kept_values_fit_the_budget():
    """`single_pass`: read whole up to SINGLE_PASS_MAX_BYTES, decoded in one pass when its
    estimated kept values (2.2 times the bytes, 2.2 KB per line) fit KEPT_VALUES_MAX_BYTES."""
    budget = state_build.KEPT_VALUES_MAX_BYTES
    lines = 8000
    fits = (budget - lines * 2200) * 10 // 22  # the largest size of `lines` lines within budget
    assert fits <= state_build.SINGLE_PASS_MAX_BYTES
    data = (b"x" * (fits // lines - 1) + b"\n") * lines
    data += b"x" * (fits - len(data))
    assert len(data) == fits and state_build.single_pass(data)
    assert not state_build.single_pass(data + b"x" * 10)
    assert not state_build.single_pass(data[:-1] + b"\n\n")  # one line more
    assert state_build.single_pass(b"") and not state_build.single_pass(b"\n" * (budget // 2200 + 1))
