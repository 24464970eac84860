"""Reader behaviour on odd input, and property tests: garbage never raises and every
line is accounted for."""

from __future__ import annotations

import io
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.session import (
    INVALID_PARENT_GRAPH,
    SessionTree,
    iter_session,
    parse_session_bytes,
    read_session,
)
from tests.support.examples import profile_examples

HEADER = b'{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}\n'


def entry(eid: str, parent: str | None, text: str = "hi") -> bytes:
    import json

    return (
        json.dumps(
            {
                "type": "message",
                "id": eid,
                "parentId": parent,
                "timestamp": "t",
                "message": {"role": "user", "content": text},
            }
        )
        + "\n"
    ).encode()


def accounted(log) -> bool:
    s = log.stats
    return s.lines == s.header + s.entries + s.blank + s.malformed + s.oversize + s.non_object


def test_partial_last_line_is_not_an_entry() -> None:
    data = HEADER + entry("a", None) + entry("b", "a")[:-9]
    log = parse_session_bytes(data)
    assert [r.id for r in log.records] == ["a"]
    assert log.stats.partial_tail_bytes == len(entry("b", "a")) - 9
    assert log.size == len(HEADER + entry("a", None))


def test_malformed_blank_oversize_and_no_id_are_counted() -> None:
    big = entry("c", "b", "x" * 5000)
    data = (
        HEADER
        + b"not json\n"
        + b"   \n"
        + entry("a", None)
        + b'{"type":"message"}\n'
        + b"[1,2]\n"
        + entry("b", "a")
        + big
    )
    log = parse_session_bytes(data, max_line_bytes=1000)
    s = log.stats
    assert (s.malformed, s.blank, s.oversize, s.no_id, s.non_object) == (1, 1, 1, 1, 1)
    assert accounted(log)
    assert [r.id for r in log.records if r.valid] == ["a", "b"]
    # the raw ordinal counts every non-header JSON line (object or not)
    assert [r.ordinal for r in log.records] == [0, 1, 3]
    assert [r.line for r in log.records] == [3, 4, 6]


def test_oversize_line_is_never_buffered_whole(tmp_path) -> None:
    p = tmp_path / "s.jsonl"
    with open(p, "wb") as fp:
        fp.write(HEADER + entry("a", None))
        fp.write(b'{"type":"message","id":"z","parentId":"a","x":"' + b"y" * (5 << 20) + b'"}\n')
        fp.write(entry("b", "a"))
    log = read_session(p, max_line_bytes=1 << 20)
    assert log.stats.oversize == 1
    assert [r.id for r in log.records] == ["a", "b"]
    assert log.size == p.stat().st_size


def test_incremental_read_continues_numbering(tmp_path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_bytes(HEADER + entry("a", None))
    first = read_session(p)
    with open(p, "ab") as fp:
        fp.write(entry("b", "a") + entry("c", "b"))
    more = read_session(p, start_offset=first.size, start_line=first.stats.lines, start_ordinal=len(first.records))
    full = read_session(p)
    assert [(r.id, r.line, r.offset, r.ordinal) for r in first.records + more.records] == [
        (r.id, r.line, r.offset, r.ordinal) for r in full.records
    ]


def test_first_parsed_line_must_be_a_header() -> None:
    log = parse_session_bytes(entry("a", None) + HEADER)
    assert not log.is_session
    assert parse_session_bytes(b"garbage\n" + HEADER + entry("a", None)).is_session


def test_duplicate_ids_resolve_to_last_record_and_missing_parent_ends_walk() -> None:
    data = (
        HEADER
        + entry("a", None, "one")
        + entry("b", "a")
        + entry("a", None, "two")
        + entry("c", "gone")
        + entry("d", "c")
    )
    tree = SessionTree.from_records(parse_session_bytes(data).records)
    assert tree.by_id["a"].raw["message"]["content"] == "two"
    assert tree.leaf_id == "d"
    assert [r.id for r in tree.branch().entries] == ["c", "d"]
    assert [r.id for r in tree.branch("b").entries] == ["a", "b"]
    assert tree.branch("unknown").leaf_id == "d"  # Pi falls back to the last entry


def test_parent_cycle_is_reported_not_looped() -> None:
    data = HEADER + entry("a", "c") + entry("b", "a") + entry("c", "b")
    tree = SessionTree.from_records(parse_session_bytes(data).records)
    branch = tree.branch()
    assert branch.error == INVALID_PARENT_GRAPH
    assert [r.id for r in branch.entries] == ["a", "b", "c"]
    assert tree.error == INVALID_PARENT_GRAPH
    assert tree.cycle_ids() == {"a", "b", "c"}


def test_non_utf8_and_lone_surrogate_lines_parse_like_javascript() -> None:
    data = HEADER + b'{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"\\ud800 \xff"}}\n'
    log = parse_session_bytes(data)
    assert log.records[0].raw["message"]["content"] == "\ud800 \ufffd"


line = st.one_of(
    st.binary(max_size=80).filter(lambda b: b"\n" not in b),
    st.sampled_from(
        [
            HEADER.rstrip(b"\n"),
            entry("a", None).rstrip(b"\n"),
            entry("b", "a").rstrip(b"\n"),
            b"{}",
            b"null",
            b'{"id":5}',
            b'{"type":"message","id":"x","parentId":"x"}',
            b"   ",
        ]
    ),
)


@settings(max_examples=profile_examples(300), deadline=None)
@given(
    st.lists(line, max_size=30),
    st.binary(max_size=40).filter(lambda b: b"\n" not in b),
    st.integers(16, 200),
    st.integers(1, 64),
)
def test_garbage_never_raises_and_every_line_is_accounted_for(lines, tail, max_line, chunk) -> None:
    data = b"\n".join(lines) + (b"\n" if lines else b"") + tail
    log = parse_session_bytes(data, max_line_bytes=max_line)
    assert accounted(log)
    assert log.stats.lines == len(lines)
    assert log.stats.partial_tail_bytes == len(tail)
    assert log.size == len(data) - len(tail)
    tree = SessionTree.from_records(log.records)
    for b in tree.all_branches() + [tree.branch()]:
        assert len(b.entries) <= len(log.records)
    # streaming from a file object gives the same result in small chunks too
    items = list(iter_session(io.BytesIO(data), max_line_bytes=max_line, chunk_size=chunk))
    streamed = [(i.line, i.offset, i.length, i.raw) for i in items if not isinstance(i, dict)]
    assert streamed == [(r.line, r.offset, r.length, r.raw) for r in log.records]


@settings(max_examples=profile_examples(200), deadline=None)
@given(st.binary(max_size=2000))
def test_random_bytes_never_raise(data) -> None:
    log = parse_session_bytes(data)
    assert accounted(log)
    SessionTree.from_records(log.records).branch()


def _max_depth(value) -> int:
    """The nesting depth of arrays/objects (a scalar: 0), by the definition."""
    best, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            kids = list(node.values())
        elif isinstance(node, list):
            kids = node
        else:
            continue
        best = max(best, depth)
        stack.extend((k, depth + 1) for k in kids)
    return best


def _nest(depth: int, leaf, as_list: bool):
    value = leaf
    for i in range(depth):
        value = [value] if (as_list and i % 2) or not as_list and i % 3 == 0 else {"k": value}
    return value


@settings(max_examples=profile_examples(200), deadline=None)
@given(
    depth=st.integers(0, 40),
    limit=st.integers(1, 30),
    pad=st.integers(0, 9000),
    brackets=st.booleans(),
    as_list=st.booleans(),
    siblings=st.integers(0, 300),
)
def test_json_depth_check_equals_the_definition(depth, limit, pad, brackets, as_list, siblings):
    """Long lines are judged by a bounded walk of the value, short ones by counting
    brackets first: both say exactly whether the value nests deeper than the limit."""
    from fabric_lsp.engine.session.reader import exceeds_json_depth

    text = ("[{" if brackets else "ab") * (pad // 2)  # brackets inside a string count for nothing
    value = {"t": text, "v": _nest(depth, "x", as_list), "s": [[i] for i in range(siblings)]}
    line = json.dumps(value, separators=(",", ":"))
    expected = _max_depth(value) > limit
    assert exceeds_json_depth(line, value, limit) == expected
    assert exceeds_json_depth(line.encode(), value, limit) == expected
