"""Reading one session JSONL source for memory: line scan, header, lineage (digest §3).

The scan decodes only a narrow envelope (`type`, `id`, `parentId`) of each line, so
lineage and ordinals cost little; full records are decoded later only for the lines the
selected branch mode keeps. Positions (`line`, byte `offset`, `length`) are kept so an
appended file can be scanned from where the previous scan stopped.
"""

from __future__ import annotations

import hashlib
import os
import stat as _stat
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from ..jsstr import js_string_of as js_string
from ..jsstr import js_stringify
from ..native import NATIVE
from ..session.reader import DEFAULT_MAX_LINE_BYTES, MAX_JSON_DEPTH
from .json_line import KEPT_DECODE, cut_json, decode_whole, whole_decoder

if TYPE_CHECKING:
    from ..json_types import JsonValue

# A line longer than this (the session reader's limit: it counts such a line `oversize`)
# is never decoded whole by recall, sessions or expand. It is still read, as Pi reads it:
# its JSON is checked in one pass that allocates nothing (`cut_json`), its entry keeps its
# id, parentId and type (so the branch through it stays whole), and only the first
# `json_line.OVERSIZE_CUT_BYTES` of its values are decoded: its texts are cut, each cut text ending
# in `cut_note`, and every such line is named in coverage (`MAX_LINE_BYTES_REASON`).
MAX_LINE_BYTES = DEFAULT_MAX_LINE_BYTES
MAX_LINE_BYTES_REASON = "max_line_bytes"

ALL_FINGERPRINT = "151b50b5d43ace9ebb84edae27b7e5d257f0207df6f0142d4e80dfe72bcdc7e2"
CONTENT_TYPES = frozenset({"message", "compaction", "branch_summary", "custom_message"})
# Pi's entry types (seed 003), shared by every scanned line instead of a string per line
_TYPE_NAMES = {
    t: t for t in (*sorted(CONTENT_TYPES), "custom", "label", "model_change", "session_info", "thinking_level_change")
}


class _Envelope(msgspec.Struct):
    type: Any = None
    id: Any = None
    parentId: Any = None


_envelope_decoder = msgspec.json.Decoder(_Envelope)
# The C line scan (None: no accelerator, or one built from an older source)
_scan_lines: Any = getattr(NATIVE, "scan_lines", None)
# What the C line scan decodes a kept line with (json_line.KEPT_DECODE; None: whole)
_KEPT_DECODE: Any = KEPT_DECODE
# `lineage_from_lines`' loops in C (engine/_native.c), when it is built
_lineage_walk: Any = getattr(NATIVE, "lineage_walk", None)


def decode_json_line(raw: bytes, *, depth_checked: bool = False) -> tuple[bool, Any]:
    """(parsed, value) like `JSON.parse` on one line; never raises. A line nested deeper
    than the session reader's `MAX_JSON_DEPTH` (or one any decoder refuses, recursion
    included) is not parsed, exactly as the session reader counts it malformed.
    `depth_checked`: the line is one `scan_source` kept (every kept line passed the depth
    check), read again; its brackets are not counted a second time.
    A line longer than `MAX_LINE_BYTES` gives its cut value (`cut_json`)."""
    if len(raw) > MAX_LINE_BYTES:
        return cut_json(raw, limit=MAX_LINE_BYTES, depth_checked=depth_checked)
    return decode_whole(raw, depth_checked)


@dataclass(slots=True)
class ScannedLine:
    ordinal: int  # raw ordinal: non-header lines that parse as JSON
    line: int  # 0-based line number in the file
    offset: int
    length: int  # bytes without the newline
    type: Any
    id: Any
    parent_id: Any
    is_node: bool  # string id and null-or-string parentId


class ScanLines:
    """The scanned lines of a session, held column-wise (four integer arrays, a byte of
    node flags and three object lists) instead of one object per line: about a third of
    the memory of a list of `ScannedLine`s, which matters for sessions of hundreds of
    thousands of entries. Reads as a sequence of `ScannedLine` (made on access).
    `oversize`: the line numbers of the lines longer than `MAX_LINE_BYTES` (cut, or not
    JSON at all), which coverage names (`MAX_LINE_BYTES_REASON`)."""

    __slots__ = ("ordinal", "line", "offset", "length", "type", "id", "parent", "node", "oversize")

    def __init__(self) -> None:
        self.ordinal = array("q")
        self.line = array("q")
        self.offset = array("q")
        self.length = array("q")
        self.type: list[Any] = []
        self.id: list[Any] = []
        self.parent: list[Any] = []
        self.node = bytearray()
        self.oversize = array("q")

    def add(
        self, ordinal: int, line: int, offset: int, length: int, *, type: Any, id: Any, parent: Any, is_node: bool
    ) -> None:
        self.ordinal.append(ordinal)
        self.line.append(line)
        self.offset.append(offset)
        self.length.append(length)
        self.type.append(type)
        self.id.append(id)
        self.parent.append(parent)
        self.node.append(1 if is_node else 0)

    def __len__(self) -> int:
        return len(self.ordinal)

    def at(self, i: int) -> ScannedLine:
        return ScannedLine(
            self.ordinal[i],
            self.line[i],
            self.offset[i],
            self.length[i],
            self.type[i],
            self.id[i],
            self.parent[i],
            bool(self.node[i]),
        )

    def __getitem__(self, i: int) -> ScannedLine:
        n = len(self.ordinal)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self.at(i)

    def __iter__(self) -> Iterator[ScannedLine]:
        for i in range(len(self.ordinal)):
            yield self.at(i)

    def __add__(self, other: ScanLines) -> ScanLines:
        out = ScanLines()
        for name in ScanLines.__slots__:
            setattr(out, name, getattr(self, name) + getattr(other, name))
        return out


@dataclass(slots=True)
class SourceScan:
    """Everything the line scan learned; extendable with `scan_more`."""

    lines: ScanLines = field(default_factory=ScanLines)
    header_id: str | None = None  # last `type:"session"` line (normalize's header)
    header_cwd: str | None = None
    first_header_id: str | None = None  # header on line 0 (the session ref's id)
    first_header_cwd: str | None = None
    next_ordinal: int = 0
    next_line: int = 0
    end_offset: int = 0  # byte offset just after the last newline consumed
    ends_complete: bool = True  # the scanned bytes ended with a newline


SCAN_BLOCK_BYTES = 4 * 1024 * 1024


def _pieces(data: bytes, n: int) -> Iterator[tuple[bytes, bool]]:
    """The pieces of `data[:n].split(b"\\n")`, each with whether it is the last one (the
    partial line after the last newline, or b""), split block by block: a large input is
    never held twice over as line objects."""
    pos = 0
    while True:
        end = n
        if n - pos > SCAN_BLOCK_BYTES:
            nl = data.rfind(b"\n", pos, pos + SCAN_BLOCK_BYTES)
            if nl < 0:
                nl = data.find(b"\n", pos + SCAN_BLOCK_BYTES, n)  # one line longer than a block
            if nl >= 0:
                end = nl + 1
        block = data if pos == 0 and end == len(data) else data[pos:end]
        pieces = block.split(b"\n")
        if end < n:
            pieces.pop()  # (the block ends with a newline: an empty piece)
            for raw in pieces:
                yield raw, False
            pos = end
            continue
        last = len(pieces) - 1
        for k, raw in enumerate(pieces):
            yield raw, k == last
        return


def scan_source(
    data: bytes,
    scan: SourceScan | None = None,
    base: int = 0,
    keep: dict[int, Any] | None = None,
    *,
    stop: int | None = None,
) -> SourceScan:
    """Scan `data` (the file bytes from offset `base`; only `data[:stop]` when given) into
    `scan` (or a new one).

    With `keep`, every line is decoded once in full and the values of content-type lines
    are kept by ordinal (the caller normalizes from them instead of decoding again);
    without it only a narrow envelope is decoded.

    A trailing segment without a newline is parsed like the reference (JSON.parse of the
    last split piece) but marks the scan incomplete, so appends re-read the file fully.
    """
    if scan is None:
        scan = SourceScan()
    n = len(data) if stop is None else stop
    if _scan_lines is not None:
        _scan_native(data, scan, base, keep, n)
    else:
        _scan_python(data, scan, base, keep, n)
    return scan


def _scan_native(data: bytes, scan: SourceScan, base: int, keep: dict[int, Any] | None, n: int) -> None:
    """`_scan_python`'s outcome, the common lines scanned in C (`_native.scan_lines`);
    each line the C code leaves (a header, a refused, too long or too deep line) and the
    partial piece at the end are read by `_scan_python`, one line at a time."""
    cols = scan.lines
    columns = (cols.ordinal, cols.line, cols.offset, cols.length, cols.type, cols.id, cols.parent, cols.node)
    # (keeping: the members memory reads of a common message entry, else the whole value)
    decode = (_KEPT_DECODE or whole_decoder.decode) if keep is not None else _envelope_decoder.decode
    pos, at = 0, base
    while True:
        status, pos, at_next, scan.next_line, scan.next_ordinal = _scan_lines(
            data, pos, n, at, scan.next_line, scan.next_ordinal, columns, keep, decode,
            MAX_LINE_BYTES, MAX_JSON_DEPTH, _TYPE_NAMES, CONTENT_TYPES,
        )  # fmt: skip
        if at_next != at:
            scan.end_offset = at = at_next  # (complete lines were scanned)
        if status == 0:
            if pos < n:
                _scan_python(data[pos:n], scan, at, keep, n - pos)
            return
        end = data.index(b"\n", pos, n) + 1
        _scan_python(data[pos:end], scan, at, keep, end - pos)
        pos, at = end, scan.end_offset


def _scan_python(data: bytes, scan: SourceScan, base: int, keep: dict[int, Any] | None, n: int) -> None:
    """`scan_source`'s loop in Python (see there): the path without the accelerator, and
    the lines the accelerator leaves."""
    cols = scan.lines
    # (the columns' appends, bound once: a call per column and line is most of the scan)
    add_ordinal, add_line, add_offset, add_length = (
        cols.ordinal.append,
        cols.line.append,
        cols.offset.append,
        cols.length.append,
    )
    add_type, add_id, add_parent, add_node = cols.type.append, cols.id.append, cols.parent.append, cols.node.append
    type_names = _TYPE_NAMES
    content = CONTENT_TYPES
    ordinal = scan.next_ordinal
    line_no = scan.next_line
    at = base  # the file offset of the current piece
    value: JsonValue  # decoded lines (declared: `type(...) is dict` narrows them)
    head: JsonValue
    for raw, final in _pieces(data, n):
        length = len(raw)
        if final:
            if not length:
                break
            scan.ends_complete = False
        if not raw or raw.isspace():
            pass  # blank: never parsed, no ordinal
        else:
            etype: Any = None
            eid: Any = None
            pid: Any = None
            if length > MAX_LINE_BYTES:
                # Over the line limit: checked whole, decoded up to a cut (`cut_json`), and
                # named in coverage. Its envelope is the line's own: the branch through it
                # stays whole, as Pi reads it.
                cols.oversize.append(line_no)
                ok, value = cut_json(raw, limit=MAX_LINE_BYTES)
                envelope = ok and type(value) is dict
                if envelope:
                    assert isinstance(value, dict)
                    etype, eid, pid = value.get("type"), value.get("id"), value.get("parentId")
                    if keep is not None and type(etype) is str and etype in content:
                        keep[ordinal] = value
            elif keep is not None:
                ok, value = decode_json_line(raw)
                envelope = ok and type(value) is dict
                if envelope:
                    assert isinstance(value, dict)
                    etype, eid, pid = value.get("type"), value.get("id"), value.get("parentId")
                    if type(etype) is str and etype in content:
                        keep[ordinal] = value
            else:
                try:
                    if raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH:
                        # maybe too deep: only a full decode can tell (the envelope skips it)
                        raise msgspec.DecodeError("deep")
                    env = _envelope_decoder.decode(raw)
                    ok = envelope = True
                    etype, eid, pid = env.type, env.id, env.parentId
                except msgspec.ValidationError:
                    # Valid JSON that is not an object still consumes an ordinal.
                    ok, _ = decode_json_line(raw)
                    envelope = False
                except (msgspec.DecodeError, RecursionError):
                    ok, value = decode_json_line(raw)
                    envelope = ok and type(value) is dict
                    if envelope:
                        assert isinstance(value, dict)
                        etype, eid, pid = value.get("type"), value.get("id"), value.get("parentId")
            if ok:
                if envelope and etype == "session":
                    _, head = decode_json_line(raw)
                    if isinstance(head, dict):
                        scan.header_id = js_string(head.get("id")) if "id" in head else "undefined"
                        scan.header_cwd = js_string(head.get("cwd")) if "cwd" in head else "undefined"
                        if line_no == 0 and base == 0:
                            scan.first_header_id = scan.header_id
                            scan.first_header_cwd = scan.header_cwd
                else:
                    add_ordinal(ordinal)
                    add_line(line_no)
                    add_offset(at)
                    add_length(length)
                    if envelope:
                        if type(etype) is str:
                            add_type(type_names.get(etype, etype))  # one string object per known type
                        else:
                            add_type(None)  # e.g. [] is no type
                        add_id(eid)
                        add_parent(pid)
                        add_node(1 if type(eid) is str and (pid is None or type(pid) is str) else 0)
                    else:
                        add_type(None)
                        add_id(None)
                        add_parent(None)
                        add_node(0)
                    ordinal += 1
        if final:
            break  # the partial line is re-read on the next full scan: no line number, no end
        line_no += 1
        at += length + 1
        scan.end_offset = at
    scan.next_ordinal = ordinal
    scan.next_line = line_no


def oversize_reasons(scan: SourceScan | None) -> list[str]:
    """The coverage reasons of the scanned lines themselves: `max_line_bytes` when a line
    is longer than `MAX_LINE_BYTES` (its entry is cut: recall and expand see only its
    first part), so no answer about such a session is authoritative."""
    return [MAX_LINE_BYTES_REASON] if scan is not None and len(scan.lines.oversize) else []


class OrdinalSet:
    """The ordinals of a lineage as a bitmap (one bit per ordinal up to the largest)
    instead of a set of ints: what `in` asks of a lineage's ordinals, in 1/200 of the
    memory for a session of hundreds of thousands of entries."""

    __slots__ = ("bits", "count")

    def __init__(self, ordinals: Iterable[int]) -> None:
        values = list(ordinals) if not isinstance(ordinals, (list, array)) else ordinals
        top = max(values, default=-1)
        bits = bytearray((top >> 3) + 1 if top >= 0 else 0)
        count = 0
        for o in values:
            byte, bit = o >> 3, 1 << (o & 7)
            if not bits[byte] & bit:
                bits[byte] |= bit
                count += 1
        self.bits, self.count = bits, count

    @classmethod
    def of_bits(cls, bits: bytearray, count: int) -> OrdinalSet:
        """The set of a bitmap made elsewhere (`_native.lineage_walk`)."""
        held = cls.__new__(cls)
        held.bits, held.count = bits, count
        return held

    def __contains__(self, o: object) -> bool:
        if type(o) is not int or o < 0:
            return False
        byte = o >> 3
        return byte < len(self.bits) and bool(self.bits[byte] & (1 << (o & 7)))

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[int]:
        for byte, value in enumerate(self.bits):
            if value:
                for bit in range(8):
                    if value & (1 << bit):
                        yield (byte << 3) | bit

    def __eq__(self, other: object) -> bool:
        if isinstance(other, OrdinalSet):
            return self.count == other.count and set(self) == set(other)
        if isinstance(other, (set, frozenset)):
            return set(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


@dataclass(slots=True)
class Lineage:
    branches: str
    leaf_id: str | None
    ids: list[str]
    ordinals: set[int] | OrdinalSet | None  # None in all mode
    fingerprint: str
    reasons: list[str]


def lineage_fingerprint(branches: str, leaf_id: str | None, ids: list[str]) -> str:
    text = js_stringify({"branches": branches, "leafId": leaf_id, "ids": ids})
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(slots=True)
class StatKey:
    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    dev: int

    @property
    def mtime_ms(self) -> float:
        return self.mtime_ns / 1e6

    def as_list(self) -> list[int]:
        """The `statKey` every cache record of ours carries."""
        return [self.size, self.mtime_ns, self.ctime_ns, self.ino, self.dev]


def stat_key(path: str) -> StatKey | None:
    """Stat of a regular file, or None (missing, not a file, unreadable)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return stat_key_of(st)


def stat_key_of(st: os.stat_result) -> StatKey | None:
    """The StatKey of a stat result (None: not a regular file)."""
    if not _stat.S_ISREG(st.st_mode):
        return None
    return StatKey(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def read_source(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def lineage_from_lines(
    lines: ScanLines, branches: str, leaf_override: str | None = None
) -> tuple[Lineage, Sequence[int]]:
    """Lineage plus the path ordinals in order (for the append extension check).

    `leaf_override`: the live leaf of a session a live Pi holds (engine/session/lease.py);
    the active branch is walked up from it when it is an entry of the file, else from the
    last entry in file order, as Pi reads a file. Works on the scan's columns (line
    numbers, not line objects), so a huge session costs one dict entry per node."""
    if branches == "all":
        return Lineage("all", None, [], None, ALL_FINGERPRINT, []), []
    ids_col, parents, node, ordinal_col = lines.id, lines.parent, lines.node, lines.ordinal
    reasons: list[str] = []
    if _lineage_walk is not None:  # the loops below in C (test_lineage_walk.py)
        leaf, ids, packed, cycle, bits, count = _lineage_walk(ids_col, parents, node, ordinal_col, leaf_override)
        ordinals = array("q")
        ordinals.frombytes(packed)
        if cycle:
            reasons.append("invalid_parent_graph")
        held = OrdinalSet.of_bits(bits, count)
        return Lineage("active", leaf, ids, held, lineage_fingerprint("active", leaf, ids), reasons), ordinals
    by_id: dict[str, int] = {}
    leaf = None
    for i in range(len(node)):
        if node[i]:
            leaf = ids_col[i]
            by_id[leaf] = i  # type: ignore[index]
    # A parent id is the same string as its parent's id: keep one object (half the id
    # strings of a long session).
    for i, parent in enumerate(parents):
        if type(parent) is str:  # a malformed line's parentId may be any JSON value
            j = by_id.get(parent)
            if j is not None:
                parents[i] = ids_col[j]
    path = array("q")
    if leaf_override is not None and leaf_override in by_id:
        leaf = leaf_override
    cur = by_id.get(leaf) if leaf is not None else None
    seen = bytearray(len(node))  # by line number: a flag, not a set of ints
    while cur is not None:
        if seen[cur]:
            reasons.append("invalid_parent_graph")
            break
        seen[cur] = 1
        path.append(cur)
        parent = parents[cur]
        cur = by_id.get(parent) if parent is not None else None
    del by_id, seen
    path.reverse()
    ids = [ids_col[i] for i in path]
    ordinals = array("q", (ordinal_col[i] for i in path))
    del path
    return (
        Lineage("active", leaf, ids, OrdinalSet(ordinals), lineage_fingerprint("active", leaf, ids), reasons),
        ordinals,
    )
