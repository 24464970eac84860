"""Streaming reader for Pi session logs (JSONL, format v3).

Invariants:
* Every complete line (one ending in ``\\n``) is accounted for exactly once in
  `ReadStats`: ``lines == header + entries + blank + malformed + oversize + non_object``.
* A half-written last line (no trailing newline yet) is never an entry; its size is
  reported as `ReadStats.partial_tail_bytes` and `SessionLog.size` stops before it.
* A line longer than `max_line_bytes` is never buffered whole: memory stays bounded by
  the limit plus one read chunk, whatever the file holds.
* Nothing here raises on bad content; only I/O errors on opening propagate.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import msgspec

from ..gcpause import cyclic_gc_paused
from ..native import NATIVE

if TYPE_CHECKING:
    from ..json_types import JsonValue

DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024
_CHUNK = 1 << 20

_decode = msgspec.json.Decoder().decode


class ReadStats(msgspec.Struct, kw_only=True):
    """Counts of every complete line read, by what became of it."""

    lines: int = 0  # complete lines read (header included)
    header: int = 0  # 1 when a session header was taken from these lines
    entries: int = 0  # JSON objects kept as EntryRecord (valid or not)
    no_id: int = 0  # of `entries`: no string id, or parentId neither null nor a string
    blank: int = 0  # empty or whitespace-only lines
    malformed: int = 0  # lines that are not valid JSON
    oversize: int = 0  # lines longer than max_line_bytes (never parsed)
    non_object: int = 0  # valid JSON that is not an object (counted in the raw ordinal)
    partial_tail_bytes: int = 0  # bytes after the last newline (a line still being written)
    complete_bytes: int = 0  # bytes of all complete lines read (newlines included)

    @property
    def skipped(self) -> int:
        return self.blank + self.malformed + self.oversize + self.non_object


class EntryRecord(msgspec.Struct, kw_only=True):
    """One non-header JSON object line of a session file, with where it stands."""

    line: int  # 0-based line number in the file
    offset: int  # byte offset of the line's first byte
    length: int  # bytes of the line including its newline
    ordinal: int  # 0-based over non-header lines that parse as JSON (memory's raw ordinal)
    id: str | None
    parent_id: str | None
    type: str | None
    valid: bool  # string id and parentId null-or-string: a tree node
    raw: dict[str, Any]

    @property
    def end(self) -> int:
        return self.offset + self.length


class SessionLog(msgspec.Struct, kw_only=True):
    """What a session file holds, as Pi would read it."""

    path: str | None
    header: dict[str, Any] | None  # the raw header object, when the first parsed line is one
    records: list[EntryRecord]
    stats: ReadStats
    size: int  # bytes up to the end of the last complete line (start_offset included)
    first_parsed_is_header: bool = False

    @property
    def is_session(self) -> bool:
        """Pi's rule: the first parsed object is ``{type:"session", id:<string>}``."""
        return self.first_parsed_is_header

    @property
    def session_id(self) -> str | None:
        if self.header is not None:
            return str(self.header.get("id"))
        if self.path:
            return Path(self.path).stem
        return None


# Deepest container nesting a session line may have. JSON.parse takes far deeper lines,
# but a decoder's (and every later recursive walk's) success would then depend on how
# deep the caller's stack already is; a fixed cap makes the outcome the same for the
# CLI, the server and every reader (docs/reliability.md, "Deep nesting").
MAX_JSON_DEPTH = 512


_WALK_FIRST_CHARS = 4096
# The walk in C (None: no accelerator, or one built from an older source)
_deeper_than: Any = getattr(NATIVE, "deeper_than", None)
_WALK_BUDGET = 256  # containers


def _depth_walk(value: JsonValue, limit: int, budget: int | None) -> bool | None:
    """Whether `value` nests arrays/objects deeper than `limit`, by an iterative walk over
    its containers (no recursion on hostile input); None when it holds more than `budget`
    of them (undecided)."""
    stack: list[tuple[JsonValue, int]] = [(value, 1)]
    child: JsonValue  # (an object's values are Any: read them as JSON values)
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Iterable[JsonValue] = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        if budget is not None:
            budget -= 1
            if budget < 0:
                return None
        for child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
    return False


def exceeds_json_depth(
    line: Any, value: JsonValue, limit: int = MAX_JSON_DEPTH, start: int = 0, end: int | None = None
) -> bool:
    """True when `value` (decoded from `line[start:end]`, bytes or str) nests
    arrays/objects deeper than `limit`.

    Cheap for ordinary lines: a short line is judged by its length or its bracket count
    (only more than `limit` brackets can nest that deep), a long one by walking its few
    containers; the full walk is left for lines that hold many of both."""
    if end is None:
        end = len(line)
    if end - start <= limit:
        return False  # fewer characters than the limit + 1 opening brackets it would take
    if _deeper_than is not None:
        return _deeper_than(value, limit)  # the whole walk, in C
    if end - start > _WALK_FIRST_CHARS:
        # A long line of few containers (a tool output): walking them is far cheaper than
        # counting the brackets of every byte.
        verdict = _depth_walk(value, limit, _WALK_BUDGET)
        if verdict is not None:
            return verdict
    if isinstance(line, str):
        if line.count("[", start, end) + line.count("{", start, end) <= limit:
            return False
    elif line.count(b"[", start, end) + line.count(b"{", start, end) <= limit:
        return False
    return bool(_depth_walk(value, limit, None))


def parse_json_line(line: bytes) -> tuple[bool, Any]:
    """Decode one line as JavaScript's JSON.parse would; (ok, value). Never raises.

    msgspec is tried first for speed; a line it refuses (invalid UTF-8, lone surrogate
    escapes) is retried as text with replacement characters, as Node reads files.
    NaN / Infinity / -Infinity are rejected, as JSON.parse rejects them. A line nested
    deeper than `MAX_JSON_DEPTH` is malformed (any decoder error, RecursionError
    included, is a malformed line, never an exception).
    """
    try:
        value = _decode(line)
    except Exception:  # DecodeError, RecursionError, out-of-range number: try as text
        try:
            value = json.loads(line.decode("utf-8", "replace"), parse_constant=_reject_constant)
        except Exception:
            return False, None
    if exceeds_json_depth(line, value):
        return False, None
    return True, value


def _reject_constant(name: str) -> Any:
    # json.loads accepts NaN, Infinity and -Infinity; JSON.parse (and so Pi) does not.
    raise ValueError(f"{name} is not valid JSON")


def _is_header(value: JsonValue) -> bool:
    return isinstance(value, dict) and value.get("type") == "session" and isinstance(value.get("id"), str)


def _iter_lines(fp: BinaryIO, max_line_bytes: int, chunk_size: int = _CHUNK) -> Iterator[tuple[int, int, bytes | None]]:
    """Yield (offset, length, content-or-None-when-oversize) per complete line, then
    (offset, -partial_len, b"") once for a trailing partial line if any."""
    offset = 0
    carry: list[bytes] = []  # pieces of the current unfinished line
    carry_len = 0
    dropping = False  # inside an oversize line: count its bytes, keep none
    while True:
        chunk = fp.read(chunk_size)
        if not chunk:
            break
        pieces = chunk.split(b"\n")
        last = pieces.pop()  # the part after the chunk's last newline (maybe empty)
        for piece in pieces:
            if carry_len or dropping:
                length = carry_len + len(piece) + 1
                if dropping or length - 1 > max_line_bytes:
                    yield offset, length, None
                else:
                    carry.append(piece)
                    yield offset, length, b"".join(carry)
                carry = []
                carry_len = 0
                dropping = False
            else:
                length = len(piece) + 1
                yield offset, length, (piece if length - 1 <= max_line_bytes else None)
            offset += length
        if last:
            carry_len += len(last)
            if not dropping:
                if carry_len > max_line_bytes:
                    carry = []
                    dropping = True
                else:
                    carry.append(last)
    if carry_len:
        yield offset, -carry_len, b""


def iter_session(
    fp: BinaryIO,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    start_offset: int = 0,
    start_line: int = 0,
    start_ordinal: int = 0,
    header_seen: bool | None = None,
    stats: ReadStats | None = None,
    chunk_size: int = _CHUNK,
) -> Iterator[EntryRecord | dict[str, Any]]:
    """Stream a session from `fp` (positioned at `start_offset`).

    Yields the header dict (once, when taken) and then `EntryRecord`s. `stats` is updated
    in place. With `start_offset > 0` the reader continues a file already read up to
    that offset (`header_seen` defaults to True then), which is how appended lines are
    parsed without re-reading the file.
    """
    st = stats if stats is not None else ReadStats()
    seen_first = (start_offset > 0) if header_seen is None else header_seen
    line_no = start_line
    ordinal = start_ordinal
    for rel, length, content in _iter_lines(fp, max_line_bytes, chunk_size):
        if length < 0:
            st.partial_tail_bytes = -length
            break
        st.lines += 1
        st.complete_bytes += length
        offset = start_offset + rel
        if content is None:
            st.oversize += 1
        elif not content.strip():
            st.blank += 1
        else:
            ok, value = parse_json_line(content)
            if not ok:
                st.malformed += 1
            elif not seen_first:
                seen_first = True
                if _is_header(value):
                    st.header += 1
                    yield value
                else:
                    # Pi rejects such a file; records are still produced for callers
                    # that index leniently, and the log says it is not a session.
                    yield from _record(value, st, line=line_no, offset=offset, length=length, ordinal=ordinal)
                    ordinal += 1
            else:
                yield from _record(value, st, line=line_no, offset=offset, length=length, ordinal=ordinal)
                ordinal += 1
        line_no += 1


def _record(
    value: JsonValue, st: ReadStats, *, line: int, offset: int, length: int, ordinal: int
) -> Iterator[EntryRecord]:
    if not isinstance(value, dict):
        st.non_object += 1
        return
    eid = value.get("id")
    pid = value.get("parentId", _MISSING)
    etype = value.get("type")
    valid = isinstance(eid, str) and (pid is None or isinstance(pid, str))
    st.entries += 1
    if not valid:
        st.no_id += 1
    yield EntryRecord(
        line=line,
        offset=offset,
        length=length,
        ordinal=ordinal,
        id=eid if isinstance(eid, str) else None,
        parent_id=pid if isinstance(pid, str) else None,
        type=etype if isinstance(etype, str) else None,
        valid=valid,
        raw=value,
    )


_MISSING = object()


def _collect(
    fp: BinaryIO,
    path: str | None,
    *,
    max_line_bytes: int,
    start_offset: int,
    start_line: int,
    start_ordinal: int,
    header_seen: bool | None,
) -> SessionLog:
    stats = ReadStats()
    header: dict[str, Any] | None = None
    records: list[EntryRecord] = []
    with cyclic_gc_paused():  # the records form no reference cycles
        for item in iter_session(
            fp,
            max_line_bytes=max_line_bytes,
            start_offset=start_offset,
            start_line=start_line,
            start_ordinal=start_ordinal,
            header_seen=header_seen,
            stats=stats,
        ):
            if isinstance(item, EntryRecord):
                records.append(item)
            else:
                header = item
    return SessionLog(
        path=path,
        header=header,
        records=records,
        stats=stats,
        size=start_offset + stats.complete_bytes,
        first_parsed_is_header=header is not None,
    )


def read_session(
    path: str | os.PathLike[str],
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    start_offset: int = 0,
    start_line: int = 0,
    start_ordinal: int = 0,
    header_seen: bool | None = None,
) -> SessionLog:
    """Read a session file line by line (bounded memory per line).

    With `start_offset`, continue a file already read up to that byte (the end of a
    complete line), numbering lines from `start_line` and ordinals from `start_ordinal`.
    """
    p = os.fspath(path)
    with open(p, "rb") as fp:
        if start_offset:
            fp.seek(start_offset)
        return _collect(
            fp,
            p,
            max_line_bytes=max_line_bytes,
            start_offset=start_offset,
            start_line=start_line,
            start_ordinal=start_ordinal,
            header_seen=header_seen,
        )


def parse_session_bytes(
    data: bytes,
    path: str | os.PathLike[str] | None = None,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> SessionLog:
    """Parse bytes already read (e.g. under a lock, to hash and parse the same bytes)."""
    fp = io.BytesIO(data)
    return _collect(
        fp,
        os.fspath(path) if path is not None else None,
        max_line_bytes=max_line_bytes,
        start_offset=0,
        start_line=0,
        start_ordinal=0,
        header_seen=None,
    )


def source_hash(path: str | os.PathLike[str]) -> str:
    """SHA-256 hex of the complete raw file bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fp:
        while True:
            chunk = fp.read(_CHUNK)
            if not chunk:
                break
            h.update(chunk)
    return h.hexdigest()


def bytes_hash(data: bytes) -> str:
    """SHA-256 hex of `data` (the same value `source_hash` gives for a file of these bytes)."""
    return hashlib.sha256(data).hexdigest()


def read_header(path: str | os.PathLike[str], limit: int = 8192) -> dict[str, Any] | None:
    """Memory's header rule: the first line within `limit` bytes, trimmed, parsed; a
    ``type:"session"`` object or None."""
    try:
        with open(path, "rb") as fp:
            head = fp.read(limit)
    except OSError:
        return None
    first = head.split(b"\n", 1)[0].strip()
    if not first:
        return None
    value: JsonValue
    ok, value = parse_json_line(first)
    if ok and isinstance(value, dict) and value.get("type") == "session":
        return value
    return None
