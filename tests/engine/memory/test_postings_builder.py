"""A hot build gathers its index's postings in C (`HotIndex.building`,
`_native.postings_builder`) and `compact` turns them into the dict: it must be exactly the
dict the per-occurrence adds and `compact_postings` make — the same terms in the same
order, the same postings, an int, a list or an array('Q') alike — whichever way a term
came in (an ASCII text in C, a text with non-ASCII pieces through the tokenizer)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.memory import hot_feed, hot_index
from fabric_lsp.engine.memory.entry_text import Normalizer
from fabric_lsp.engine.memory.file_history import new_collector
from fabric_lsp.engine.memory.hot_index import HotIndex
from fabric_lsp.engine.memory.records import HotRecords
from tests.engine.memory.test_hot_plain import _pi_like
from tests.support.examples import profile_examples

native = pytest.mark.skipif(hot_index._postings_builder is None, reason="the C accelerator is not built")

# Few words, so terms repeat across records (past 8 and 64 postings); an ASCII term also
# arrives as the tokenizer's result of a non-ASCII piece ("ﬁ" is "fi", "ＦＵＬＬ" is "full").
_WORD = st.sampled_from(
    ["fi", "ﬁ", "Fi", "FI", "ﬁne", "fine", "wörd", "word", "x_y", "ＦＵＬＬ", "full", "lone\ud83d", "a1", "Ünï", "z"]
)
_TEXT = st.lists(st.tuples(_WORD, st.sampled_from([" ", "-", ".", "\n", "  "])), max_size=12).map(
    lambda parts: "".join(w + sep for w, sep in parts)
)
_RECORD = st.builds(lambda text, role: {"text": text, "role": role}, _TEXT, st.sampled_from(["user", "assistant"]))


def _index(records, *, gathered: bool) -> HotIndex:
    index = HotIndex().building() if gathered else HotIndex()
    assert (type(index.postings) is not dict) == gathered
    for rec in records:
        index.add(rec)
    index.compact()
    return index


def _shape(postings) -> list:
    return [(term, type(v), v if type(v) is int else list(v)) for term, v in postings.items()]


@native
@settings(max_examples=profile_examples(400), deadline=None)
@given(st.lists(_RECORD, max_size=160), st.lists(_RECORD, max_size=3))
def test_gathered_postings_are_the_dicts(records, tail):
    # (a long run of one record reaches the array packing during the build)
    records = records + tail * 70
    a, b = _index(records, gathered=True), _index(records, gathered=False)
    assert type(a.postings) is dict
    assert _shape(a.postings) == _shape(b.postings)
    assert (a.doc_len, a.seg_starts, a.seg_of, a.total_len) == (b.doc_len, b.seg_starts, b.seg_of, b.total_len)


@native
@settings(max_examples=profile_examples(300), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_pi_like(), max_size=8), st.integers(1, 30))
def test_a_hot_feed_into_gathered_postings_is_the_python_feed(monkeypatch, entries, repeat):
    """`hot_plain` (C) adding to the builder, and the Python feed adding to a dict."""

    def built(c: bool) -> HotIndex:
        norm = Normalizer("/s/f.jsonl", "sid", max_entry_chars=None, index_thinking=True, index_tool_output=True)
        norm.file_ops = new_collector("/w")
        index = HotIndex().building() if c else HotIndex()
        with monkeypatch.context() as m:
            if not c:
                m.setattr(hot_feed, "_hot_plain", None)
            rows = ((copy.deepcopy(e), n) for n, e in enumerate(entries * repeat))
            hot_feed.feed_entries(norm, HotRecords(), index, rows)
        index.compact()
        return index

    assert _shape(built(True).postings) == _shape(built(False).postings)


@native
def test_a_finished_builder_is_empty_and_only_a_builder_finishes():
    from fabric_lsp.engine.native import NATIVE

    builder = NATIVE.postings_builder()
    assert NATIVE.index_text(b"Alpha beta alpha", builder, 5 << 32, hot_index._pack) == 3
    NATIVE.add_counts(builder, {"beta": 2, "wörd": 1}, 6 << 32, hot_index._pack)
    assert NATIVE.finish_postings(builder) == {
        "alpha": 5 << 32 | 2,
        "beta": [5 << 32 | 1, 6 << 32 | 2],
        "wörd": 6 << 32 | 1,
    }
    assert NATIVE.finish_postings(builder) == {}
    with pytest.raises(TypeError, match="postings_builder"):
        NATIVE.finish_postings({})
    with pytest.raises(TypeError, match="not a str"):
        NATIVE.add_counts(builder, {b"bytes": 1}, 0, hot_index._pack)


@native
def test_a_hot_build_leaves_a_dict(tmp_path):
    """`build_state` compacts the gathered postings before anything reads or pickles them."""
    from fabric_lsp.engine.memory.config import MemoryConfig
    from fabric_lsp.engine.memory.state_build import build_state

    session = tmp_path / "s.jsonl"
    lines = [
        '{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}',
        *(
            f'{{"type":"message","id":"{i:08x}","parentId":{"null" if i == 1 else f"{chr(34)}{i - 1:08x}{chr(34)}"},'
            f'"timestamp":"2026-01-01T00:00:0{i % 10}.000Z","message":{{"role":"user","content":"fix the parser {i}",'
            f'"timestamp":1767225600000}}}}'
            for i in range(1, 13)
        ),
    ]
    session.write_text("\n".join(lines) + "\n")
    state = build_state(str(session), "active", "hot", MemoryConfig(), ref_id="s1", ref_cwd="/w")
    postings = state.hot_index.postings
    assert type(postings) is dict
    assert type(postings["parser"]).__name__ == "array" and len(postings["parser"]) == 12
    assert postings["1"] == 0 << 32 | 1


@native
def test_gathered_postings_grow_past_their_first_tables():
    """Thousands of distinct terms (the builder's table starts at 1,024 cells) and records
    of hundreds of distinct pieces (a record's counts start at 256): the same dict."""
    words = [" ".join(f"w{(r * 37 + k) % 5000}x{k % 3}" for k in range(400)) for r in range(40)]
    records = [{"text": f"{w} {w}", "role": "user"} for w in words]  # (each piece counted twice)
    records.append({"text": "ﬁne " + " ".join(f"w{k}x0" for k in range(300)), "role": "assistant"})
    a, b = _index(records, gathered=True), _index(records, gathered=False)
    assert len(a.postings) > 5000
    assert _shape(a.postings) == _shape(b.postings)
