"""The push's COPY payloads (engine/team/copy_rows.py, push.RecordEncoder): the binary
posting rows carry exactly the numbers of the text rows (read back with a COPY binary
reader written here from PostgreSQL's documented format), for any postings shape
(one bare int, a list, an 8-byte array) and any first new entry; a record loses its
session file and id exactly as encoding it without them would."""

from __future__ import annotations

import re
import struct
import uuid
from array import array
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.memory.hot_index import HotIndex
from fabric_lsp.engine.team import copy_rows
from fabric_lsp.engine.team.prepare import RecordEncoder, decode_record

SKEY = uuid.UUID("0123456789abcdef0123456789abcdef")


def _read_int4_array(data: bytes) -> list[int]:
    ndim, flags, oid = struct.unpack_from(">iii", data, 0)
    assert (ndim, flags, oid) == (1, 0, 23)
    n, lbound = struct.unpack_from(">ii", data, 12)
    assert lbound == 1
    out, at = [], 20
    for _ in range(n):
        length, value = struct.unpack_from(">ii", data, at)
        assert length == 4
        out.append(value)
        at += 8
    assert at == len(data)
    return out


def read_binary(payload: bytes) -> list[tuple[Any, ...]]:
    """Rows of a COPY binary payload of the postings columns."""
    assert payload.startswith(b"PGCOPY\n\xff\r\n\x00")
    flags, ext = struct.unpack_from(">ii", payload, 11)
    assert (flags, ext) == (0, 0)
    at, rows = 19, []
    while True:
        (fields,) = struct.unpack_from(">h", payload, at)
        at += 2
        if fields == -1:
            break
        assert fields == 7
        values = []
        for _ in range(fields):
            (length,) = struct.unpack_from(">i", payload, at)
            at += 4
            values.append(payload[at : at + length])
            at += length
        skey, term, gen, *arrays = values
        rows.append(
            (
                str(uuid.UUID(bytes=skey)),
                term.decode("utf-8"),
                struct.unpack(">i", gen)[0],
                *(_read_int4_array(a) for a in arrays),
            )
        )
    assert at == len(payload)
    return rows


def read_text(payload: bytes) -> list[tuple[Any, ...]]:
    def unescape(v: str) -> str:
        return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n", "r": "\r"}.get(m[1], m[1]), v)

    def ints(v: str) -> list[int]:
        return [int(x) for x in v[1:-1].split(",")]

    rows = []
    for line in payload.decode("utf-8").split("\n")[:-1]:
        skey, term, gen, *arrays = line.split("\t")
        rows.append((skey, unescape(term), int(gen), *(ints(a) for a in arrays)))
    return rows


terms = st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=6)


@st.composite
def indexes(draw: Any) -> tuple[HotIndex, int]:
    n = draw(st.integers(1, 40))
    index = HotIndex()
    index.doc_len = array("I", draw(st.lists(st.integers(1, 2**31 - 1), min_size=n, max_size=n)))
    index.seg_of = array("I", sorted(draw(st.lists(st.integers(0, n), min_size=n, max_size=n))))
    for term in draw(st.sets(terms, max_size=12)):
        at = sorted(draw(st.sets(st.integers(0, n - 1), min_size=1)))
        packed = [i << 32 | draw(st.integers(1, 2**31 - 1)) for i in at]
        shape = draw(st.sampled_from(("int", "list", "array")))
        if shape == "int" or len(packed) == 1:
            index.postings[term] = packed[0] if shape == "int" else packed
        else:
            index.postings[term] = packed if shape == "list" else array("Q", packed)
    return index, draw(st.integers(0, n))


@settings(max_examples=300, deadline=None)
@given(indexes(), st.integers(0, 2**31 - 1))
def test_binary_rows_equal_text_rows(made: tuple[HotIndex, int], gen: int) -> None:
    index, start = made
    text, n_text = copy_rows.postings_text(index, start, str(SKEY), gen)
    binary, n_binary = copy_rows.postings_binary(index, start, SKEY.bytes, gen)
    rows = read_text(text)
    assert (read_binary(binary) if binary else []) == rows
    assert bool(binary) == bool(rows)  # no rows: nothing to copy
    assert n_text == n_binary == len(rows)
    # what the rows must say: each term's postings of the entries at or after `start`
    want = []
    for term in sorted(index.postings):
        plist = index.postings[term]
        got = [p for p in ([plist] if type(plist) is int else plist) if p >> 32 >= start]
        if got:
            pos = [p >> 32 for p in got]
            tf = [p & 0xFFFFFFFF for p in got]
            want.append(
                (str(SKEY), term, gen, pos, tf, [index.doc_len[i] for i in pos], [index.seg_of[i] for i in pos])
            )
    assert rows == want


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    st.text(),
    st.text(),
    st.sampled_from(("own", "other file", "other id", "no lead", "swapped")),
    st.dictionaries(st.text(max_size=8).filter(lambda k: k not in ("sessionFile", "sessionId")), json_values),
)
def test_record_encoder_cuts_exactly_the_session_fields(file: str, sid: str, kind: str, rest: dict[str, Any]) -> None:
    if kind == "own":
        rec = {"sessionFile": file, "sessionId": sid, **rest}
    elif kind == "other file":
        rec = {"sessionFile": file + "x", "sessionId": sid, **rest}
    elif kind == "other id":
        rec = {"sessionFile": file, "sessionId": sid + "x", **rest}
    elif kind == "swapped":
        rec = {"sessionId": sid, "sessionFile": file, **rest}
    else:
        rec = dict(rest)
    data = RecordEncoder(file, sid)(rec)
    enc = msgspec.json.encode
    assert data == (enc(rest) if kind == "own" else enc([rec]))
    assert decode_record(data, file, sid) == rec


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), max_size=50), st.data())
def test_gather_is_the_python_lookup(values: list[int], data: Any) -> None:
    """`copy_rows._gather` (through the C accelerator's gather_u32 where it is built)
    gives values[i] for each i, as the Python lookup does; a position out of range is an
    IndexError either way."""
    vals = array("I", values)
    at = array("I", data.draw(st.lists(st.integers(0, max(0, len(values) - 1)), max_size=60)) if values else [])
    fast = copy_rows._gather(vals, at)
    assert list(fast) == [values[i] for i in at]
    native = copy_rows._gather_u32
    try:
        copy_rows._gather_u32 = None
        assert copy_rows._gather(vals, at) == fast
    finally:
        copy_rows._gather_u32 = native
    if native is not None:
        try:
            native(vals, array("I", [len(values)]))
        except IndexError:
            pass
        else:
            raise AssertionError("an out-of-range position was read")
