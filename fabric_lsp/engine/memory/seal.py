"""Sealing the disk cache's records: the one JSON encoder of the cache, the cache metrics
spliced into an encoded record, the trailing `recordHash` (SHA-256 of the record with a
zero hash) and its check, and fitting a cold digest under `maxColdCacheBytes`. Below
disk_cache.py (which reads, validates and files the records)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import msgspec

from .tokenize import utf16_key

if TYPE_CHECKING:
    from ..json_types import JsonObject

encoder = msgspec.json.Encoder()  # the one JSON encoder of the cache (state_build.py encodes records with it)


_HASH_TAIL = len(',"recordHash":"') + 64 + len('"}')
_ZERO_HASH = "0" * 64


def _seal(data: bytes) -> bytes:
    """Fill the trailing `recordHash` (SHA-256 of the record with a zero hash), so a flipped
    byte that still parses can never pass for a valid record."""
    digest = hashlib.sha256(data).hexdigest().encode("ascii")
    return data[:-66] + digest + data[-2:]


def _seal_pieces(pieces: list[Any]) -> bytes:
    """`_seal(b"".join(pieces))` with one copy: the hash is taken over the pieces (the last
    one ends with the zero hash and `"}`, and is small)."""
    hasher = hashlib.sha256()
    for piece in pieces:
        hasher.update(piece)
    last = bytes(pieces[-1])
    assert len(last) >= 66
    pieces[-1] = last[:-66] + hasher.hexdigest().encode("ascii") + last[-2:]
    return b"".join(pieces)


def sealed(data: bytes) -> bool:
    if len(data) < _HASH_TAIL or not data.endswith(b'"}') or data[-_HASH_TAIL:-66] != b',"recordHash":"':
        return False
    claimed = data[-66:-2]
    hasher = hashlib.sha256(memoryview(data)[:-66])  # no copy of a large record
    hasher.update(_ZERO_HASH.encode("ascii"))
    hasher.update(data[-2:])
    return hasher.hexdigest().encode("ascii") == claimed


_METRICS_AT_ZERO = b'"cacheBytes":0,"cacheSourceRatio":0,'
_ENTRIES_MARK = msgspec.Raw(b"0")  # stands in for a large encoded `entries` while the rest is encoded
_SPLICE_MIN = 1 << 16


def apply_cache_metrics(record: JsonObject, size: int) -> bytes:
    """Set `cacheBytes` to the exact encoded size (iterating to a fixed point) and return
    the sealed encoding (`recordHash` last).

    The record is encoded once with both metrics at 0; the iteration then only needs the
    lengths of the numbers, and the final bytes are that encoding with the two numbers
    spliced in (they are adjacent top-level keys, and every key before them holds a
    scalar, a list of scalars or counts >= 1, so the first `"cacheBytes":0,` is theirs).
    A large `entries` value already encoded (`msgspec.Raw`, a hot shard's records) is not
    re-encoded or copied on the way: the pieces are hashed as they are and joined once.
    `apply_cache_metrics_slow` is the plain re-encoding loop (the oracle for tests)."""
    raw = record.get("entries")
    big = raw if isinstance(raw, msgspec.Raw) and len(raw) > _SPLICE_MIN else None
    layout = _spliced_layout(record, size, None if big is None else len(big))
    if layout is None:
        return apply_cache_metrics_slow(record, size)
    head, tail = layout
    pieces = [*head, *([big] if big is not None else []), *tail]
    return _seal_pieces(pieces)


def sealed_stream(
    record: JsonObject, size: int, entries_len: int, entries: Callable[[], Iterable[Any]]
) -> Iterator[Any]:
    """The bytes `apply_cache_metrics` gives for `record`, in pieces, where the record's
    `entries` is given as the length of its encoding and a function yielding that
    encoding in pieces (read once): a large hot shard is written without ever being held
    whole. The last piece carries the seal."""
    layout = _spliced_layout(record, size, entries_len)
    assert layout is not None, "a shard record always has its metrics before its entries"
    head, tail = layout
    hasher = hashlib.sha256()
    for piece in head:
        hasher.update(piece)
        yield piece
    written = 0
    for piece in entries():
        hasher.update(piece)
        written += len(piece)
        yield piece
    assert written == entries_len, "the entries changed while the shard was written"
    last = b"".join(tail)
    hasher.update(last)
    yield last[:-66] + hasher.hexdigest().encode("ascii") + last[-2:]


def _metrics(rest: int, size: int, cache_bytes: Any, ratio: Any) -> tuple[Any, Any]:
    """The metrics `apply_cache_metrics` leaves in a record whose bytes other than the two
    numbers are `rest`, starting from the values the record holds (`apply_cache_metrics_slow`'s
    loop on lengths alone). The start matters: a record can have two self-consistent
    sizes (978 bytes with a ratio of 122.25, 979 with 122.375), and the loop settles on
    the one next to where it starts, as the reference's does."""

    def length(cb: Any, r: Any) -> int:
        return rest + len(encoder.encode(cb)) + len(encoder.encode(r))

    last = -1
    for _ in range(5):
        n = length(cache_bytes, ratio)
        cache_bytes = n
        ratio = 0 if size == 0 else float(f"{n / size:.6f}")
        if n == last:
            break
        last = n
    return length(cache_bytes, ratio), ratio


def _rest_length(record: JsonObject) -> int:
    """The length of the record's sealed encoding less its two metrics' numbers (the record
    is left as it was, but for a zero `recordHash`, moved last)."""
    cache_bytes, ratio = record["cacheBytes"], record["cacheSourceRatio"]
    record.pop("recordHash", None)
    record["recordHash"] = _ZERO_HASH
    record["cacheBytes"] = record["cacheSourceRatio"] = 0
    try:
        return len(encoder.encode(record)) - 2
    finally:
        record["cacheBytes"], record["cacheSourceRatio"] = cache_bytes, ratio


def _spliced_layout(record: JsonObject, size: int, big_len: int | None) -> tuple[list[bytes], list[bytes]] | None:
    """The pieces of the record's encoding (zero hash) before and after its `entries`
    value when that value is left out (`big_len` is its encoded length), or the whole
    encoding as `head` when `big_len` is None. Sets the record's metrics. None when the
    layout is not the expected one (the caller re-encodes)."""
    record.pop("recordHash", None)
    record["recordHash"] = _ZERO_HASH
    cache_bytes, ratio = record["cacheBytes"], record["cacheSourceRatio"]
    record["cacheBytes"] = 0
    record["cacheSourceRatio"] = 0
    if big_len is not None:
        saved = record["entries"]
        record["entries"] = _ENTRIES_MARK
        try:
            base = encoder.encode(record)
        finally:
            record["entries"] = saved
    else:
        base = encoder.encode(record)
    at = base.find(_METRICS_AT_ZERO)
    cut = -1
    if big_len is not None:
        cut = base.find(b'"entries":' + bytes(_ENTRIES_MARK), at + len(_METRICS_AT_ZERO))
    if at < 0 or (big_len is not None and cut < 0):
        record["cacheBytes"], record["cacheSourceRatio"] = cache_bytes, ratio
        return None
    head = base[: at + len(b'"cacheBytes":')]
    if big_len is None:
        tails = [base[at + len(_METRICS_AT_ZERO) :]]
    else:
        mark_at = cut + len(b'"entries":')
        tails = [base[at + len(_METRICS_AT_ZERO) : mark_at], base[mark_at + len(_ENTRIES_MARK) :]]
    rest = len(head) + 1 + len(b'"cacheSourceRatio":') + 1 + sum(len(t) for t in tails) + (big_len or 0)

    cache_bytes, ratio = _metrics(rest, size, cache_bytes, ratio)
    record["cacheBytes"], record["cacheSourceRatio"] = cache_bytes, ratio
    first = [head, encoder.encode(cache_bytes), b',"cacheSourceRatio":', encoder.encode(ratio), b","]
    if big_len is None:
        return first + tails, []
    return first + tails[:1], tails[1:]


def apply_cache_metrics_slow(record: JsonObject, size: int) -> bytes:
    record.pop("recordHash", None)
    record["recordHash"] = _ZERO_HASH
    last = -1
    for _ in range(5):
        data = encoder.encode(record)
        n = len(data)
        record["cacheBytes"] = n
        record["cacheSourceRatio"] = 0 if size == 0 else float(f"{n / size:.6f}")
        if n == last:
            break
        last = n
    data = encoder.encode(record)
    record["cacheBytes"] = len(data)
    data = encoder.encode(record)
    return _seal(data)


def fit_digest(record: JsonObject, size: int, max_bytes: int) -> bytes | None:
    """Encode a digest within `max_bytes`, keeping exact prefixes of addresses, then of
    vocabulary, and reporting `max_cold_cache_bytes` when anything was cut."""
    data = apply_cache_metrics(record, size)
    if len(data) <= max_bytes:
        return data
    cov = record["indexCoverage"]
    cov["complete"] = False
    if "max_cold_cache_bytes" not in cov["reasons"]:
        cov["reasons"] = sorted(cov["reasons"] + ["max_cold_cache_bytes"], key=utf16_key)

    def fits() -> bool:
        return len(apply_cache_metrics(record, size)) <= max_bytes

    def largest_prefix(key: str, vocabulary: bool) -> None:
        """Cut record[key] to the prefix the reference's binary search keeps: its steps,
        each applying the metrics to the record as the previous step left them (so fitting
        is not always monotonic in the prefix's length: see `_metrics`), are replayed on
        lengths alone. A prefix's bytes are the record's less the items after it (their
        encoded lengths and commas) and, for the vocabulary, with its `vocabularyBytes`;
        the record is encoded once here instead of once per step."""
        items: list[Any] = record[key]
        ends = [0]  # ends[k]: the first k items encoded with their k-1 commas
        total = 0
        for i, item in enumerate(items):
            total += len(encoder.encode(item)) + (1 if i else 0)
            ends.append(total)
        rest_all = _rest_length(record) - total
        if vocabulary:
            rest_all -= len(encoder.encode(cov["vocabularyBytes"]))

        def rest_at(k: int) -> int:
            # (a prefix of the vocabulary encodes in 2 + ends[k] bytes: its vocabularyBytes)
            return rest_all + ends[k] + (len(encoder.encode(2 + ends[k])) if vocabulary else 0)

        cache_bytes, ratio = record["cacheBytes"], record["cacheSourceRatio"]
        lo, hi = 0, len(items)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            rest = rest_at(mid)
            cache_bytes, ratio = _metrics(rest, size, cache_bytes, ratio)
            if rest + len(encoder.encode(cache_bytes)) + len(encoder.encode(ratio)) <= max_bytes:
                lo = mid
            else:
                hi = mid - 1
        record[key] = items[:lo]
        if vocabulary:
            cov["vocabularyBytes"] = 2 + ends[lo]
        record["cacheBytes"], record["cacheSourceRatio"] = cache_bytes, ratio

    largest_prefix("addresses", False)
    if not fits():
        largest_prefix("vocabulary", True)
    data = apply_cache_metrics(record, size)
    return data if len(data) <= max_bytes else None
