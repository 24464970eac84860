"""A session state and its disk cache records: finishing a built state (digest, encoded
entries), the shard/digest records written (temp file + rename), and a state loaded back
from a record. Below the builds (state_build.py) and appends (append.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import msgspec

from . import disk_cache, file_history, hot_cache, seal
from .hot_index import HotIndex
from .records import HotRecords
from .source import (
    Lineage,
    StatKey,
    oversize_reasons,
)
from .state import SessionState
from .tokenize import sort_lexical

if TYPE_CHECKING:
    from ..json_types import JsonObject, JsonValue

    Cancel = Callable[[], None] | None
    EntriesOf = Callable[[Lineage, bool], Iterable[tuple[JsonValue, int]]]  # (lineage, share_ids)

# Up to this size a file is read whole and each content line decoded once, its value kept
# until the lineage is known; that costs ~9x the file while it lasts (for small entries),
# and at this size is no faster than the streaming build (measured: 1.80 vs 1.89 s CPU for
# a 24 MB session of small entries), so the bound is low.
# A hot shard keeps its encoded records for appends only up to this size.
RETAIN_ENCODED_MAX_BYTES = 8 * 1024 * 1024


def finish_state(state: SessionState, cfg: Any, encode: bool = True) -> None:
    """Derive coverage, counts and the cache record from the accumulated pieces."""
    norm = state.normalizer
    assert norm is not None
    # (a line over the line limit is cut: `max_line_bytes`, kept in the coverage record)
    reasons = norm.coverage_reasons([*state.lineage.reasons, *oversize_reasons(state.scan)])
    if state.tier == "hot":
        entries = state.entries if state.entries is not None else HotRecords()
        if state.hot_index is not None:
            state.hot_index.compact()
        state.entry_count = len(entries)
        state.first_ts, state.last_ts = _ts_range(entries)
        state.coverage = {"complete": not reasons, "reasons": sort_lexical(reasons)}
        state.policy = disk_cache.shard_policy(cfg, state.branches, state.lineage.fingerprint)
        if encode:
            _encode_entries(state)
            # A large shard is neither kept encoded nor encoded whole: `write_records` writes it
            # streaming (`shard_pieces`); `persisted` stays empty.
            state.persisted = seal.apply_cache_metrics(shard_record(state), state.size) if state.entries_json else b""
    else:
        folder = state.folder
        assert folder is not None
        body = folder.record(reasons)
        state.policy = disk_cache.digest_policy(cfg, state.branches, state.lineage.fingerprint)
        record = {
            "cacheVersion": disk_cache.CACHE_VERSION,
            "kind": "digest",
            "sessionId": state.session_id,
            "file": state.file,
            "cwd": state.cwd,
            "firstTs": folder.first_ts,
            "lastTs": folder.last_ts,
            "entryCount": folder.entry_count,
            **body,
            "mtime": state.mtime,
            "size": state.size,
            "sourceHash": state.source_hash,
            "branches": state.branches,
            "lineageFingerprint": state.lineage.fingerprint,
            "policy": state.policy,
            "cacheBytes": 0,
            "cacheSourceRatio": 0,
            "engine": disk_cache.ENGINE_FORMAT,
            "statKey": state.key.as_list(),
            "leafId": state.lineage.leaf_id,
        }
        data = seal.fit_digest(record, state.size, cfg.max_cold_cache_bytes)
        state.persisted = data or b""
        _adopt_digest(state, record)


def _ts_range(entries: HotRecords) -> tuple[Any, Any]:
    """(smallest, largest) record timestamp, None for none (no list of them is built)."""
    lo = hi = None
    for t in entries.timestamps():
        if t is None:
            continue
        if lo is None or t < lo:
            lo = t
        if hi is None or t > hi:
            hi = t
    return lo, hi


def _adopt_digest(state: SessionState, record: JsonObject) -> None:
    state.digest = record
    state.vocab_set = frozenset()  # built from the vocabulary on first use (`digest_view`)
    cov = record["indexCoverage"]
    state.coverage = {"complete": cov["complete"], "reasons": list(cov["reasons"])}
    state.entry_count = record["entryCount"]
    state.first_ts = record["firstTs"]
    state.last_ts = record["lastTs"]


def _encode_entries(state: SessionState) -> None:
    """Keep `entries_json` equal to the encoding of `state.entries`, appending only the
    records added since the last call (an append never rewrites earlier records); or,
    for an encoding over RETAIN_ENCODED_MAX_BYTES, only its length (`entries_bytes`)."""
    entries = state.entries if state.entries is not None else HotRecords()
    done = state.entries_encoded
    if done == len(entries) and (state.entries_json or state.entries_bytes):
        return
    if 0 < done < len(entries) and (state.entries_json or state.entries_bytes):
        tail = b",".join(entries.encoded(disk_cache.encoder.encode, done))
        state.entries_encoded = len(entries)
        if state.entries_json:
            state.entries_json = state.entries_json[:-1] + b"," + tail + b"]"
            if len(state.entries_json) > RETAIN_ENCODED_MAX_BYTES:
                state.entries_json, state.entries_bytes = b"", len(state.entries_json)
        else:
            state.entries_bytes += 1 + len(tail)
        return
    total = 0
    # From a large source, count first (nothing kept while counting); keep the encoding
    # only when it turns out small. From a small one, keep it while counting.
    pieces: list[bytes] | None = [] if state.size <= RETAIN_ENCODED_MAX_BYTES else None
    for piece in _entries_pieces(entries):
        total += len(piece)
        if pieces is not None:
            pieces.append(bytes(piece))
            if total > RETAIN_ENCODED_MAX_BYTES:
                pieces = None  # too large to keep: count only
    if pieces is None and total <= RETAIN_ENCODED_MAX_BYTES:
        pieces = [bytes(p) for p in _entries_pieces(entries)]
    state.entries_encoded = len(entries)
    if pieces is not None:
        state.entries_json, state.entries_bytes = b"".join(pieces), 0
    else:
        state.entries_json, state.entries_bytes = b"", total


def _entries_pieces(entries: HotRecords) -> Iterable[Any]:
    """The JSON encoding of `entries` (a list of record objects) in pieces, a few
    thousand records at a time."""
    yield b"["
    first = True
    for data in entries.encoded(disk_cache.encoder.encode):
        if not first:
            yield b","
        first = False
        yield data
        del data
    yield b"]"


def shard_pieces(state: SessionState) -> Iterable[Any]:
    """The sealed shard record of a hot state, in pieces (what `write_records` writes)."""
    _encode_entries(state)  # (returns at once when the encoding or its length is current)
    if state.entries_json:
        return (seal.apply_cache_metrics(shard_record(state), state.size),)
    entries = state.entries if state.entries is not None else HotRecords()
    record = shard_record(state)
    return seal.sealed_stream(record, state.size, state.entries_bytes, lambda: _entries_pieces(entries))


def write_records(index_dir: str | None, state: SessionState) -> None:
    """Bring the disk cache in line with `state`: its record (shard or digest) and its
    file-operations table written, or both removed when it has none; the record of the
    other tier removed. A state whose records were written where it was built
    (`written`) only clears that mark."""
    if state.written:
        state.written = False
        return
    kind = "shard" if state.tier == "hot" else "digest"
    name = disk_cache.cache_name(state.file, state.branches, kind)
    files_name = file_history.cache_name(state.file, state.branches)
    data: Any = state.persisted
    if not data and kind == "shard" and state.encode and state.entries_bytes:
        data = shard_pieces(state)  # a large shard: written streaming, never held whole
    terms_name = hot_cache.cache_name(state.file, state.branches)
    if data:
        # the file-operations table first: a record is only used with its table
        if state.file_ops is not None:
            disk_cache.write_atomic(index_dir, files_name, file_history.encode_record(state))
        disk_cache.write_atomic(index_dir, name, data)
        terms = hot_cache.encode_record(state) if kind == "shard" else None
        if terms is not None:  # only used with exactly this shard (else rebuilt)
            disk_cache.write_atomic(index_dir, terms_name, terms)
        else:
            disk_cache.remove(index_dir, terms_name)
    else:
        disk_cache.remove(index_dir, name)
        disk_cache.remove(index_dir, files_name)
        disk_cache.remove(index_dir, terms_name)
    other = disk_cache.cache_name(state.file, state.branches, "digest" if kind == "shard" else "shard")
    disk_cache.remove(index_dir, other)


def read_file_ops(index_dir: str | None, limit: int, file: str, branches: str, state: SessionState) -> Any:
    """The disk cache's file-operation table for exactly `state`'s source, or None."""
    data = disk_cache.read_cache_file(index_dir, file_history.cache_name(file, branches), limit)
    return file_history.load_record(data, state) if data is not None else None


def shard_bytes(state: SessionState) -> bytes:
    """The whole sealed shard record of a hot state (tests; `write_records` streams it)."""
    return b"".join(bytes(p) for p in shard_pieces(state))


def shard_record(state: SessionState) -> JsonObject:
    return {
        "cacheVersion": disk_cache.CACHE_VERSION,
        "kind": "shard",
        "sessionFile": state.file,
        "sessionId": state.session_id,
        "mtime": state.mtime,
        "size": state.size,
        "sourceHash": state.source_hash,
        "branches": state.branches,
        "lineageFingerprint": state.lineage.fingerprint,
        "policy": state.policy,
        "cacheBytes": 0,
        "cacheSourceRatio": 0,
        "entries": msgspec.Raw(state.entries_json) if state.entries_json else None,  # None: written streaming
        "totalEntryCount": len(state.entries or []),
        "indexCoverage": state.coverage,
        "tier": "hot",
        "engine": disk_cache.ENGINE_FORMAT,
        "statKey": state.key.as_list(),
        "leafId": state.lineage.leaf_id,
        "cwd": state.cwd,
    }


def state_from_record(
    record: JsonObject,
    kind: str,
    file: str,
    branches: str,
    *,
    key: StatKey,
    cfg: Any,
    hot_index: HotIndex | None = None,
) -> SessionState | None:
    """A state from a validated cache record, when it is fresh for `key` and `cfg`. A
    shard's `hot_index` (persisted beside it, `hot_cache.load_record`: checked to be this
    shard's) is used as it is; without one the index is built from the records."""
    if record.get("statKey") != key.as_list():
        return None
    if record.get("branches") != branches:
        return None
    fp: str = record["lineageFingerprint"]  # `disk_cache.load_record` checked it: a 64-char string
    if kind == "shard":
        if record.get("sessionFile") != file or record.get("policy") != disk_cache.shard_policy(cfg, branches, fp):
            return None
    else:
        if record.get("file") != file or record.get("policy") != disk_cache.digest_policy(cfg, branches, fp):
            return None
    leaf = record.get("leafId")
    lineage = Lineage(branches, leaf, [], None, fp, [])
    state = SessionState(
        file=file,
        branches=branches,
        tier="hot" if kind == "shard" else "cold",
        key=key,
        size=key.size,
        mtime=key.mtime_ms,
        source_hash=record["sourceHash"],
        session_id=record["sessionId"],
        cwd=record.get("cwd", ""),
        lineage=lineage,
        coverage={},
        entry_count=0,
        policy=record["policy"],
    )
    if kind == "shard":
        loaded: list[Any] = record["entries"]  # undecoded records (disk_cache.load_record)
        entries = HotRecords()
        build = hot_index is None  # (`hot_cache.load_record` checked it holds exactly these records)
        index = HotIndex().building() if hot_index is None else hot_index
        for i, raw in enumerate(loaded):
            e: JsonValue = disk_cache.shard_entry(raw) if isinstance(raw, msgspec.Raw) else raw
            if not isinstance(e, dict) or "line" not in e or "role" not in e:
                return None
            entries.append(e)
            if build:
                index.add(e)
            loaded[i] = None  # one record at a time: its columns hold it now
        del loaded
        if build:
            index.compact()
        state.entries = entries
        state.hot_index = index
        cov = record["indexCoverage"]
        state.coverage = {"complete": cov["complete"], "reasons": list(cov["reasons"])}
        state.entry_count = len(entries)
        state.first_ts, state.last_ts = _ts_range(entries)
    else:
        _adopt_digest(state, record)
    return state
