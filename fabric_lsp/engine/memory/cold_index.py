"""The compact in-memory form of every cold digest's vocabulary, and its inverted map.

One interned term table (term -> integer id) is shared by all cold sessions. Each cold
session owns a slot: an `array('I')` of term ids in its vocabulary's order (the lexical
order of the V5 digest, which regex haystacks and `matchedTerms` keep), and every term id
has an `array('I')` of the slots that contain it (its postings, ascending because slots
are handed out in increasing order and only ever appended).

So a literal query touches only the postings of its terms (never every session's
vocabulary), and memory grows with the total number of (session, term) pairs at 8 bytes
each, plus one string per distinct term, instead of a Python set of strings per session.

Removed slots are tombstoned; postings are compacted when more than half of the slots
they may mention are dead, so a long-running server does not accumulate garbage.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from operator import methodcaller
from typing import TYPE_CHECKING, Any, Optional, cast, overload

from .file_history import packed
from .search import CANDIDATE_DIGESTS, DigestHit, DigestView, rank_digest_hits

if TYPE_CHECKING:
    from .sessions import SessionState


class ColdTermTable:
    """Interned terms, per-slot term-id arrays and term -> slots postings."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.names: list[str] = []
        self.postings: list[array[int]] = []  # term id -> ascending live-or-dead slots
        self.slots: dict[int, array[int]] = {}  # live slot -> term ids (vocabulary order)
        self._next_slot = 0
        self._dead = 0

    def __len__(self) -> int:
        return len(self.slots)

    def add(self, vocabulary: Iterable[str]) -> int:
        """A new slot holding `vocabulary` (its order is kept)."""
        slot = self._next_slot
        self._next_slot += 1
        ids, names, postings = self.ids, self.names, self.postings
        terms = vocabulary if isinstance(vocabulary, list) else list(vocabulary)
        # The known terms' ids and their postings' appends run as C loops (map); only
        # the terms new to the table take a Python step (a new id, in vocabulary order).
        found: list[Optional[int]] = list(map(ids.get, terms))
        known: list[int] = [t for t in found if t is not None] if None in found else cast("list[int]", found)
        if len(known) < len(found):
            for i, tid in enumerate(found):
                if tid is None:
                    tid = ids.get(terms[i])  # a term repeated in `terms` is new only once
                    if tid is None:
                        tid = len(names)
                        ids[terms[i]] = tid
                        names.append(terms[i])
                        postings.append(array("I", (slot,)))
                    else:
                        postings[tid].append(slot)
                    found[i] = tid
        deque(map(methodcaller("append", slot), map(postings.__getitem__, known)), maxlen=0)
        self.slots[slot] = array("I", cast("list[int]", found))  # every id is set now
        return slot

    def remove(self, slot: int) -> None:
        if self.slots.pop(slot, None) is None:
            return
        self._dead += 1
        if self._dead > max(64, len(self.slots)):
            self._compact()

    def _compact(self) -> None:
        live = self.slots
        for tid, plist in enumerate(self.postings):
            if plist:
                self.postings[tid] = array("I", (s for s in plist if s in live))
        self._dead = 0

    def vocabulary(self, slot: int) -> TermsView:
        return TermsView(self, self.slots.get(slot, array("I")))

    def sessions_with(self, term: str) -> array[int]:
        """Slots (live or dead: the caller filters by its own scope) that contain `term`."""
        tid = self.ids.get(term)
        if tid is None:
            return array("I")
        return self.postings[tid]

    def contains(self, slot: int, term: str) -> bool:
        plist = self.sessions_with(term)
        # postings are ascending: binary search
        lo, hi = 0, len(plist)
        while lo < hi:
            mid = (lo + hi) // 2
            if plist[mid] < slot:
                lo = mid + 1
            else:
                hi = mid
        return lo < len(plist) and plist[lo] == slot and slot in self.slots

    def stats(self) -> dict[str, int]:
        pairs = sum(len(a) for a in self.slots.values())
        return {"sessions": len(self.slots), "terms": len(self.names), "pairs": pairs}


class TermsView(Sequence[str]):
    """A session's vocabulary as a read-only sequence of strings (built on demand)."""

    __slots__ = ("_ids", "_table")

    def __init__(self, table: ColdTermTable, ids: array[int]) -> None:
        self._table = table
        self._ids = ids

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        names = self._table.names
        if isinstance(i, slice):
            return [names[t] for t in self._ids[i]]
        return names[self._ids[i]]

    def __iter__(self) -> Iterator[str]:
        names = self._table.names
        return (names[t] for t in self._ids)

    def __bool__(self) -> bool:
        return len(self._ids) > 0


class TermsSet:
    """`term in view.vocab_set` for a slot, answered from the postings."""

    __slots__ = ("slot", "_table")

    def __init__(self, table: ColdTermTable, slot: int) -> None:
        self._table = table
        self.slot = slot

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self._table.contains(self.slot, term)


def score_digests_inverted(
    digests: list[DigestView], slots: list[int | None], terms: list[str], table: ColdTermTable,
    limit: int = CANDIDATE_DIGESTS,
) -> tuple[list[DigestHit], bool]:
    """`search.score_digests` (same hits, order, scores and cap) driven by the postings of
    the query terms: work is proportional to the sessions that contain them."""
    position = {s: i for i, s in enumerate(slots) if s is not None}
    matched: dict[int, list[str]] = {}
    for term in terms:
        for s in table.sessions_with(term):
            i = position.get(s)
            if i is not None:
                matched.setdefault(i, []).append(term)
    # terms repeat in `terms` only if the plan repeats them; keep the plan's order per digest
    hits: list[tuple[DigestView, list[str]]] = []
    capped = False
    for i in sorted(matched):
        if len(hits) >= limit:
            capped = True
            break
        hits.append((digests[i], matched[i]))
    return rank_digest_hits(hits), capped


def keep_on_server(state: Any, *, interned: bool) -> None:
    """Shed what the server does not keep of a cold state: the digest's addresses (they
    live on in the disk record), its vocabulary once `interned` into the term table, and
    the file-operation table's per-operation form when the state is never extended in
    place (packed). A builder child calls it with `interned=False` before sending a state,
    so none of that is pickled across; adoption calls it again with `interned=True`."""
    drop = ("vocabulary", "addresses") if interned else ("addresses",)
    state.digest = {k: v for k, v in state.digest.items() if k not in drop}
    if state.normalizer is None:
        state.file_ops = packed(state.file_ops)


class StateTable(dict[tuple[str, str], "SessionState"]):
    """The engine's `(file, branches) -> SessionState` map; a cold state put here hands
    its vocabulary to the shared `ColdTermTable` and keeps only its slot (the in-memory
    digest drops `vocabulary` and `addresses`, which live on in the disk record)."""

    def __init__(self, table: ColdTermTable) -> None:
        super().__init__()
        self.table = table

    def _release(self, state: Any) -> None:
        slot = getattr(state, "cold_slot", None)
        if slot is not None:
            self.table.remove(slot)
            state.cold_slot = None

    def _take(self, state: Any) -> None:
        if state.tier != "cold" or state.digest is None:
            return
        vocabulary = state.digest.get("vocabulary")
        if vocabulary is None and state.cold_slot is not None:
            return  # already held
        self._release(state)
        state.cold_slot = self.table.add(vocabulary or ())
        state.cold_table = self.table
        keep_on_server(state, interned=True)
        state.vocab_set = frozenset()

    def __setitem__(self, key: Any, state: Any) -> None:
        old = super().get(key)
        if old is not None and old is not state:
            self._release(old)
        elif old is state and state.digest is not None and "vocabulary" in state.digest:
            self._release(state)  # rebuilt in place (an append): take the new vocabulary
        super().__setitem__(key, state)
        self._take(state)

    def __delitem__(self, key: Any) -> None:
        self._release(super().__getitem__(key))
        super().__delitem__(key)

    _MISSING = object()

    def pop(self, key: Any, default: Any = _MISSING) -> Any:  # type: ignore[override]
        if key in self:
            state = super().pop(key)
            self._release(state)
            return state
        if default is StateTable._MISSING:
            raise KeyError(key)
        return default

    def clear(self) -> None:
        for state in self.values():
            self._release(state)
        super().clear()
