"""The hot BM25 index of a shard, persisted beside it, so a restarted server loads a hot
session without tokenizing every record again.

Loading a hot shard used to rebuild its `HotIndex` from the records' texts: on a 200 MB
corpus that was 80% of a restarted server's first global recall. The index is a pure
function of the shard's records, so it is written with them (`<base>[.all].terms.json`,
sealed like the V5 records) and trusted only for exactly the shard it was built from:
the same source (path, branch mode, stat key, source hash, lineage), the same record
policy, the same number of records and the same engine format (which names the Unicode
version of the tokenizer). Anything else, or a file that does not check out, is ignored
and the index is rebuilt from the records as before (and written again).

Layout: the terms in the index's order, each term's number of postings, and every
posting (`index << 32 | tf`, as `HotIndex` keeps them) in one flat array; document
lengths and segment numbers are arrays too. Arrays are stored as base64 of their native
bytes, with the byte order recorded.
"""

from __future__ import annotations

import binascii
import sys
from array import array
from itertools import accumulate
from typing import TYPE_CHECKING, Any, cast

import msgspec

from ..native import NATIVE
from . import disk_cache, seal
from .hot_index import HotIndex

if TYPE_CHECKING:
    from .source import StatKey
    from .state import SessionState

RECORD_KIND = "hotIndex"
_STR: frozenset[type] = frozenset((str,))
FORMAT = 1

# `encode_record`'s loop over the postings in C (engine/_native.c), when it is built
_postings_columns: Any = getattr(NATIVE, "postings_columns", None)


def cache_name(session_file: str, branches: str) -> str:
    return disk_cache.cache_name(session_file, branches, RECORD_KIND)


def _identity(
    file: str, branches: str, *, source_hash: Any, fingerprint: Any, policy: Any, key: StatKey, entry_count: int
) -> dict[str, Any]:
    return {
        "cacheVersion": disk_cache.CACHE_VERSION,
        "kind": RECORD_KIND,
        "format": FORMAT,
        "sessionFile": file,
        "branches": branches,
        "sourceHash": source_hash,
        "lineageFingerprint": fingerprint,
        "policy": policy,
        "engine": disk_cache.ENGINE_FORMAT,
        "statKey": key.as_list(),
        "entryCount": entry_count,
        "byteOrder": sys.byteorder,
    }


def _b64(a: array[int]) -> str:
    return binascii.b2a_base64(a.tobytes(), newline=False).decode("ascii")


def encode_record(state: SessionState) -> bytes | None:
    """The sealed record of `state.hot_index` (None for a state without one)."""
    index = state.hot_index
    if index is None or state.entries is None:
        return None
    terms: list[str]
    counts, flat = array("I"), array("Q")
    if _postings_columns is not None:  # the loop below in C (test_hot_records.py)
        terms, count_bytes, flat_bytes = _postings_columns(index.postings)
        counts.frombytes(count_bytes)
        flat.frombytes(flat_bytes)
    else:
        terms = []
        plist: Any
        for term, plist in index.postings.items():
            terms.append(term)
            if type(plist) is int:
                counts.append(1)
                flat.append(plist)
            else:
                counts.append(len(plist))
                flat.extend(plist)
    record = _identity(
        state.file,
        state.branches,
        source_hash=state.source_hash,
        fingerprint=state.lineage.fingerprint,
        policy=state.policy,
        key=state.key,
        entry_count=len(state.entries),
    )
    record.update(
        {
            "cacheBytes": 0,
            "cacheSourceRatio": 0,
            "totalLen": index.total_len,
            "segStarts": _b64(array("I", index.seg_starts)),
            "docLen": _b64(index.doc_len),
            "segOf": _b64(index.seg_of),
            "counts": _b64(counts),
            "postings": _b64(flat),
            "terms": msgspec.Raw(msgspec.json.encode(terms)),
        }
    )
    return seal.apply_cache_metrics(record, state.size)


def _array(code: str, value: Any) -> array[int] | None:
    if not isinstance(value, str):
        return None
    try:
        raw = binascii.a2b_base64(value, strict_mode=True)
    except (binascii.Error, ValueError):
        return None
    out: array[int] = array(code)
    if len(raw) % out.itemsize:
        return None
    out.frombytes(raw)
    return out


def load_record(data: bytes, shard: dict[str, Any], file: str, branches: str, key: StatKey) -> HotIndex | None:
    """The index in `data` when it is a sealed record of ours for exactly the `shard`
    record (as `disk_cache.load_record` gives it) of `file` at `key`; None otherwise."""
    entries: Any = shard.get("entries")
    if not isinstance(entries, list):
        return None
    entry_count = len(cast("list[Any]", entries))
    if not disk_cache.sealed(data):
        return None
    rec = disk_cache.decode_record(data)
    if rec is None:
        return None
    expected = _identity(
        file,
        branches,
        source_hash=shard.get("sourceHash"),
        fingerprint=shard.get("lineageFingerprint"),
        policy=shard.get("policy"),
        key=key,
        entry_count=entry_count,
    )
    expected["cacheBytes"] = len(data)
    for name, value in expected.items():
        if rec.get(name) != value or isinstance(rec.get(name), bool) != isinstance(value, bool):
            return None
    doc_len, seg_of, seg_starts = (
        _array("I", rec.get("docLen")),
        _array("I", rec.get("segOf")),
        _array("I", rec.get("segStarts")),
    )
    counts, flat = _array("I", rec.get("counts")), _array("Q", rec.get("postings"))
    terms: Any = rec.get("terms")
    total_len: Any = rec.get("totalLen")
    if doc_len is None or seg_of is None or seg_starts is None or counts is None or flat is None:
        return None
    if (
        not isinstance(terms, list)
        or not isinstance(total_len, int)
        or isinstance(total_len, bool)
        or len(cast("list[Any]", terms)) != len(counts)
        or sum(counts) != len(flat)
    ):
        return None
    if len(doc_len) != entry_count or len(seg_of) != entry_count or total_len != sum(doc_len):
        return None
    if entry_count and (not seg_starts or seg_starts[0] != 0 or max(seg_of) >= len(seg_starts)):
        return None
    if 0 in counts or not set(map(type, cast("list[Any]", terms))) <= _STR:
        return None
    ends = list(accumulate(counts))
    # the forms `HotIndex.build` leaves: one bare int, a short list, else an array
    postings: dict[str, Any] = dict(
        zip(
            cast("list[str]", terms),
            [
                flat[a] if b - a == 1 else (flat[a:b].tolist() if b - a <= 8 else flat[a:b])
                for a, b in zip([0, *ends[:-1]], ends)
            ],
        )
    )
    if len(postings) != len(counts):
        return None  # a repeated term
    return HotIndex(
        doc_len=doc_len, postings=postings, seg_starts=seg_starts.tolist(), seg_of=seg_of, total_len=total_len
    )
