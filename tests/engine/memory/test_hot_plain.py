"""A hot build's loop (`hot_feed.feed_entries`) feeds the common entries (user, assistant
and tool results other than fabric_exec's, with Pi's 8-hex-digit ids and integer
timestamps) in one C call each (`_native.hot_plain`): it must leave the records, their
index, the normalizer and the file operations exactly as `Normalizer.feed`, `HotRecords.append`
and `HotIndex.add` leave them, for any entry, odd values included."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.memory import hot_feed
from fabric_lsp.engine.memory.entry_text import Normalizer
from fabric_lsp.engine.memory.file_history import new_collector
from fabric_lsp.engine.memory.hot_index import HotIndex
from fabric_lsp.engine.memory.records import HotRecords
from tests.engine.memory.test_normalize_fast_path import _ENTRY, _FILE_ENTRY, _LONG_ENTRY, _PLAIN
from tests.support.examples import profile_examples

native = pytest.mark.skipif(hot_feed._hot_plain is None, reason="the C accelerator is not built")

# Pi's ids (8 lowercase hex digits, which HotRecords packs into integers), and others
_ID = st.sampled_from(["0a1b2c3d", "deadbeef", "0a1b2c3d", "e1", "DEADBEEF", 7, None])
_TS = st.sampled_from(["2026-01-30T12:24:02.668Z", 1_700_000_000_000, 2.5, None, "bad", 1 << 70])
_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["Ünïcode wörds ﬁne", "ＦＵＬＬ width", "lone \ud83d surrogate", "a_b c-d x.py"]),
)


@st.composite
def _pi_like(draw):
    """An entry of the other strategies with Pi's ids, dates and texts most of the time."""
    entry = copy.deepcopy(draw(st.one_of(_PLAIN, _ENTRY, _FILE_ENTRY, _LONG_ENTRY)))
    if isinstance(entry, dict):
        entry["id"] = draw(_ID)
        if draw(st.booleans()):
            entry["parentId"] = draw(_ID)
        entry["timestamp"] = draw(_TS)
        message = entry.get("message")
        if isinstance(message, dict) and draw(st.booleans()):
            message["content"] = draw(
                st.one_of(_TEXT, st.lists(st.builds(lambda t: {"type": "text", "text": t}, _TEXT)))
            )
    return entry


def _built(entries, limit, thinking, tool_output, cwd, *, c: bool, monkeypatch):
    norm = Normalizer(
        "/s/f.jsonl", "sid", max_entry_chars=limit, index_thinking=thinking, index_tool_output=tool_output
    )
    norm.file_ops = new_collector(cwd)
    records, index = HotRecords(), HotIndex()
    with monkeypatch.context() as m:
        if not c:
            m.setattr(hot_feed, "_hot_plain", None)
        hot_feed.feed_entries(norm, records, index, ((copy.deepcopy(e), n) for n, e in enumerate(entries)))
    return norm, records, index


def _same(a, b) -> None:
    (na, ra, ia), (nb, rb, ib) = a, b
    for name in HotRecords.__slots__:
        assert getattr(ra, name) == getattr(rb, name), name
    assert list(ra) == list(rb) and [list(r) for r in ra] == [list(r) for r in rb]  # key order too
    assert (ia.postings, ia.doc_len, ia.seg_starts, ia.seg_of, ia.total_len) == (
        ib.postings,
        ib.doc_len,
        ib.seg_starts,
        ib.seg_of,
        ib.total_len,
    )
    assert (na.reasons, na.next_index, na.entry_ids) == (nb.reasons, nb.next_index, nb.entry_ids)
    fa, fb = na.file_ops, nb.file_ops
    assert (fa.ops, fa.pending, fa.unresolved, fa._version, fa.capped) == (
        fb.ops,
        fb.pending,
        fb.unresolved,
        fb._version,
        fb.capped,
    )


@native
@settings(max_examples=profile_examples(1500), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(_pi_like(), max_size=8),
    st.sampled_from([None, 0, 5, 2000]),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["/w", None, "rel"]),
)
def test_the_native_feed_equals_the_python_feed(monkeypatch, entries, limit, thinking, tool_output, cwd):
    c = _built(entries, limit, thinking, tool_output, cwd, c=True, monkeypatch=monkeypatch)
    python = _built(entries, limit, thinking, tool_output, cwd, c=False, monkeypatch=monkeypatch)
    _same(c, python)


@native
def test_the_native_feed_serves_pi_entries(monkeypatch):
    """Pi's entries take the C path (none reaches `Normalizer.feed`); a custom message, an
    id of another form and a missing timestamp are left to Python; the index and file
    operations come out as the Python steps make them (a non-ASCII text included)."""
    entries = [
        {
            "type": "message",
            "id": "0000000a",
            "parentId": None,
            "timestamp": "2026-01-30T12:24:02.668Z",
            "message": {"role": "user", "content": "Hello wörld, read src/a.py"},
        },
        {
            "type": "message",
            "id": "0000000b",
            "parentId": "0000000a",
            "timestamp": "2026-01-30T12:24:03.000Z",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "reading"},
                    {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "src/a.py"}},
                ],
            },
        },
        {
            "type": "message",
            "id": "0000000c",
            "parentId": "0000000b",
            "timestamp": "2026-01-30T12:24:04.000Z",
            "message": {"role": "toolResult", "toolName": "read", "toolCallId": "c1", "content": "x = 1"},
        },
        {"type": "custom_message", "id": "0000000d", "customType": "x", "content": "note"},
        {"type": "message", "id": "u-1", "timestamp": 5, "message": {"role": "user", "content": "odd id"}},
        {"type": "message", "id": "0000000e", "message": {"role": "user", "content": "no date"}},
    ]
    c = _built(entries, 2000, False, True, "/w", c=True, monkeypatch=monkeypatch)
    python = _built(entries, 2000, False, True, "/w", c=False, monkeypatch=monkeypatch)
    _same(c, python)

    norm = Normalizer("/s/f.jsonl", "sid", max_entry_chars=2000, index_thinking=False, index_tool_output=True)
    norm.file_ops = new_collector("/w")
    fed: list[object] = []
    feed = norm.feed
    monkeypatch.setattr(norm, "feed", lambda raw, line: fed.append(raw) or feed(raw, line))
    records, index = HotRecords(), HotIndex()
    hot_feed.feed_entries(norm, records, index, ((e, n) for n, e in enumerate(entries)))
    assert fed == entries[3:]
    assert len(records) == 6 and records[1]["filesTouched"] == ["src/a.py"]
    assert [(op.path, op.outcome) for op in norm.file_ops.ops] == [("/w/src/a.py", "succeeded")]
    assert index.seg_starts == [0, 4, 5] and "wörld" in index.postings


def test_a_sink_sees_every_record_in_python(monkeypatch):
    """With a sink (a streamed shard), every record passes through Python to reach it."""
    entries = [{"type": "message", "id": "0000000a", "timestamp": 1, "message": {"role": "user", "content": "hi"}}]
    norm = Normalizer("/s/f.jsonl", "sid", max_entry_chars=None, index_thinking=False, index_tool_output=True)
    seen: list[dict] = []

    class Sink:
        def start(self) -> None:  # (the RecordSink protocol)
            pass

        def __call__(self, rec: dict) -> None:
            seen.append(rec)

    records = HotRecords()
    hot_feed.feed_entries(norm, records, HotIndex(), ((e, n) for n, e in enumerate(entries)), Sink())
    assert seen == list(records) and seen[0]["text"] == "hi"


@settings(max_examples=profile_examples(300), deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=4),
        st.one_of(st.integers(0, 1 << 40), st.lists(st.integers(0, 1 << 40), min_size=2, max_size=20)),
        max_size=20,
    )
)
def test_hot_index_compact_in_c_equals_python(postings):
    """`HotIndex.compact` packs lists of more than 8 postings into arrays, in C where the
    accelerator is built: the same postings, types and key order as the Python loop."""
    from fabric_lsp.engine.memory import hot_index

    native = hot_index._compact_postings
    if native is None:
        pytest.skip("the C accelerator is not built")
    a, b = HotIndex(postings=copy.deepcopy(postings)), HotIndex(postings=copy.deepcopy(postings))
    a.compact()
    hot_index._compact_postings = None
    try:
        b.compact()
    finally:
        hot_index._compact_postings = native
    assert list(a.postings) == list(b.postings) == list(postings)
    assert [(type(v), list(v) if not isinstance(v, int) else v) for v in a.postings.values()] == [
        (type(v), list(v) if not isinstance(v, int) else v) for v in b.postings.values()
    ]


@native
@pytest.mark.parametrize("cap", [0, 1, 3])
def test_the_native_feed_caps_file_operations_as_python(monkeypatch, cap):
    """File-tool calls past MAX_FILE_OPERATIONS are dropped and the table marked capped,
    in C as in Python (the bound read when it applies); unresolvable paths are counted."""
    from fabric_lsp.engine.memory import file_history

    monkeypatch.setattr(file_history, "MAX_FILE_OPERATIONS", cap)
    _DATE = "2026-01-30T12:24:02.668Z"
    calls = [
        {"type": "toolCall", "id": f"c{k}", "name": name, "arguments": {"path": path}}
        for k, (name, path) in enumerate([("read", "a.py"), ("edit", "b.py"), ("write", " "), ("read", "a.py")])
    ]
    entries = [
        {"type": "message", "id": "0000000a", "timestamp": _DATE, "message": {"role": "assistant", "content": calls}},
        {
            "type": "message",
            "id": "0000000b",
            "timestamp": _DATE,
            "message": {"role": "toolResult", "toolName": "read", "toolCallId": "c0", "isError": True},
        },
    ]
    fed: list[object] = []
    native = hot_feed._hot_plain
    monkeypatch.setattr(hot_feed, "_hot_plain", lambda raw, line, spec: fed.append(line) or native(raw, line, spec))
    for cwd in ("/w", None):
        c = _built(entries, None, False, True, cwd, c=True, monkeypatch=monkeypatch)
        python = _built(entries, None, False, True, cwd, c=False, monkeypatch=monkeypatch)
        _same(c, python)
        ops = c[0].file_ops
        if cwd is not None:
            assert len(ops.ops) == min(cap, 3) and ops.capped == (cap < 3)
        else:  # relative paths without a cwd: none resolves, each is counted
            assert ops.ops == [] and ops.unresolved == 3 and not ops.capped
    assert fed == [0, 1, 0, 1]  # (both entries took the C path)
