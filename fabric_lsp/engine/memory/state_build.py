"""Derived state of one session for one branch mode and tier, built from source, loaded
from a cache record, or extended in place after an append.

A hot state holds the truncated records and their inverted index; a cold state holds the
V5 digest (vocabulary, addresses, counts). Either carries the source identity
(`StatKey`, size, mtime, SHA-256 `sourceHash`) and the lineage fingerprint, so the
engine can answer integrity checks without re-reading an unchanged file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ..native import NATIVE
from . import disk_cache, entry_rows, file_history
from .cold_fold import fold_entries
from .cold_index import keep_on_server
from .digest_fold import DigestFolder
from .entry_rows import entries_streaming, kept_entries, scan_streaming
from .entry_text import Normalizer
from .file_history import new_collector
from .hot_feed import feed_entries
from .hot_index import HotIndex, postings_of
from .persist import finish_state, read_file_ops, write_records
from .records import HotRecords, RecordSink
from .source import (
    Lineage,
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
    from ..json_types import JsonValue

    Cancel = Callable[[], None] | None
    EntriesOf = Callable[[Lineage, bool], Iterable[tuple[JsonValue, int]]]  # (lineage, share_ids)

# Up to this size a file is read whole. Its content lines are decoded once, each value kept
# until the lineage is known, when those values fit KEPT_VALUES_MAX_BYTES (`single_pass`);
# else the bytes are scanned first and the selected lines decoded from them after.
SINGLE_PASS_MAX_BYTES = 16 * 1024 * 1024
# The kept values of a file are estimated at 2.2 times its bytes plus 2.2 KB per line
# (measured on generated sessions of 4.7 to 18 MB, 1.3 to 1.8 KB per line: peak RSS 1.9x to
# 4.0x the file; a 24 MB session of small entries took ~9x). One pass saves the second
# decode of the selected lines: 7.17 -> 6.47 G instructions for the 200 MB corpus's seven
# files over 4 MiB (docs/performance.md).
KEPT_VALUES_MAX_BYTES = 48 * 1024 * 1024
# Larger files are built streaming: read in chunks twice (line scan, then the selected
# records), so neither the file's bytes nor all its decoded values are ever held at once.
STREAM_CHUNK_BYTES = entry_rows.STREAM_CHUNK_BYTES  # (a test sets this one)
_count_newlines: Any = getattr(NATIVE, "count_newlines", None)  # (None: no accelerator)


def single_pass(data: bytes) -> bool:
    """Whether a file read whole (`data`) is decoded in one pass, its values kept."""
    if len(data) > SINGLE_PASS_MAX_BYTES:
        return False
    lines = _count_newlines(data) if _count_newlines is not None else data.count(b"\n")
    return len(data) * 22 // 10 + lines * 2200 <= KEPT_VALUES_MAX_BYTES


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
    kept: dict[int, Any] | None = {} if single_pass(data) else None
    scan = scan_source(data, keep=kept)
    # The bytes and decoded values are handed to the one pass over the records, so they
    # are freed when it ends (before the shard is encoded), not when this returns.
    box: dict[str, Any] = {"data": data, "kept": kept}
    del data, kept

    def entries(lineage: Lineage, share_ids: bool) -> Iterable[tuple[JsonValue, int]]:
        return kept_entries(box.pop("data"), scan.lines, lineage, box.pop("kept"), cancel=cancel, share_ids=share_ids)

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
                scan, hasher, total = scan_streaming(fh, cancel, STREAM_CHUNK_BYTES)
                if total != key.size or stat_key(file) != key:
                    continue

                def entries(lineage: Lineage, share_ids: bool) -> Iterator[tuple[JsonValue, int]]:
                    return entries_streaming(
                        fh,
                        scan.lines,
                        lineage.ordinals,
                        cancel=cancel,
                        chunk_bytes=STREAM_CHUNK_BYTES,
                        share_ids=share_ids,
                    )

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
        index: HotIndex | None = HotIndex().building() if searchable else None  # expand needs no index
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
    says so (`written`): the caller adopts it without writing, and neither the encoded
    record nor the encoded record list is sent back."""
    state = build_state(file, branches, tier, cfg, ref_id=ref_id, ref_cwd=ref_cwd)
    if index_dir is not None:
        write_records(index_dir, state)
        state.persisted = b""
        state.written = True
        # Nor is the encoded record list (a hot shard's, up to 8 MiB each: more than half of
        # what a hot build sends): the record on disk holds it, and the first append encodes
        # the list again (`persist._encode_entries` from the start), then extends it.
        state.entries_json, state.entries_encoded, state.entries_bytes = b"", 0, 0
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
