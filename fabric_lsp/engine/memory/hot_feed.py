"""A hot build's loop over its entries (state_build.py): each entry's records appended to
the session's `HotRecords` and added to its `HotIndex` (and handed to a sink), the common
ones in one call of the C accelerator (`_native.hot_plain`) with the same effects as the
Python steps (tests/engine/memory/test_hot_plain.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..native import NATIVE
from . import file_history
from .entry_text import Normalizer
from .hot_index import HotIndex
from .records import HotRecords, RecordSink

if TYPE_CHECKING:
    from ..json_types import JsonValue

# `feed_entries`' C path (None: not built, or FABRIC_LSP_NATIVE=0)
_hot_plain: Any = getattr(NATIVE, "hot_plain", None)


def hot_spec(norm: Normalizer, records: HotRecords, index: HotIndex | None) -> tuple[Any, ...] | None:
    """What `_native.hot_plain` needs to feed entries the way `norm.feed` feeds them into
    `records` and `index` (None without the accelerator, or without an index)."""
    if _hot_plain is None or index is None:
        return None
    return (
        norm,
        *file_history.c_observer(norm.file_ops),
        norm.session_file,
        norm.session_id,
        *records.c_columns(),
        *index.c_parts(),
        *norm.plain_options(),
    )


def feed_entries(
    norm: Normalizer,
    records: HotRecords,
    index: HotIndex | None,
    entries: Iterable[tuple[JsonValue, int]],
    sink: RecordSink | None = None,
) -> None:
    """The records of each (entry, line) (`norm.feed`) appended to `records`, added to
    `index` (None: not indexed) and handed to `sink`: an entry of a user, assistant or
    plain tool-result message in one C call (`_native.hot_plain`, without a sink), any
    other in Python."""
    feed = norm.feed
    spec = hot_spec(norm, records, index) if sink is None else None
    if spec is None:
        for raw, line in entries:
            for rec in feed(raw, line):
                records.append(rec)
                if index is not None:
                    index.add(rec)
                if sink is not None:
                    sink(rec)
        return
    hot_plain = _hot_plain
    assert index is not None and hot_plain is not None
    for raw, line in entries:
        if not hot_plain(raw, line, spec):
            for rec in feed(raw, line):
                records.append(rec)
                index.add(rec)
