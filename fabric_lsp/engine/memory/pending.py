"""Hot records a one-shot process (the CLI computing one answer and exiting:
`MemoryEngine.one_shot`) may never read: a hot shard loaded from the disk cache keeps its
records undecoded until something reads them (`PendingRecords`). Used by index.py."""

from __future__ import annotations

from typing import Any, cast, overload

import msgspec

from . import disk_cache
from .persist import state_from_record
from .records import HotRecords
from .state import SessionState


class _Stamp(msgspec.Struct):
    """What the eager load checks of every shard record (`state_from_record`: an object
    with `line` and `role`, `text` and `sessionFile` strings: `disk_cache.shard_entry`), and
    its timestamp; the rest of it is skipped undecoded."""

    line: Any
    role: Any
    text: str
    sessionFile: str
    timestamp: Any = None


_stamp = msgspec.json.Decoder(_Stamp)


class PendingRecords(HotRecords):
    """The records of a hot shard loaded from the disk cache by a one-shot process
    (`MemoryEngine.one_shot`: the CLI computing one answer), decoded only when read.

    A global recall of a 200 MB history loads 50 hot shards of ~34,000 records, of which
    its page shows a few dozen: its BM25 runs on the persisted index (hot_cache.py), and a
    view needs only the number of records and the first one. So until something reads the
    columns, `len` and `records[i]` come from the undecoded records (`disk_cache.shard_entry`,
    the dict the eager load would hold); any other use decodes them all into the columns
    (`__getattr__` is only reached while a column is unset), after which this is a plain
    `HotRecords`. A server never holds one (it decodes every shard as it loads it)."""

    __slots__ = ("_pending", "_file")

    def __init__(self, raw: list[Any], file: str) -> None:  # (the columns stay unset: see above)
        self._pending: list[Any] | None = raw
        self._file = file

    def __len__(self) -> int:
        pending = self._pending
        return len(pending) if pending is not None else super().__len__()

    @overload
    def __getitem__(self, pos: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, pos: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, pos: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        pending = self._pending
        if pending is None or isinstance(pos, slice):
            return super().__getitem__(pos)
        return self._decode(pending[pos])

    def __getattr__(self, name: str) -> Any:
        if name not in HotRecords.__slots__ or self._pending is None:
            raise AttributeError(name)
        self._materialize()
        return getattr(self, name)

    def _decode(self, raw: Any) -> dict[str, Any]:
        rec = disk_cache.shard_entry(raw)
        if rec is None or "line" not in rec or "role" not in rec:  # (never: `_Stamp` checked them when loaded)
            raise RuntimeError(f"a record of the cached hot shard of {self._file} is not a record")
        return rec

    def _materialize(self) -> None:
        pending = self._pending
        assert pending is not None
        HotRecords.__init__(self)
        for i, raw in enumerate(pending):
            self.append(self._decode(raw))
            pending[i] = None  # one record at a time: its columns hold it now
        self._pending = None


def with_pending_records(
    record: dict[str, Any],
    file: str,
    branches: str,
    *,
    key: Any,
    cfg: Any,
    hot_index: Any,
) -> SessionState | None:
    """`state_from_record` of a shard with a persisted index, its records left undecoded
    (`PendingRecords`); None when a record fails the eager load's checks (then the
    eager load decides) or the state would not be fresh."""
    raw: Any = record.get("entries")
    if not isinstance(raw, list):
        return None
    decode = _stamp.decode
    try:
        stamps = [decode(item).timestamp for item in cast("list[Any]", raw)]
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    state = state_from_record({**record, "entries": []}, "shard", file, branches, key=key, cfg=cfg, hot_index=hot_index)
    if state is None:
        return None
    lo = hi = None  # the timestamp range, as the eager load finds it
    for t in stamps:
        if t is None:
            continue
        if lo is None or t < lo:
            lo = t
        if hi is None or t > hi:
            hi = t
    state.entries = PendingRecords(cast("list[Any]", raw), file)
    state.entry_count = len(stamps)
    state.first_ts, state.last_ts = lo, hi
    return state
