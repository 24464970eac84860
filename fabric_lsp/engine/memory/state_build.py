"""Derived state of one session for one branch mode and tier, built from source, loaded
from a cache record, or extended in place after an append.

A hot state holds the truncated records and their inverted index; a cold state holds the
V5 digest (vocabulary, addresses, counts). Either carries the source identity
(`StatKey`, size, mtime, SHA-256 `sourceHash`) and the lineage fingerprint, so the
engine can answer integrity checks without re-reading an unchanged file.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Container, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ..native import NATIVE
from . import disk_cache, file_history
from .cold_fold import fold_entries
from .cold_index import keep_on_server
from .digest_fold import DigestFolder
from .entry_text import Normalizer
from .file_history import new_collector
from .hot_feed import feed_entries
from .persist import finish_state, read_file_ops, write_records
from .records import HotRecords, RecordSink
from .search import HotIndex, postings_of
from .source import (
    CONTENT_TYPES,
    Lineage,
    OrdinalSet,
    ScanLines,
    SourceScan,
    StatKey,
    decode_json_line,
    lineage_from_lines,
    read_source,
    scan_source,
    stat_key,
)
from .state import SessionState, SourceMissing
from .tokenize import unique_terms

if TYPE_CHECKING:
    from ..json_types import JsonObject, JsonValue

    Cancel = Callable[[], None] | None
    EntriesOf = Callable[[Lineage, bool], Iterable[tuple[JsonValue, int]]]  # (lineage, share_ids)

# `_entries_from`'s loop over a file read whole, in C (engine/_native.c), when it is built
_kept_entries: Any = getattr(NATIVE, "kept_entries", None)

# Up to this size a file is read whole and each content line decoded once, its value kept
# until the lineage is known; that costs ~9x the file while it lasts (for small entries),
# and at this size is no faster than the streaming build (measured: 1.80 vs 1.89 s CPU for
# a 24 MB session of small entries), so the bound is low.
SINGLE_PASS_MAX_BYTES = 4 * 1024 * 1024
# Larger files are built streaming: read in chunks twice (line scan, then the selected
# records), so neither the file's bytes nor all its decoded values are ever held at once.
STREAM_CHUNK_BYTES = 4 * 1024 * 1024


def _read_consistent(path: str) -> tuple[bytes, StatKey]:
    for _ in range(3):
        key = stat_key(path)
        if key is None:
            raise SourceMissing("source_unavailable")
        data = read_source(path)
        if data is None:
            raise SourceMissing("source_unavailable")
        after = stat_key(path)
        if after is None:
            raise SourceMissing("source_unavailable")
        if after == key and len(data) == key.size:
            return data, key
    raise SourceMissing("source_changed_during_index")


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


def build_state(
    file: str,
    branches: str,
    tier: str,
    cfg: Any,
    *,
    ref_id: str,
    ref_cwd: str,
    cancel: Cancel = None,
    encode: bool = True,
    live_leaf: str | None = None,
    searchable: bool = True,
    sink: RecordSink | None = None,
) -> SessionState:
    """Build from source. Raises SourceMissing(reason) when the source is unavailable or
    changes while it is read. `sink` (tier hot) sees each record as it is built, besides
    the state keeping it (`RecordSink`)."""
    first = stat_key(file)
    if first is not None and first.size > SINGLE_PASS_MAX_BYTES:
        return _build_streaming(
            file,
            branches,
            tier,
            cfg,
            ref_id=ref_id,
            ref_cwd=ref_cwd,
            cancel=cancel,
            encode=encode,
            live_leaf=live_leaf,
            searchable=searchable,
            sink=sink,
        )
    data, key = _read_consistent(file)
    hasher = hashlib.sha256(data)
    # One full decode per line, keeping content values, saves the second decode.
    kept: dict[int, Any] | None = {} if len(data) <= SINGLE_PASS_MAX_BYTES else None
    scan = scan_source(data, keep=kept)
    # The bytes and decoded values are handed to the one pass over the records, so they
    # are freed when it ends (before the shard is encoded), not when this returns.
    box: dict[str, Any] = {"data": data, "kept": kept}
    del data, kept

    def entries(lineage: Lineage, share_ids: bool) -> Iterable[tuple[JsonValue, int]]:
        held, ordinals, lines = box.pop("kept"), lineage.ordinals, scan.lines
        if held is not None and _kept_entries is not None and (ordinals is None or isinstance(ordinals, OrdinalSet)):
            # `_entries_from`'s loop in C, as a list (test_kept_entries.py)
            bits = ordinals.bits if ordinals is not None else None
            content, box["data"] = CONTENT_TYPES, None
            return _kept_entries(
                lines.type, lines.ordinal, lines.line, lines.id, lines.parent, bits, held, content, share_ids, cancel
            )
        return _entries_from(box.pop("data"), 0, lines, ordinals, cancel=cancel, kept=held, share_ids=share_ids)

    return _assemble(
        file,
        branches,
        tier,
        cfg,
        key=key,
        hasher=hasher,
        scan=scan,
        entries=entries,
        ref_id=ref_id,
        ref_cwd=ref_cwd,
        encode=encode,
        live_leaf=live_leaf,
        searchable=searchable,
        sink=sink,
    )


def _build_streaming(
    file: str,
    branches: str,
    tier: str,
    cfg: Any,
    *,
    ref_id: str,
    ref_cwd: str,
    cancel: Cancel = None,
    encode: bool = True,
    live_leaf: str | None = None,
    searchable: bool = True,
    sink: RecordSink | None = None,
) -> SessionState:
    for _ in range(3):
        key = stat_key(file)
        if key is None:
            raise SourceMissing("source_unavailable")
        try:
            with open(file, "rb") as fh:
                scan, hasher, total = scan_streaming(fh, cancel)
                if total != key.size or stat_key(file) != key:
                    continue

                def entries(lineage: Lineage, share_ids: bool) -> Iterator[tuple[JsonValue, int]]:
                    return entries_streaming(fh, scan.lines, lineage.ordinals, cancel=cancel, share_ids=share_ids)

                state = _assemble(
                    file,
                    branches,
                    tier,
                    cfg,
                    key=key,
                    hasher=hasher,
                    scan=scan,
                    entries=entries,
                    ref_id=ref_id,
                    ref_cwd=ref_cwd,
                    encode=encode,
                    live_leaf=live_leaf,
                    searchable=searchable,
                    sink=sink,
                )
        except OSError:
            raise SourceMissing("source_unavailable") from None
        if stat_key(file) == key:
            return state
    raise SourceMissing("source_changed_during_index")


def _assemble(
    file: str,
    branches: str,
    tier: str,
    cfg: Any,
    *,
    key: StatKey,
    hasher: Any,
    scan: SourceScan,
    entries: EntriesOf,
    ref_id: str,
    ref_cwd: str,
    encode: bool,
    live_leaf: str | None,
    searchable: bool,
    sink: RecordSink | None = None,
) -> SessionState:
    lineage, path_ordinals = lineage_from_lines(scan.lines, branches, live_leaf)
    if live_leaf is not None:
        encode = False  # the disk cache always holds the file's own leaf
    session_id = scan.header_id if scan.header_id is not None else ref_id
    cwd = scan.header_cwd if scan.header_cwd is not None else ref_cwd
    state = SessionState(
        file=file,
        branches=branches,
        tier=tier,
        key=key,
        size=key.size,
        mtime=key.mtime_ms,
        source_hash=hasher.hexdigest(),
        session_id=session_id,
        cwd=cwd,
        lineage=lineage,
        coverage={},
        entry_count=0,
        scan=scan,
        path_ordinals=path_ordinals,
        hasher=hasher,
        encode=encode,
        live_leaf=live_leaf,
    )
    rec_sid = scan.header_id or ""
    state.file_ops = new_collector(cwd)
    if tier == "hot":
        norm = Normalizer(
            file,
            rec_sid,
            max_entry_chars=cfg.max_entry_chars,
            index_thinking=cfg.index_thinking,
            index_tool_output=cfg.index_tool_output,
        )
        norm.file_ops = state.file_ops
        records = HotRecords()
        index: HotIndex | None = HotIndex() if searchable else None  # expand needs no index
        if sink is not None:
            sink.start()  # (a streaming build that starts again starts its sink again)
        # (the rule of records_from for the ids)
        feed_entries(norm, records, index, entries(lineage, norm.max_entry_chars is not None), sink)
        state.entries, state.hot_index, state.normalizer = records, index, norm
    else:
        norm = Normalizer(
            file,
            rec_sid,
            max_entry_chars=None,
            index_thinking=cfg.index_thinking,
            index_tool_output=cfg.index_tool_output,
        )
        norm.file_ops = state.file_ops
        folder = DigestFolder(cfg.max_cold_vocabulary_bytes)
        fold_entries(norm, folder, entries(lineage, False))  # (no records built)
        state.normalizer, state.folder = norm, folder
    finish_state(state, cfg, encode)
    return state


def build_detached(
    file: str, branches: str, tier: str, cfg: Any, *, ref_id: str, ref_cwd: str, index_dir: str | None = None
) -> SessionState:
    """`build_state` for a worker process: the result drops the append-only bookkeeping
    (when the file grows, a hot state gets it back from the old bytes, verified against
    `sourceHash`: `_restore_bookkeeping`; a cold one is rebuilt). With `index_dir`, the
    worker writes the state's disk cache records itself (`write_records`) and the result
    says so (`written`): the caller adopts it without writing, and the encoded record is
    not sent back."""
    state = build_state(file, branches, tier, cfg, ref_id=ref_id, ref_cwd=ref_cwd)
    if index_dir is not None:
        write_records(index_dir, state)
        state.persisted = b""
        state.written = True
    state.scan = None
    state.normalizer = None
    state.folder = None
    state.hasher = None
    if state.tier == "cold" and state.digest is not None:
        # the key the term table's snapshot files this vocabulary under (cheaper here, in
        # the builder, than in the server's snapshot of a thousand sessions)
        vocabulary = state.digest.get("vocabulary")
        if isinstance(vocabulary, list):
            state.vocab_key = disk_cache.vocabulary_key(disk_cache.encoder.encode(vocabulary))
    if index_dir is not None and state.tier == "cold" and state.digest is not None:
        keep_on_server(state, interned=False)  # less to pickle: the record is on disk
    # Less to pickle: path ids and ordinals only serve appends (the vocabulary set is
    # built from the vocabulary list by `digest_view`).
    lin = state.lineage
    state.lineage = Lineage(lin.branches, lin.leaf_id, [], None, lin.fingerprint, lin.reasons)
    state.path_ordinals = []
    state.vocab_set = frozenset()
    return state


def digest_from_hot(state: SessionState, cfg: Any) -> SessionState | None:
    """The cold state of a session that is leaving the hot tier, derived from its hot state
    (built here or loaded from the disk cache) instead of a rebuild from source: equal to
    `build_state(..., "cold")` for the same, unchanged file.

    Records differ between the tiers only in truncated texts, so only the source lines of
    truncated records are decoded again (through a normalizer without the limit). The
    vocabulary is the terms of untruncated records (their postings) plus the terms of the
    full truncated texts; order of first appearance only matters when that union exceeds
    the byte budget, and then (or when anything does not add up) the caller rebuilds: None.
    The result carries no append bookkeeping (an append makes a session hot again)."""
    index, entries = state.hot_index, state.entries
    if state.tier != "hot" or index is None or entries is None or len(index.doc_len) != len(entries):
        return None
    truncated = [pos for pos in range(len(entries)) if entries.truncated_at(pos)]
    full_texts: list[str] = []
    if truncated:
        if stat_key(state.file) != state.key:
            return None
        data = read_source(state.file)
        if data is None or len(data) != state.size or stat_key(state.file) != state.key:
            return None
        spans: dict[int, tuple[int, int]] = {}
        pos = line_no = 0
        for target in sorted({entries.line_at(p) for p in truncated}):
            while line_no < target:
                nl = data.find(b"\n", pos)
                if nl < 0:
                    return None
                pos, line_no = nl + 1, line_no + 1
            end = data.find(b"\n", pos)
            spans[target] = (pos, len(data) if end < 0 else end)
        per_line: dict[int, dict[tuple[Any, Any], str]] = {}
        for line, (a, b) in spans.items():
            ok, raw = decode_json_line(data[a:b])
            if not ok:
                return None
            norm = Normalizer(
                state.file,
                "",
                max_entry_chars=None,
                index_thinking=cfg.index_thinking,
                index_tool_output=cfg.index_tool_output,
            )
            texts: dict[tuple[Any, Any], str] = {}
            for rec in norm.feed(raw, line):
                k = (rec["type"], rec["entryId"])
                if k in texts:
                    return None  # ambiguous: rebuild
                texts[k] = rec["text"]
            per_line[line] = texts
        for p in truncated:
            e = entries[p]
            text = per_line[e["line"]].get((e["type"], e["entryId"]))
            if text is None or not text.startswith(e["text"]):
                return None
            full_texts.append(text)
    postings = index.postings
    if not truncated:
        terms = set(postings)
    else:
        cut = set(truncated)
        terms: set[str] = set()
        for term, plist in postings.items():
            for p in postings_of(plist):
                if (p >> 32) not in cut:
                    terms.add(term)
                    break
        terms |= unique_terms("\n".join(dict.fromkeys(full_texts)))  # newlines separate terms
    folder = DigestFolder(cfg.max_cold_vocabulary_bytes)
    cost = len("".join(terms).encode("utf-8", "surrogatepass")) + 3 * len(terms) - (1 if terms else 0)
    if folder.vocab_bytes + cost > folder.max_vocab_bytes:
        return None
    folder.vocab_stopped = True  # the fields below only; the vocabulary is known
    for e in entries:
        folder.add(e)
    folder.vocab_stopped = False
    folder.vocab = terms
    folder.vocab_bytes += cost
    # Coverage: a truncated text is the only source of `max_entry_chars`.
    norm = Normalizer(
        state.file, "", max_entry_chars=None, index_thinking=cfg.index_thinking, index_tool_output=cfg.index_tool_output
    )
    norm.reasons = set(state.coverage.get("reasons", ())) - {"max_entry_chars"}
    cold = SessionState(
        file=state.file,
        branches=state.branches,
        tier="cold",
        key=state.key,
        size=state.size,
        mtime=state.mtime,
        source_hash=state.source_hash,
        session_id=state.session_id,
        cwd=state.cwd,
        lineage=state.lineage,
        coverage={},
        entry_count=0,
        normalizer=norm,
        folder=folder,
        encode=True,
        file_ops=state.file_ops,  # the same lineage: the same operations
    )
    finish_state(cold, cfg, True)
    cold.normalizer = cold.folder = None
    return cold


def file_ops_reader(
    file: str, branches: str, state: SessionState, *, ref_id: str, ref_cwd: str, index_dir: str | None, cfg: Any
) -> Callable[[], Any]:
    """The deferred read of a loaded `state`'s file-operation table (a one-shot engine's:
    `SessionState.defer_file_ops`). When the disk cache has no table for exactly this
    source (where a server rebuilds the state, and both records), it is built from the
    source and written; None only when the source no longer holds the bytes the state was
    loaded for. (The disk cache holds states of the file's own leaf only.)"""

    def read() -> Any:
        table = read_file_ops(index_dir, cfg.max_sync_source_bytes, file, branches, state)
        if table is not None:
            return table
        try:
            built = build_state(
                file, branches, state.tier, cfg, ref_id=ref_id, ref_cwd=ref_cwd, encode=False, searchable=False
            )
        except SourceMissing:
            return None
        if built.file_ops is None or built.source_hash != state.source_hash or built.key != state.key:
            return None
        disk_cache.write_atomic(index_dir, file_history.cache_name(file, branches), file_history.encode_record(built))
        return built.file_ops

    return read
