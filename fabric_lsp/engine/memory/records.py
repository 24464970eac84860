"""The records of a hot state, held column-wise.

A hot shard of a session of many small entries held one 13-key dict per record, each
with its own id, parent id, timestamp, index and line objects: about 600 bytes per record
beside its text, several times the source when entries are small (issue 16, point 8).
`HotRecords` keeps the same records in arrays: index, line and timestamp as 8-byte
integers, Pi's 8-hex-digit entry and parent ids packed into integers, the few distinct
(type, role, tool, flags, session) combinations as a small table and a 4-byte code per
record, and the texts as UTF-8 in one buffer (decoded when read). Anything that does not fit
that shape (a record with extra keys, a non-integer timestamp, an id of another form)
keeps its exact value aside, so every record reads back equal to the dict it was built
from, key order included, and encodes to the same bytes.

`records[pos]` builds that dict on demand; hot loops read the columns (`iter_texts`,
`index_at`, `line_at`, `truncated_at`) instead.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, overload

from ..native import NATIVE

BASE_KEYS = (
    "sessionFile",
    "sessionId",
    "index",
    "entryId",
    "parentId",
    "type",
    "role",
    "toolName",
    "text",
    "timestamp",
    "isError",
    "truncated",
    "line",
)
_NBASE = len(BASE_KEYS)
_NONE_ID = -1
_ODD_TS = -(1 << 63)  # the timestamp is in `_odd_ts` (None, a float, a huge int)
_HEX = frozenset("0123456789abcdef")
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 63) - 1

Record = dict[str, Any]
Kind = tuple[Any, Any, Any, Any, Any, Any, Any]  # sessionFile, sessionId, type, role, toolName, isError, truncated

# `HotRecords.append` of a plain-shaped record in C (engine/_native.c), when it is built
_hot_record = getattr(NATIVE, "hot_record", None)
# `HotRecords.encoded` of the records in C (engine/_native.c), when it is built
_encode_records = getattr(NATIVE, "encode_records", None)


def _select(pos: int | slice, n: int) -> int | range:
    """The position, or the range of positions, that `pos` selects among `n` records
    (a negative position counts from the end, as for a list)."""
    if isinstance(pos, slice):
        return range(*pos.indices(n))
    if pos < 0:
        pos += n
    if not 0 <= pos < n:
        raise IndexError("record index out of range")
    return pos


class RecordSink(Protocol):
    """What a hot build hands each record to, in order, as the record is built (the same
    dict the state's `HotRecords` gives back later, without rebuilding it from there)."""

    def start(self) -> None:
        """A build (or a streaming build's new attempt) begins: forget what was seen."""

    def __call__(self, rec: Record, /) -> None: ...


class HotRecords(Sequence[Record]):
    """A list of normalized records (`Normalizer` output), stored compactly."""

    __slots__ = (
        "_tbuf",
        "_tend",
        "_index",
        "_line",
        "_ts",
        "_eid",
        "_pid",
        "_kind",
        "_kinds",
        "_kind_of",
        "_strs",
        "_str_of",
        "_odd_ts",
        "_extra",
        "_whole",
    )

    def __init__(self, records: Iterable[Record] = ()) -> None:
        self._tbuf = bytearray()  # the texts, UTF-8 (lone surrogates kept: surrogatepass)
        self._tend = array("Q")  # where each record's text ends in `_tbuf`
        self._index = array("q")
        self._line = array("q")
        self._ts = array("q")
        self._eid = array("q")
        self._pid = array("q")
        self._kind = array("I")
        self._kinds: list[Kind] = []
        self._kind_of: dict[tuple[Any, ...], int] = {}  # a kind and its values' types -> code
        self._strs: list[str] = []  # ids that are not 8 lowercase hex digits
        self._str_of: dict[str, int] = {}
        self._odd_ts: dict[int, Any] = {}
        self._extra: dict[int, tuple[tuple[str, Any], ...]] = {}  # keys after the base ones
        self._whole: dict[int, Record] = {}  # records of another shape, as they are
        for rec in records:
            self.append(rec)

    # ---- building ---------------------------------------------------------------------

    def _id_code(self, value: Any) -> int | None:
        if value is None:
            return _NONE_ID
        if type(value) is not str:
            return None
        if len(value) == 8 and _HEX.issuperset(value):
            return int(value, 16)
        code = self._str_of.get(value)
        if code is None:
            code = self._str_of[value] = len(self._strs)
            self._strs.append(value)
        return -2 - code

    def _add_text(self, text: str) -> None:
        self._tbuf += text.encode("utf-8", "surrogatepass")
        self._tend.append(len(self._tbuf))

    def _text_at(self, pos: int) -> str:
        start = self._tend[pos - 1] if pos else 0
        return self._tbuf[start : self._tend[pos]].decode("utf-8", "surrogatepass")

    def append(self, rec: Record) -> None:
        if _hot_record is not None and _hot_record(
            rec,
            BASE_KEYS,
            self._kind_of,
            self._kinds,
            self._tbuf,
            self._tend,
            self._index,
            self._line,
            self._ts,
            self._eid,
            self._pid,
            self._kind,
        ):
            return  # the plain shape, appended in C exactly as below
        pos = len(self._tend)
        keys = tuple(rec)
        if keys[:_NBASE] == BASE_KEYS:
            index, line, ts, text = rec["index"], rec["line"], rec["timestamp"], rec["text"]
            eid = self._id_code(rec["entryId"])
            pid = self._id_code(rec["parentId"])
            if (
                type(index) is int
                and type(line) is int
                and type(text) is str
                and eid is not None
                and pid is not None
                and _INT_MIN <= index <= _INT_MAX
                and _INT_MIN <= line <= _INT_MAX
            ):
                kind = (
                    rec["sessionFile"],
                    rec["sessionId"],
                    rec["type"],
                    rec["role"],
                    rec["toolName"],
                    rec["isError"],
                    rec["truncated"],
                )
                # (looked up with the values' types: 1, 1.0 and True are one dict key)
                tagged = (*kind, *map(type, kind))
                try:
                    code = self._kind_of.get(tagged)
                except TypeError:  # an unhashable field: keep the record as it is
                    code = None
                    self._whole[pos] = rec
                if code is None and pos not in self._whole:
                    code = self._kind_of[tagged] = len(self._kinds)
                    self._kinds.append(kind)
                self._add_text(text)
                self._index.append(index)
                self._line.append(line)
                if type(ts) is int and _INT_MIN < ts <= _INT_MAX:
                    self._ts.append(ts)
                else:
                    self._ts.append(_ODD_TS)
                    self._odd_ts[pos] = ts
                self._eid.append(eid)
                self._pid.append(pid)
                self._kind.append(code or 0)
                if len(keys) > _NBASE:
                    self._extra[pos] = tuple((k, rec[k]) for k in keys[_NBASE:])
                return
        # not the plain shape: keep the record as it is
        self._whole[pos] = rec
        text = rec.get("text")
        self._add_text(text if type(text) is str else "")
        for col in (self._index, self._line, self._ts, self._eid, self._pid):
            col.append(0)
        self._kind.append(0)

    def c_columns(self) -> tuple[Any, ...]:
        """What `_native.hot_plain` appends a record to (memory/hot_feed.py)."""
        return (self._kind_of, self._kinds, self._tbuf, self._tend, self._index, self._line, self._ts, self._eid,
                self._pid, self._kind, self._extra)  # fmt: skip

    def extend(self, records: Iterable[Record]) -> None:
        for rec in records:
            self.append(rec)

    # ---- reading ----------------------------------------------------------------------

    def _id(self, code: int) -> str | None:
        if code == _NONE_ID:
            return None
        if code >= 0:
            return f"{code:08x}"
        return self._strs[-2 - code]

    def _record(self, pos: int) -> Record:
        whole = self._whole.get(pos)
        if whole is not None:
            return dict(whole)
        sf, sid, etype, role, tool, is_error, truncated = self._kinds[self._kind[pos]]
        ts: Any = self._ts[pos]
        if ts == _ODD_TS:
            ts = self._odd_ts[pos]
        rec: Record = {
            "sessionFile": sf,
            "sessionId": sid,
            "index": self._index[pos],
            "entryId": self._id(self._eid[pos]),
            "parentId": self._id(self._pid[pos]),
            "type": etype,
            "role": role,
            "toolName": tool,
            "text": self._text_at(pos),
            "timestamp": ts,
            "isError": is_error,
            "truncated": truncated,
            "line": self._line[pos],
        }
        extra = self._extra.get(pos)
        if extra is not None:
            rec.update(extra)
        return rec

    def __len__(self) -> int:
        return len(self._tend)

    @overload
    def __getitem__(self, pos: int) -> Record: ...
    @overload
    def __getitem__(self, pos: slice) -> list[Record]: ...
    def __getitem__(self, pos: int | slice) -> Record | list[Record]:
        at = _select(pos, len(self._tend))
        return [self._record(p) for p in at] if isinstance(at, range) else self._record(at)

    def __iter__(self) -> Iterator[Record]:
        for pos in range(len(self._tend)):
            yield self._record(pos)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (HotRecords, list)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))  # type: ignore[arg-type]
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"HotRecords({len(self)} records)"

    # ---- columns (no dicts built) -------------------------------------------------------

    def iter_texts(self, n: int | None = None) -> Iterator[str]:
        """The texts of the first `n` records (default: all), in order."""
        buf, ends = self._tbuf, self._tend
        start = 0
        for pos in range(len(ends) if n is None else n):
            end = ends[pos]
            yield buf[start:end].decode("utf-8", "surrogatepass")
            start = end

    def index_at(self, pos: int) -> Any:
        whole = self._whole.get(pos)
        return whole.get("index") if whole is not None else self._index[pos]

    def line_at(self, pos: int) -> Any:
        whole = self._whole.get(pos)
        return whole.get("line") if whole is not None else self._line[pos]

    def truncated_at(self, pos: int) -> Any:
        whole = self._whole.get(pos)
        return whole.get("truncated") if whole is not None else self._kinds[self._kind[pos]][6]

    def timestamps(self) -> Iterator[Any]:
        """Every record's timestamp, in order."""
        whole, odd, ts_col = self._whole, self._odd_ts, self._ts
        for pos in range(len(self._tend)):
            if pos in whole:
                yield whole[pos].get("timestamp")
                continue
            ts = ts_col[pos]
            yield odd[pos] if ts == _ODD_TS else ts

    def encoded(self, encode: Callable[[Any], bytes], start: int = 0, size: int = 4096) -> Iterator[bytes]:
        """The records from `start` on as JSON, `size` at a time: each piece the records
        joined by "," (no brackets), every record the bytes `encode` (a msgspec JSON
        encoder's) gives the dict `self[pos]`. In C from the columns where the accelerator
        is built (no dicts: only the texts and integers are encoded there, every other value
        by `encode`); a piece holding a text `encode` refuses (a lone surrogate) is encoded
        from the dicts, so it fails as `encode` does."""
        n = len(self._tend)
        native = self._native_encoder(encode, start)
        for at in range(start, n, size):
            stop = min(n, at + size)
            data = native(at, stop) if native is not None else None
            if data is None:  # no accelerator, or a lone surrogate (msgspec's own error then)
                data = encode([self._record(p) for p in range(at, stop)])[1:-1]
            yield data

    def _native_encoder(self, encode: Callable[[Any], bytes], start: int) -> Callable[[int, int], bytes | None] | None:
        """`_native.encode_records` over these columns, every value it does not encode
        itself encoded by `encode` once (the keys too, in BASE_KEYS order; the C code
        writes the entryId, parentId and timestamp keys between them); None without the
        accelerator."""
        native = _encode_records
        if native is None or start >= len(self._tend):
            return None
        key = [b"," + encode(name) + b":" for name in BASE_KEYS]  # ,"sessionFile": ...
        parts = [
            (
                b"{" + key[0][1:] + encode(sf) + key[1] + encode(sid) + key[2],
                key[5] + encode(etype) + key[6] + encode(role) + key[7] + encode(tool) + key[8],
                key[10] + encode(is_error) + key[11] + encode(truncated) + key[12],
            )
            for sf, sid, etype, role, tool, is_error, truncated in self._kinds
        ]
        strs = [encode(v) for v in self._strs]
        whole = {pos: encode(self._record(pos)) for pos in self._whole if pos >= start}
        extra = {pos: b"," + encode(dict(kv))[1:-1] for pos, kv in self._extra.items() if pos >= start}
        odd = {pos: encode(ts) for pos, ts in self._odd_ts.items() if pos >= start}
        cols = (self._tbuf, self._tend, self._index, self._line, self._ts, self._eid, self._pid, self._kind)

        def run(at: int, stop: int) -> bytes | None:
            return native(*cols, parts, strs, whole, extra, odd, at, stop)

        return run


class RecordsPrefix(Sequence[Record]):
    """The first `n` records of a HotRecords, fixed: records appended later are not seen
    (records are only ever appended, so the prefix never changes)."""

    __slots__ = ("_base", "_n")

    def __init__(self, base: HotRecords, n: int) -> None:
        self._base, self._n = base, n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, pos: int) -> Record: ...
    @overload
    def __getitem__(self, pos: slice) -> list[Record]: ...
    def __getitem__(self, pos: int | slice) -> Record | list[Record]:
        at = _select(pos, self._n)
        return [self._base[p] for p in at] if isinstance(at, range) else self._base[at]

    def texts(self) -> Iterator[str]:
        return self._base.iter_texts(self._n)


def snapshot(entries: Sequence[Record]) -> Sequence[Record]:
    """`entries` as they are now, unaffected by later appends, without copying records."""
    if isinstance(entries, HotRecords):
        return RecordsPrefix(entries, len(entries))
    return list(entries)


def texts_of(entries: Sequence[Record]) -> Iterable[str]:
    """The texts of `entries` (HotRecords, a prefix of one, or a list of record dicts),
    in order, without building record dicts."""
    if isinstance(entries, HotRecords):
        return entries.iter_texts()
    if isinstance(entries, RecordsPrefix):
        return entries.texts()
    return [e["text"] for e in entries]
