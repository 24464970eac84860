"""The rows a push sends, as COPY payloads.

Entries and segments go in COPY's text format. Postings go in COPY's binary format
(https://www.postgresql.org/docs/current/sql-copy.html, "Binary Format"): a session has
hundreds of thousands of posting numbers, and both sides spend far less on 4-byte
big-endian integers than on decimal text (formatting them here, `array_in` parsing them
in the server). The numbers are moved with array operations, not one by one in Python:
a term's postings are packed `(position << 32) | tf` (`hot_index.HotIndex`), so their
big-endian bytes are the position's and the term frequency's, side by side.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import Any, cast

from fabric_lsp.engine.memory.hot_index import HotIndex
from fabric_lsp.engine.native import NATIVE

# COPY binary: signature, flags, header extension length; and the trailer
BINARY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
BINARY_TRAILER = b"\xff\xff"
INT4_OID = 23
POSTINGS_COLUMNS = 7  # skey, term, gen, pos, tf, dl, seg

_LITTLE = sys.byteorder == "little"
# the native 32-bit unit whose bytes are a big-endian 4 (an array element's length)
_FOUR = int.from_bytes(b"\x00\x00\x00\x04", sys.byteorder)
# an int4[] field: length, ndim, flags, element type, size, lower bound
_ARRAY_HEAD = struct.Struct(">iiiiii")
_I32 = struct.Struct(">i")
ARRAYS_OK = array("I").itemsize == 4 and array("Q").itemsize == 8
_gather_u32 = getattr(NATIVE, "gather_u32", None)  # (the optional C accelerator, engine/native.py)


def copy_text(value: str) -> str:
    """A value in COPY's text format (backslash, tab, newline and CR escaped)."""
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        value = value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return value


def _int_array(values: Sequence[int]) -> str:
    return "{" + ",".join(map(str, values)) + "}"


def _postings_lists(index: HotIndex, start: int) -> Iterator[tuple[str, array[int]]]:
    """(term, packed postings of the entries at or after `start`), in term order (code
    point order, the database's C collation: each session's rows then extend its primary
    key (skey, term, gen) at the right and sweep the term index once)."""
    cut = start << 32
    postings: dict[str, Any] = index.postings  # Any: `type(...) is` does not narrow the union
    for term in sorted(postings):
        plist = postings[term]
        if type(plist) is int:
            if plist >= cut:
                yield term, array("Q", (plist,))
            continue
        packed = cast("array[int]", plist) if type(plist) is array else array("Q", cast("list[int]", plist))
        if start:
            at = bisect_left(packed, cut)
            if at == len(packed):
                continue
            packed = packed[at:]
        yield term, packed


def postings_text(index: HotIndex, start: int, skey: str, gen: int) -> tuple[bytes, int]:
    """The posting rows of the entries at or after `start` in COPY text format (the
    reference encoding, used where array items are not 4 and 8 bytes wide);
    (payload, rows)."""
    dl, seg_of = index.doc_len, index.seg_of
    rows: list[str] = []
    for term, packed in _postings_lists(index, start):
        pos = [p >> 32 for p in packed]
        tf = [p & 0xFFFFFFFF for p in packed]
        rows.append(
            f"{skey}\t{copy_text(term)}\t{gen}\t{_int_array(pos)}\t{_int_array(tf)}\t"
            f"{_int_array([dl[i] for i in pos])}\t{_int_array([seg_of[i] for i in pos])}\n"
        )
    return "".join(rows).encode("utf-8"), len(rows)


def _gather(values: array[int], at: array[int]) -> array[int]:
    """values[i] for each i of `at` (both array('I'))."""
    if _gather_u32 is not None and values.itemsize == 4 and at.itemsize == 4:
        out = array("I")
        out.frombytes(_gather_u32(values, at))
        return out
    if not at:
        return array("I")
    got: Any = itemgetter(*at)(values)
    return array("I", got if len(at) > 1 else (got,))


def _pairs(col: array[int]) -> memoryview:
    """`col` as int4[] elements: each a big-endian length 4, then the big-endian value."""
    if _LITTLE:
        col.byteswap()
    pairs = array("I", (_FOUR,)) * (2 * len(col))
    pairs[1::2] = col
    return memoryview(pairs).cast("B")


def postings_binary(index: HotIndex, start: int, skey: bytes, gen: int) -> tuple[bytes, int]:
    """The same rows as `postings_text`, in COPY binary format (header and trailer
    included; b"" for no rows); (payload, rows). `skey`: the session key's 16 bytes.

    Every term's postings are laid end to end first, so that splitting the packed
    numbers, looking up entry lengths and segments, and byte-swapping are a few array
    operations over the whole session; each row then takes its slices."""
    dl, seg_of = index.doc_len, index.seg_of
    terms: list[str] = []
    ends: list[int] = []
    packed_all = array("Q")
    for term, packed in _postings_lists(index, start):
        terms.append(term)
        packed_all += packed
        ends.append(len(packed_all))
    if not terms:
        return b"", 0
    units = array("I")
    units.frombytes(packed_all.tobytes())  # per posting: tf, position (little-endian)
    pos = units[1::2] if _LITTLE else units[0::2]
    tf = units[0::2] if _LITTLE else units[1::2]
    dl_all, seg_all = _gather(dl, pos), _gather(seg_of, pos)
    columns = [_pairs(col) for col in (pos, tf, dl_all, seg_all)]
    lead = struct.pack(">hi", POSTINGS_COLUMNS, 16) + skey
    gen_field = struct.pack(">ii", 4, gen)
    array_head = _ARRAY_HEAD.pack
    out: list[bytes | memoryview] = [BINARY_HEADER]
    append = out.append
    begin = 0
    for term, end in zip(terms, ends):
        name = term.encode("utf-8")
        n = end - begin
        head = array_head(20 + 8 * n, 1, 0, INT4_OID, n, 1)
        append(lead + _I32.pack(len(name)) + name + gen_field)
        a, b = 8 * begin, 8 * end
        for col in columns:
            append(head)
            append(col[a:b])
        begin = end
    append(BINARY_TRAILER)
    return b"".join(out), len(terms)
