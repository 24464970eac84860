"""A file read whole hands its lineage's entries to the build from the values the scan
kept, in C where the accelerator is built (`_native.kept_entries`): the same entries and
lines as `_entries_from`'s loop, the same values taken out of `kept`, the scan's id
strings shared the same way, `cancel` asked at the same rows."""

from __future__ import annotations

import json
from array import array

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.memory import entry_rows, source, state_build
from fabric_lsp.engine.memory.source import CONTENT_TYPES, lineage_from_lines, scan_source
from tests.support.examples import profile_examples

pytestmark = pytest.mark.skipif(entry_rows._kept_entries is None, reason="the C accelerator is not built")

_ID = st.sampled_from(["e1", "e2", "e3", "e4", 7, None])
_ROW = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["message", "custom_message", "model_change", "compaction", "label"]),
            "id": _ID,
            "parentId": _ID,
        },
        optional={"message": st.fixed_dictionaries({"role": st.just("user"), "content": st.text(max_size=5)})},
    ),
    st.sampled_from(["not json", "[1, 2]", "null", '{"type": "message"}']),
)


def _session(rows) -> bytes:
    head = json.dumps({"type": "session", "version": 3, "id": "s", "timestamp": "2025-01-01T00:00:00Z", "cwd": "/w"})
    body = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    return ("\n".join([head, *body]) + "\n").encode()


def _run(data: bytes, *, native: bool, lineage: bool, share: bool, every: int):
    kept: dict = {}
    scan = scan_source(data, keep=kept)
    ordinals = lineage_from_lines(scan.lines, "active")[0].ordinals if lineage else None
    asked: list[int] = []

    def cancel() -> None:
        asked.append(len(asked))
        if every and len(asked) >= every:
            raise RuntimeError("cancelled")

    lines = scan.lines
    try:
        if native:
            bits = ordinals.bits if ordinals is not None else None
            got = entry_rows._kept_entries(
                lines.type, lines.ordinal, lines.line, lines.id, lines.parent, bits, kept, CONTENT_TYPES, share, cancel
            )
        else:
            got = list(entry_rows._entries_from(data, 0, lines, ordinals, cancel=cancel, kept=kept, share_ids=share))
    except RuntimeError:
        got = "cancelled"
    shared = (
        [
            (raw.get("id") is lines.id[i], raw.get("parentId") is lines.parent[i])
            for raw, line in got
            for i in [list(lines.line).index(line)]
            if isinstance(raw, dict)
        ]
        if got != "cancelled"
        else None
    )
    return got, sorted(kept), asked, shared


@settings(max_examples=profile_examples(500), deadline=None)
@given(st.lists(_ROW, max_size=12), st.booleans(), st.booleans(), st.sampled_from([0, 1]))
def test_the_entries_taken_in_c_equal_the_python_loop(rows, lineage, share, every):
    data = _session(rows)
    c = _run(data, native=True, lineage=lineage, share=share, every=every)
    python = _run(data, native=False, lineage=lineage, share=share, every=every)
    assert c == python


def test_a_build_of_a_small_file_takes_its_entries_from_c(tmp_path, monkeypatch):
    """A hot and a cold build of a file read whole take the C list, and build the same
    states as with the Python loop."""
    rows = [
        {"type": "message", "id": f"0000000{i}", "parentId": f"0000000{i - 1}" if i else None, "timestamp": i}
        | {"message": {"role": "user", "content": f"hello {i}"}}
        for i in range(6)
    ]
    path = tmp_path / "s.jsonl"
    path.write_bytes(_session(rows))
    from fabric_lsp.engine.memory.config import MemoryConfig

    calls: list[int] = []
    native = entry_rows._kept_entries

    def counting(*args):
        out = native(*args)
        calls.append(len(out))
        return out

    built = {}
    for with_c in (True, False):
        monkeypatch.setattr(entry_rows, "_kept_entries", counting if with_c else None)
        for tier in ("hot", "cold"):
            st_ = state_build.build_state(str(path), "active", tier, MemoryConfig(), ref_id="r", ref_cwd="/w")
            built[(with_c, tier)] = (st_.persisted, st_.coverage, st_.entry_count)
    assert calls == [6, 6]
    assert built[(True, "hot")] == built[(False, "hot")] and built[(True, "cold")] == built[(False, "cold")]


_ODD_LINES = st.sampled_from(
    [
        '{"type": "message", "id": "e9", "parentId": "e1", "message": {"role": "user", "content": "lone \\ud800"}}',
        '{"type": "message", "id": "e8", "parentId": null, "message": {"role": "user", "content": "big 1e999"}, "n": 1e999}',
        '{"type": "message", "id": "e7", "parentId": "e2", "message": {"role": "user", "content": "'
        + "x" * 300
        + '"}}',
    ]
)


@settings(
    max_examples=profile_examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.one_of(_ROW, _ODD_LINES), max_size=12), st.booleans(), st.sampled_from([0, 1]), st.booleans())
def test_a_streamed_chunk_in_c_equals_the_python_loop(monkeypatch, rows, share, every, short_lines):
    """A streamed chunk's entries (`_native.stream_entries`): the same as `_entries_from`
    over the same rows, the msgspec-refused lines (a lone surrogate, a huge number) and the
    lines over the line limit decoded by the Python rules, `cancel` asked at the same rows."""
    data = _session(rows)
    scan = scan_source(data)
    lines = scan.lines
    lineage = lineage_from_lines(lines, "active")[0]
    wanted = array(
        "q",
        (i for i in range(len(lines.type)) if lines.type[i] in CONTENT_TYPES and lines.ordinal[i] in lineage.ordinals),
    )
    limit = 200 if short_lines else source.MAX_LINE_BYTES
    results = []
    for native in (True, False):
        asked: list[int] = []

        def cancel() -> None:
            asked.append(len(asked))
            if every and len(asked) >= every:
                raise RuntimeError("cancelled")

        with monkeypatch.context() as m:
            m.setattr(source, "MAX_LINE_BYTES", limit)
            try:
                if native:
                    got = entry_rows._stream_entries(
                        data, 0, wanted, lines.offset, lines.length, lines.line, lines.id, lines.parent, share,
                        source.whole_decoder.decode, entry_rows._decode_scanned, limit, cancel,
                    )  # fmt: skip
                else:
                    got = list(
                        entry_rows._entries_from(data, 0, lines, None, cancel=cancel, rows=wanted, share_ids=share)
                    )
            except RuntimeError:
                got = "cancelled"
        row_of = {line: row for row, line in enumerate(lines.line)}
        shared = (
            [
                (raw.get("id") is lines.id[row_of[line]], raw.get("parentId") is lines.parent[row_of[line]])
                for raw, line in got
                if isinstance(raw, dict)
            ]
            if got != "cancelled"
            else None
        )
        results.append((repr(got), asked, shared))
    assert results[0] == results[1]
