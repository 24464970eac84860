"""The entries of a session's scanned lines, for a build (state_build.py), an append
(append.py) and a streamed expansion (expand_stream.py): from the values the scan kept of
a file read whole, or from the file read again chunk by chunk (streaming), and the
records the normalizer makes of them. The loops over a file read whole and over one
streamed chunk run in C where the accelerator is built (`_native.kept_entries`,
`_native.stream_entries`; tests/engine/memory/test_kept_entries.py)."""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Container, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ..native import NATIVE
from . import source
from .entry_text import Normalizer
from .json_line import KEPT_DECODE, whole_decoder
from .source import CONTENT_TYPES, Lineage, OrdinalSet, ScanLines, SourceScan, decode_json_line, scan_source
from .state import SourceMissing

if TYPE_CHECKING:
    from ..json_types import JsonObject, JsonValue

    Cancel = Callable[[], None] | None

# Larger files are built streaming: read in chunks twice (line scan, then the selected
# records), so neither the file's bytes nor all its decoded values are ever held at once.
STREAM_CHUNK_BYTES = 4 * 1024 * 1024

# `_entries_from`'s loop over a file read whole, and over a streamed chunk, in C
# (engine/_native.c), when it is built
_kept_entries: Any = getattr(NATIVE, "kept_entries", None)
_stream_entries: Any = getattr(NATIVE, "stream_entries", None)
# (a user, assistant or tool result message entry decoded as `kept_decoder` reads it: the
# members memory reads; any other line whole; only whole with an older extension)
_STREAM_DECODE: Any = KEPT_DECODE or whole_decoder.decode


def _decode_scanned(raw: bytes) -> tuple[bool, Any]:
    """`decode_json_line` of a line the scan kept (what `_stream_entries` falls back on)."""
    return decode_json_line(raw, depth_checked=True)


def kept_entries(
    data: bytes, lines: ScanLines, lineage: Lineage, kept: dict[int, Any] | None, *, cancel: Cancel, share_ids: bool
) -> Iterable[tuple[JsonValue, int]]:
    """The lineage's entries of a file read whole (`data`), from the values the scan kept
    (`kept`; None: decoded from `data`): a list made in C where it can be, else
    `_entries_from`'s generator."""
    ordinals = lineage.ordinals
    if kept is not None and _kept_entries is not None and (ordinals is None or isinstance(ordinals, OrdinalSet)):
        bits = ordinals.bits if ordinals is not None else None
        return _kept_entries(
            lines.type, lines.ordinal, lines.line, lines.id, lines.parent, bits, kept, CONTENT_TYPES, share_ids, cancel
        )
    return _entries_from(data, 0, lines, ordinals, cancel=cancel, kept=kept, share_ids=share_ids)


def _entries_from(
    data: bytes,
    base: int,
    lines: ScanLines,
    ordinals: Container[int] | None,
    *,
    cancel: Cancel = None,
    kept: dict[int, Any] | None = None,
    rows: Iterable[int] | None = None,
    share_ids: bool = False,
) -> Iterator[tuple[JsonValue, int]]:
    """(decoded entry, line number) of the content lines among `rows` (default: all) of
    `lines` that the lineage keeps (`ordinals`; None: all), decoded from `data` (the file
    from `base`) or taken from `kept` (`scan_source`'s decoded values). `share_ids`: the
    entries keep the scan's id strings (a hot build keeps its records and their ids)."""
    types, ordinal_col, offsets, lengths, line_col = lines.type, lines.ordinal, lines.offset, lines.length, lines.line
    id_col, parent_col = lines.id, lines.parent
    content = CONTENT_TYPES
    raw: JsonValue  # a decoded line (declared, not checked: `type(raw) is dict` narrows it)
    # A lineage's OrdinalSet is read through its bitmap here (no method call per line).
    bits = ordinals.bits if isinstance(ordinals, OrdinalSet) else None
    nbits = len(bits) if bits is not None else 0
    for n, i in enumerate(range(len(types)) if rows is None else rows):
        if types[i] not in content:
            continue
        ordinal = ordinal_col[i]
        if bits is not None:
            if (ordinal >> 3) >= nbits or not (bits[ordinal >> 3] >> (ordinal & 7)) & 1:
                continue
        elif ordinals is not None and ordinal not in ordinals:
            continue
        if cancel is not None and (n & 255) == 0:
            cancel()
        if kept is not None:
            raw = kept.pop(ordinal, None)
            ok = raw is not None
        else:
            start = offsets[i] - base
            ok, raw = decode_json_line(data[start : start + lengths[i]], depth_checked=True)  # a scanned line
        if ok:
            if share_ids and type(raw) is dict:
                # The records and the normalizer's id set keep the scan's id strings (one
                # object per id, shared with the lineage), not the decoded copies.
                entry_id, parent_id = id_col[i], parent_col[i]
                if entry_id is not None and raw.get("id") == entry_id:
                    raw["id"] = entry_id
                if parent_id is not None and raw.get("parentId") == parent_id:
                    raw["parentId"] = parent_id
            yield raw, line_col[i]


def records_from(
    data: bytes,
    base: int,
    lines: ScanLines,
    ordinals: Container[int] | None,
    norm: Normalizer,
    *,
    cancel: Cancel = None,
    kept: dict[int, Any] | None = None,
    rows: Iterable[int] | None = None,
) -> Iterator[JsonObject]:
    """The records of `_entries_from`'s entries."""
    feed = norm.feed
    for raw, line in _entries_from(
        data, base, lines, ordinals, cancel=cancel, kept=kept, rows=rows, share_ids=norm.max_entry_chars is not None
    ):
        yield from feed(raw, line)


def scan_streaming(fh: Any, cancel: Cancel = None, chunk_bytes: int = 0) -> tuple[SourceScan, Any, int]:
    """(scan, sha256, bytes read) of an open file, read in chunks: only one chunk (or one
    line longer than a chunk) is held at a time, never a copy of it. Each chunk starts at
    the first line the previous one did not finish (re-read, not copied). Equal to
    `scan_source` of the whole."""
    size = chunk_bytes or STREAM_CHUNK_BYTES
    want = size
    scan = SourceScan()
    hasher = hashlib.sha256()
    base = 0
    while True:
        if cancel is not None:
            cancel()
        fh.seek(base)
        chunk = fh.read(want)
        if not chunk:
            break
        nl = chunk.rfind(b"\n")
        if nl < 0:
            if len(chunk) == want:
                want *= 2  # one line longer than a chunk: read more of it
                continue
            hasher.update(chunk)  # a last line without a newline
            scan_source(chunk, scan, base=base)
            base += len(chunk)
            break
        hasher.update(memoryview(chunk)[: nl + 1])
        scan_source(chunk, scan, base=base, stop=nl + 1)
        base += nl + 1
        want = size
    return scan, hasher, base


def entries_streaming(
    fh: Any,
    lines: ScanLines,
    ordinals: Container[int] | None,
    *,
    cancel: Cancel = None,
    chunk_bytes: int = 0,
    share_ids: bool = False,
) -> Iterator[tuple[JsonValue, int]]:
    """The entries of the selected lines (as `_entries_from` gives them), reading the file
    again chunk by chunk."""
    size = chunk_bytes or STREAM_CHUNK_BYTES
    types, ordinal_col, offsets, lengths = lines.type, lines.ordinal, lines.offset, lines.length
    wanted = array(
        "q",
        (
            i
            for i in range(len(types))
            if types[i] in CONTENT_TYPES and (ordinals is None or ordinal_col[i] in ordinals)
        ),
    )
    i, n = 0, len(wanted)
    while i < n:
        start = offsets[wanted[i]]
        j = i + 1
        while j < n and offsets[wanted[j]] + lengths[wanted[j]] - start <= size:
            j += 1
        end = offsets[wanted[j - 1]] + lengths[wanted[j - 1]]
        fh.seek(start)
        data = fh.read(end - start)
        if len(data) != end - start:
            raise SourceMissing("source_changed_during_index")
        if _stream_entries is not None:  # `_entries_from`'s loop in C (test_kept_entries.py)
            yield from _stream_entries(
                data, start, wanted[i:j], offsets, lengths, lines.line, lines.id, lines.parent, share_ids,
                _STREAM_DECODE, _decode_scanned, source.MAX_LINE_BYTES, cancel,
            )  # fmt: skip
        else:
            yield from _entries_from(data, start, lines, None, cancel=cancel, rows=wanted[i:j], share_ids=share_ids)
        i = j


def records_streaming(
    fh: Any,
    lines: ScanLines,
    ordinals: Container[int] | None,
    norm: Normalizer,
    *,
    cancel: Cancel = None,
    chunk_bytes: int = 0,
) -> Iterator[JsonObject]:
    """The records of `entries_streaming`'s entries."""
    feed = norm.feed
    for raw, line in entries_streaming(
        fh, lines, ordinals, cancel=cancel, chunk_bytes=chunk_bytes, share_ids=norm.max_entry_chars is not None
    ):
        yield from feed(raw, line)
