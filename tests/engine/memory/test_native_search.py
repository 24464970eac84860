"""A hot query's scoring and grouping (memory/search.py) give the same answer with the C
accelerator's `bm25_add` and `segment_keys` as without them, and `group_and_rank` ranks
exactly as sorting every segment and cold pointer by `_item_key` does (the rule the ranked
keys stand for): the same items, scores, totals and order, for any page."""

from __future__ import annotations

from array import array
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.memory import search
from fabric_lsp.engine.memory.hot_index import HotIndex, postings_of
from fabric_lsp.engine.memory.records import HotRecords
from fabric_lsp.engine.memory.search import (
    DigestHit,
    DigestView,
    HotView,
    SegmentItem,
    _item_key,
    bm25_located,
    group_and_rank,
)
from tests.support.examples import profile_examples

try:
    from fabric_lsp.engine import _native
except ImportError:  # pragma: no cover - reported by test_native_tokens.test_the_accelerator_is_built
    _native = None  # type: ignore[assignment]

needs_native = pytest.mark.skipif(_native is None, reason="the C accelerator is not built")

WORDS = ["parse", "epoch", "test", "orbit", "error", "fix", "tle", "leap", "year", "zeta"]
ROLES = ["user", "assistant", "toolResult", "bashExecution", "compaction"]


def _record(i: int, role: str, words: list[str], base: int) -> dict[str, Any]:
    return {
        "sessionFile": "/s/x.jsonl",
        "sessionId": "sid",
        "index": base + i,
        "entryId": f"{i:08x}",
        "parentId": None,
        "type": "message",
        "role": role,
        "toolName": None,
        "text": " ".join(words),
        "timestamp": 1000 + i,
        "isError": False,
        "truncated": False,
        "line": i + 1,
    }


session = st.tuples(
    st.lists(st.tuples(st.sampled_from(ROLES), st.lists(st.sampled_from(WORDS), max_size=6)), min_size=1, max_size=40),
    st.integers(0, 3),  # mtime: ties between sessions are common
    st.integers(0, 5),  # the first record's index (a range slice starts anywhere)
    st.sampled_from(["/p/a.jsonl", "/p/b.jsonl", "/p/é.jsonl", "/p/😀.jsonl"]),
    st.booleans(),  # records as HotRecords (else a list)
)


def _views(sessions: list[Any]) -> list[HotView]:
    views = []
    for n, (rows, mtime, base, name, columns) in enumerate(sessions):
        recs = [_record(i, role, words, base) for i, (role, words) in enumerate(rows)]
        index = HotIndex.build(recs)
        entries: Any = HotRecords(recs) if columns else recs
        views.append(HotView(f"s{n}", f"{name}.{n}", "h", "active", "fp", float(mtime), entries, index))
    return views


def _digests(n: int) -> list[DigestHit]:
    out = []
    for i in range(n):
        view = DigestView(
            f"d{i}", f"/p/c{i % 3}.jsonl.{i}", "h", "active", "fp", "/w", None, float(i % 2), [], frozenset()
        )
        out.append(DigestHit(view, float(i % 4) / 3, ["parse"]))
    return out


def _off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "_bm25_add", None)
    monkeypatch.setattr(search, "_segment_keys_c", None)


def _oracle(views: list[HotView], located: dict[int, dict[int, float]], hits: list[DigestHit]) -> list[Any]:
    """Every segment with a match as its SegmentItem, and every cold hit, sorted by
    `_item_key` (the definition of the global order)."""
    items: list[Any] = []
    for vn, matched in located.items():
        view = views[vn]
        starts = view.index.seg_starts
        for si, start in enumerate(starts):
            end = starts[si + 1] if si + 1 < len(starts) else len(view.entries)
            inside = [matched[p] for p in range(start, end) if p in matched]
            if inside:
                items.append(SegmentItem(view, start, end, max(inside), matched, len(inside)))
    items.extend(hits)
    return sorted(items, key=_item_key)


def _shape(item: Any) -> tuple[Any, ...]:
    if isinstance(item, SegmentItem):
        return ("seg", item.view.session_file, item.start, item.end, item.score, item.matched_count, id(item.matched))
    return ("cold", item.view.session_file, item.score)


@settings(max_examples=profile_examples(150), deadline=None)
@given(
    st.lists(session, min_size=1, max_size=5),
    st.lists(st.sampled_from(WORDS + ["nothing"]), min_size=1, max_size=4),
    st.integers(0, 6),
    st.integers(1, 12),
    st.integers(1, 400),
)
def test_the_ranked_page_is_every_item_sorted_by_its_key(
    sessions: list[Any], terms: list[str], ncold: int, needed: int, limit: int
) -> None:
    views = _views(sessions)
    located, _capped = bm25_located(views, terms, limit=limit)
    hits = _digests(ncold)
    expected = _oracle(views, located, hits)
    for want in (needed, None):
        ranked, total_items, total_matches, segs, capped = group_and_rank(views, located, hits, False, needed=want)
        top = expected if want is None else expected[:want]
        assert [_shape(i) for i in ranked] == [_shape(i) for i in top]
        assert total_items == len(expected)
        assert total_matches == sum(i.matched_count if isinstance(i, SegmentItem) else 1 for i in expected)
        assert segs == sum(1 for i in expected if isinstance(i, SegmentItem))
        assert not capped
    # the item cap keeps the first max_items of the order, and the totals describe them
    cap = max(1, len(expected) // 2)
    ranked, total_items, total_matches, segs, capped = group_and_rank(views, located, hits, False, max_items=cap)
    kept = expected[:cap]
    assert capped == (len(expected) > cap)
    assert [_shape(i) for i in ranked] == [_shape(i) for i in kept]
    assert (total_items, total_matches) == (len(kept), sum(getattr(i, "matched_count", 1) for i in kept))
    assert segs == sum(1 for i in kept if isinstance(i, SegmentItem))


@needs_native
@settings(max_examples=profile_examples(150), deadline=None)
@given(
    st.lists(session, min_size=1, max_size=5),
    st.lists(st.sampled_from(WORDS + ["nothing"]), min_size=1, max_size=4),
    st.integers(1, 400),
    st.integers(1, 12),
)
def test_the_accelerator_scores_and_groups_as_python(
    sessions: list[Any], terms: list[str], limit: int, needed: int
) -> None:
    views = _views(sessions)
    hits = _digests(3)
    with pytest.MonkeyPatch.context() as mp:
        _off(mp)
        py_located, py_capped = bm25_located(views, terms, limit=limit)
        py_ranked = group_and_rank(views, py_located, hits, False, needed=needed)
        py_keys = [search._segment_keys(v, vn, py_located.get(vn, {}), 7) for vn, v in enumerate(views)]
    located, capped = bm25_located(views, terms, limit=limit)
    # the same doubles, the same keys in the same order (dicts compare their items only)
    assert capped == py_capped
    assert [list(m.items()) for m in located.values()] == [list(m.items()) for m in py_located.values()]
    assert list(located) == list(py_located)
    ranked = group_and_rank(views, located, hits, False, needed=needed)
    assert [_shape(i)[:-1] for i in ranked[0]] == [_shape(i)[:-1] for i in py_ranked[0]]
    assert ranked[1:] == py_ranked[1:]
    keys = [search._segment_keys(v, vn, located.get(vn, {}), 7) for vn, v in enumerate(views)]
    assert keys == py_keys


@needs_native
def test_bm25_add_takes_every_postings_form_and_leaves_others_to_python() -> None:
    assert _native is not None
    dl = array("I", [3, 1, 7])
    args = (1.25, 2.2, 0.30000000000000004, 0.9 / 3.5)
    for postings in ((1 << 32) | 2, [(0 << 32) | 1, (2 << 32) | 5], ((1 << 32) | 1,), array("Q", [(2 << 32) | 3, 1])):
        scores: dict[int, float] = {2: 0.5}
        expected = dict(scores)
        for p in postings_of(postings):
            idx, tf = p >> 32, p & 0xFFFFFFFF
            expected[idx] = expected.get(idx, 0.0) + args[0] * (tf * args[1]) / (tf + (args[2] + args[3] * dl[idx]))
        assert _native.bm25_add(scores, postings, dl, *args) is True
        assert list(scores.items()) == list(expected.items())
    # a score that is not a float is added to as Python adds (its own __add__)
    scores = {1: 2}
    assert _native.bm25_add(scores, (1 << 32) | 1, dl, *args) is True
    assert scores == {1: 2 + args[0] * (1 * args[1]) / (1 + (args[2] + args[3] * dl[1]))}
    # not decided here (nothing changed): another doc_len type, a non-float, an unknown form
    scores = {}
    assert _native.bm25_add(scores, [1], [3, 1], *args) is False
    assert _native.bm25_add(scores, [1], dl, 1, 2.2, 0.3, 0.2) is False
    assert _native.bm25_add(scores, {1}, dl, *args) is False
    assert _native.bm25_add(scores, array("I", [1]), dl, *args) is False
    assert scores == {}
    with pytest.raises(IndexError):  # a posting past doc_len, as `dl[idx]` raises
        _native.bm25_add({}, (9 << 32) | 1, dl, *args)


@needs_native
def test_segment_keys_leaves_odd_maps_to_python() -> None:
    assert _native is not None
    seg_of = array("I", [0, 0, 1, 1])
    assert _native.segment_keys({0: 1.0, 3: 2.0, 1: 3.0}, seg_of, [0, 2], -1.0, 10, "f", 4, 3) == [
        (-3.0, -1.0, 0, 10, "f", 3, 4, 0, 2),
        (-2.0, -1.0, 0, 12, "f", 4, 4, 1, 1),
    ]
    for matched in ({0: 1}, {"0": 1.0}, {7: 1.0}, {-1: 1.0}):  # an int score, a str key, out of range
        assert _native.segment_keys(matched, seg_of, [0, 2], -1.0, 0, "f", 0, 0) is None
    assert _native.segment_keys({0: 1.0}, [0, 0], [0], -1.0, 0, "f", 0, 0) is None  # seg_of not array('I')
    assert _native.segment_keys({0: 1.0}, seg_of, [0, 2], -1.0, 1 << 70, "f", 0, 0) is None  # base past int64
