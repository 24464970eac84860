"""The derived state of one session for one branch mode and tier (plain data: what a
build, a cache load or an append produces, and what the indexes and queries read).

A hot state holds the truncated records and their inverted index; a cold state holds the
V5 digest (vocabulary, addresses, counts). Either carries the source identity
(`StatKey`, size, mtime, SHA-256 `sourceHash`) and the lineage fingerprint, so the
engine can answer integrity checks without re-reading an unchanged file. Built by
state_build.py; imports only the layers below it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import disk_cache
from .hot_index import HotIndex
from .records import HotRecords
from .search import DigestView, HotView
from .source import Lineage, SourceScan, StatKey

if TYPE_CHECKING:
    from ..json_types import JsonObject
    from .digest_fold import DigestFolder
    from .entry_text import Normalizer


class SourceMissing(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class SessionState:
    file: str
    branches: str
    tier: str  # "hot" | "cold"
    key: StatKey
    size: int
    mtime: float  # ms
    source_hash: str
    session_id: str
    cwd: str
    lineage: Lineage
    coverage: JsonObject  # {complete, reasons}
    entry_count: int
    first_ts: float | None = None
    last_ts: float | None = None
    policy: str = ""
    # hot
    entries: HotRecords | None = None
    hot_index: HotIndex | None = None
    # cold
    digest: JsonObject | None = None
    vocab_set: frozenset[str] = frozenset()
    # kept only for in-place append
    scan: SourceScan | None = None
    path_ordinals: Sequence[int] = field(default_factory=list[int])
    normalizer: Normalizer | None = None
    folder: DigestFolder | None = None
    hasher: Any = None
    persisted: bytes = b""  # encoded cache record, when it fitted
    encode: bool = True  # False for states that are never persisted (hydration, expand)
    live_leaf: str | None = None  # built on a live Pi's leaf (never persisted, never extended)
    entries_json: bytes = b""  # the encoded `entries` list, extended in place on append
    entries_encoded: int = 0  # how many entries `entries_json` holds (or `entries_bytes` counts)
    entries_bytes: int = 0  # the encoded length of a large `entries` list written streaming
    # file_history.FileOpsCollector: this lineage's typed file operations (a property below:
    # a state loaded by a one-shot process reads its table only when asked, `defer_file_ops`)
    file_ops: Any = None
    # cold, once held by the engine: the vocabulary lives in a shared cold_index.ColdTermTable
    cold_slot: int | None = None
    cold_table: Any = None
    view_cache: Any = None  # (what the view was made from ..., DigestView): see digest_view
    written: bool = False  # its disk cache records were written where it was built (a builder child)
    vocab_key: bytes | None = None  # a cold digest's vocabulary key, when its builder computed it (cold_index)

    def defer_file_ops(self, load: Callable[[], Any]) -> None:
        """Leave the file-operation table unread until `file_ops` is first read: then
        `load()` gives it (a process answering one recall never reads the tables)."""
        self.__dict__["_file_ops_load"] = load

    def file_ops_deferred(self) -> bool:
        """True while the table is left to `defer_file_ops`' loader (not read yet)."""
        return self.__dict__.get("_file_ops_load") is not None

    def map_file_ops(self, fn: Callable[[Any], Any]) -> None:
        """`file_ops = fn(file_ops)`: now, or when a deferred table is read."""
        load: Callable[[], Any] | None = self.__dict__.get("_file_ops_load")
        if load is None:
            self.file_ops = fn(self.file_ops)
        else:
            self.defer_file_ops(lambda: fn(load()))

    def __getstate__(self) -> dict[str, Any]:
        self.file_ops  # noqa: B018 (a deferred table is read: a loader does not pickle)
        return self.__dict__

    def hot_view(self, tier: str | None = None) -> HotView:
        assert self.entries is not None and self.hot_index is not None
        return HotView(
            self.session_id,
            self.file,
            self.source_hash,
            self.branches,
            self.lineage.fingerprint,
            self.mtime,
            self.entries,
            self.hot_index,
            tier or "hot",
        )

    def digest_view(self) -> DigestView:
        """The search view of this cold state; made once per digest and slot (every global
        query asks every cold session for it)."""
        assert self.digest is not None
        # Everything the view holds is derived from these: the digest and lineage objects
        # (replaced, never mutated, when the state is rebuilt or appended to), the term
        # table slot, and the source identity (id, cwd and fingerprint come from its bytes).
        cached = self.view_cache
        if (
            cached is not None
            and cached[0] is self.digest
            and cached[1] is self.lineage
            and cached[2] == self.cold_slot
            and cached[3] is self.cold_table
            and cached[4] == self.source_hash
            and cached[5] == self.mtime
            and cached[6] == self.session_id
            and cached[7] == self.cwd
        ):
            return cached[8]
        view = self._make_digest_view()
        self.view_cache = (
            self.digest,
            self.lineage,
            self.cold_slot,
            self.cold_table,
            self.source_hash,
            self.mtime,
            self.session_id,
            self.cwd,
            view,
        )
        return view

    def _make_digest_view(self) -> DigestView:
        assert self.digest is not None
        if self.cold_slot is not None and self.cold_table is not None:
            return DigestView(
                self.session_id,
                self.file,
                self.source_hash,
                self.branches,
                self.lineage.fingerprint,
                self.cwd,
                self.digest.get("lastTs"),
                self.mtime,
                self.cold_table.vocabulary(self.cold_slot),
                self.cold_table.terms_set(self.cold_slot),
            )
        vocabulary = self.digest["vocabulary"]
        if isinstance(vocabulary, disk_cache.StoredVocabulary):  # loaded, not held by a term table
            vocabulary = self.digest["vocabulary"] = vocabulary.terms()
        if not self.vocab_set and vocabulary:
            self.vocab_set = frozenset(vocabulary)
        return DigestView(
            self.session_id,
            self.file,
            self.source_hash,
            self.branches,
            self.lineage.fingerprint,
            self.cwd,
            self.digest.get("lastTs"),
            self.mtime,
            vocabulary,
            self.vocab_set,
        )


def _get_file_ops(state: SessionState) -> Any:
    d = state.__dict__
    load = d.get("_file_ops_load")
    if load is not None:
        d["_file_ops_load"] = None
        d["_file_ops"] = load()
    return d.get("_file_ops")


def _set_file_ops(state: SessionState, value: Any) -> None:
    state.__dict__["_file_ops_load"] = None  # (set: whatever was deferred is replaced)
    state.__dict__["_file_ops"] = value


# `file_ops` stays a dataclass field (the constructor takes it); reads and writes go
# through this property, so a deferred table is read on first use (`defer_file_ops`).
SessionState.file_ops = property(_get_file_ops, _set_file_ops)  # type: ignore[assignment]
