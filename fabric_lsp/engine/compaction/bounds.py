"""Bounds helpers (digest §1): UTF-8 measurement and clipping, canonical text,
earliest+latest sampling and omission lines."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from ..jsstr import is_json_object, split_ws_words

MAX_SUMMARY_BYTES = 32768
ARROW = "\u2192"


def utf8_bytes(s: str) -> int:
    if s.isascii():
        return len(s)
    return len(s.encode("utf-8", "surrogatepass"))


def clip_utf8(text: str, max_bytes: int, suffix: str = "\u2026") -> str:
    """Whole code points while they fit in `max_bytes - len(suffix)`, then the suffix."""
    if max_bytes <= 0:
        return ""
    data: bytes | None = None  # the UTF-8 of non-ASCII text
    if text.isascii():
        if len(text) <= max_bytes:
            return text
    else:
        data = text.encode("utf-8", "surrogatepass")
        if len(data) <= max_bytes:
            return text
    suffix_bytes = utf8_bytes(suffix)
    if suffix_bytes >= max_bytes:
        return ""
    limit = max_bytes - suffix_bytes
    if data is None:
        return text[:limit] + suffix
    cut = limit
    # back off to a code point boundary (continuation bytes are 10xxxxxx)
    while cut > 0 and (data[cut] & 0xC0) == 0x80:
        cut -= 1
    return data[:cut].decode("utf-8", "surrogatepass") + suffix


def canonicalize_text(source: str, max_bytes: int = 8192) -> dict[str, Any]:
    canonical = " ".join(split_ws_words(source))
    source_bytes = utf8_bytes(canonical)
    return {
        "canonical": canonical,
        "text": clip_utf8(canonical, max_bytes),
        "sourceBytes": source_bytes,
        "truncated": source_bytes > max_bytes,
    }


T = TypeVar("T")


class Sample(Generic[T]):
    __slots__ = ("values", "omitted", "omitted_first", "omitted_last", "split_index")

    def __init__(self, values: list[T], omitted: int, first: str | None, last: str | None, split: int):
        self.values = values
        self.omitted = omitted
        self.omitted_first = first
        self.omitted_last = last
        self.split_index = split


def _entry_id(item: Any) -> str | None:
    if is_json_object(item):
        return item.get("entryId")
    return getattr(item, "entryId", None)


def sample_addressed(items: Iterable[T], max_items: int, entry_id: Callable[[T], str | None] = _entry_id) -> Sample[T]:
    """Earliest `ceil(max/2)` + sliding latest `floor(max/2)`; displaced items are
    counted with the entry ids of the first and last displaced item."""
    earliest_limit = -(-max_items // 2)
    latest_limit = max_items // 2
    seq = items if isinstance(items, list) else list(items)
    n = len(seq)
    if n <= earliest_limit + latest_limit:
        return Sample(list(seq), 0, None, None, min(n, earliest_limit))
    omitted = n - earliest_limit - latest_limit
    first = last = None
    # the displaced items are seq[earliest_limit : n - latest_limit]: `first ??= id` over
    # them, `last = id` of the last one
    for k in range(earliest_limit, n - latest_limit):
        eid = entry_id(seq[k])
        if eid is not None:
            first = eid
            break
    last = entry_id(seq[n - latest_limit - 1])
    values = seq[:earliest_limit] + (seq[n - latest_limit :] if latest_limit else [])
    return Sample(values, omitted, first, last, earliest_limit)


def range_text(first: str | None, last: str | None) -> str:
    if first or last:
        return f"{first or '(start)'} {ARROW} {last or '(end)'}"
    return "(unknown range)"


def omission_line(count: int, first: str | None, last: str | None, noun: str) -> str:
    return f"\u2026 omitted {count} {noun}; source entries {range_text(first, last)}"
