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

The table is persisted beside the cache records (`SNAPSHOT_NAME`, sealed) after indexing,
keyed per slot by its vocabulary's key (a hash of the vocabulary's JSON bytes as the V5
digest holds them). A restarted engine restores it, and a digest record loaded from disk
whose vocabulary bytes have a restored slot's key claims that slot instead of decoding,
checking and interning its vocabulary again (`disk_cache.load_record`, `StateTable._take`);
slots nobody claims are dropped after a whole pass. A missing, stale or damaged snapshot
only costs that time: every vocabulary can still be interned from its record.
"""

from __future__ import annotations

import weakref
from array import array
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate, pairwise
from operator import methodcaller
from typing import TYPE_CHECKING, Any, cast, overload

from .cold_snapshot import KEY_BYTES, SnapshotCapture, decode_snapshot, encode_snapshot
from .disk_cache import StoredVocabulary
from .file_history import packed
from .search import CANDIDATE_DIGESTS, DigestHit, DigestView, rank_digest_hits
from .tokenize import native_intern_terms

_intern_terms = native_intern_terms()
_SCANNED_LOOKUPS = 32  # lookups a table answers by scanning (its restored names, its pending terms)
# terms a table may hold not interned yet: a first answer over 200 MB of sessions (~270,000
# pending, ~16 MB of strings) waits for none; beyond this the oldest are interned as added
PENDING_MAX_TERMS = 400_000


if TYPE_CHECKING:
    from .state import SessionState


class ColdTermTable:
    """Interned terms, per-slot term-id arrays and term -> slots postings.

    A vocabulary added is interned later ("pending"), in slot order, so the table ends up
    exactly as if each had been interned when added: the first answer after a start does
    not wait for it (a query reads a pending vocabulary as its list of terms). The
    indexer interns what is pending once a pass is done (`settle`, a few slots per lock),
    and so does every change other than `add`, every reader of the whole table, a table
    holding more than `pending_max_terms` pending terms, and a table asked more than
    `_SCANNED_LOOKUPS` times while something is pending."""

    def __init__(self, pending_max_terms: int = PENDING_MAX_TERMS) -> None:
        # term -> id and term id -> ascending live-or-dead slots (`ids`, `postings`); a
        # restored snapshot leaves both unmade until something needs them whole (`restore`)
        self._ids: dict[str, int] | None = {}
        self._names: list[str] = []
        self._postings: list[array[int]] | None = []
        self._packed: tuple[array[int], array[int]] | None = None  # (every posting, each term's start)
        self._lookups = 0  # terms looked up by name while `_ids` is unmade
        self._slots: dict[int, array[int]] = {}  # live interned slot -> term ids (vocabulary order)
        # live slot -> its vocabulary, not interned yet (ascending slots, each above every
        # interned one: interned in order, lowest first), with the count of its terms
        self._pending: dict[int, list[str]] = {}
        self._pending_terms = 0
        self._pending_max = pending_max_terms
        self._scans = 0  # lookups that scanned the pending vocabularies since none was
        self._views: dict[int, list[weakref.ref[TermsView]]] = {}  # pending slot -> its views
        self.keys: dict[int, bytes] = {}  # slot -> its vocabulary's key, where known
        self.claimable: dict[bytes, list[int]] = {}  # restored slots no state holds yet
        self.version = 0  # bumped by every change a snapshot would show
        self._next_slot = 0
        self._dead = 0

    def __len__(self) -> int:
        return len(self._slots) + len(self._pending)

    def is_empty(self) -> bool:
        """No slot and no term: never added to or restored (or every slot removed before
        anything was interned)."""
        return not self._slots and not self._pending and not self._names

    # -- the whole table (what is pending is interned first) -------------------------------

    @property
    def slots(self) -> dict[int, array[int]]:
        """live slot -> term ids (vocabulary order)."""
        self.settle()
        return self._slots

    @property
    def names(self) -> list[str]:
        """term id -> term."""
        self.settle()
        return self._names

    @property
    def ids(self) -> dict[str, int]:
        """term -> term id (made on first use after a restore)."""
        self.settle()
        return self._made_ids()

    @property
    def postings(self) -> list[array[int]]:
        """term id -> the ascending slots (live or dead) holding it (split per term on
        first use after a restore; `sessions_with` reads a restored table's unsplit)."""
        self.settle()
        return self._made_postings()

    @property
    def interned_names(self) -> list[str]:
        """term id -> term, for the terms interned so far (nothing is interned first)."""
        return self._names

    def pending_terms(self, slot: int) -> list[str] | None:
        """A pending slot's vocabulary; None once it is interned (its views have the ids
        by then: they are set before the slot leaves the pending ones)."""
        return self._pending.get(slot)

    def _made_ids(self) -> dict[str, int]:
        ids = self._ids
        if ids is None:
            ids = self._ids = dict(zip(self._names, range(len(self._names))))
        return ids

    def _made_postings(self) -> list[array[int]]:
        postings = self._postings
        if postings is None:
            assert self._packed is not None
            flat, starts = self._packed
            postings = self._postings = [flat[a:b] for a, b in pairwise(starts)]
            self._packed = None
        return postings

    def _term_id(self, term: str) -> int | None:
        ids = self._ids
        if ids is not None:
            return ids.get(term)
        # A restored table answers its first lookups by a scan of the names (a C loop, about
        # a millisecond at 100,000 terms), so a process answering one query never pays for
        # the whole dict; a table asked more often makes it.
        self._lookups += 1
        if self._lookups > _SCANNED_LOOKUPS:
            return self._made_ids().get(term)
        try:
            return self._names.index(term)
        except ValueError:
            return None

    # -- adding, interning, removing --------------------------------------------------------

    def add(self, vocabulary: Iterable[str], key: bytes | None = None) -> int:
        """A new slot holding `vocabulary` (its order is kept); `key`: its vocabulary key
        when the caller knows it (else it is computed when a snapshot is written)."""
        slot = self._next_slot
        self._next_slot += 1
        self.version += 1
        if key is not None:
            self.keys[slot] = key
        terms = list(vocabulary) if type(vocabulary) is not list else cast("list[str]", vocabulary)
        self._pending[slot] = terms
        self._pending_terms += len(terms)
        while self._pending and (self._pending_terms > self._pending_max or self._pending_max <= 0):
            self._intern_lowest()
        return slot

    def has_pending(self) -> bool:
        """Whether a vocabulary added is not interned yet."""
        return bool(self._pending)

    def settle(self, max_terms: int | None = None) -> bool:
        """Intern pending vocabularies, lowest slot first, until none is left or (with
        `max_terms`) at least that many terms were interned; True when none is left."""
        done = 0
        while self._pending and (max_terms is None or done < max_terms):
            done += self._intern_lowest()
        return not self._pending

    def _intern_lowest(self) -> int:
        slot = next(iter(self._pending))
        terms = self._pending[slot]
        ids, names, postings = self._made_ids(), self._names, self._made_postings()
        if _intern_terms is not None:
            # the loop below in C (the same ids, names and postings; test_native_tokens.py)
            made = array("I", _intern_terms(terms, ids, names, postings, slot, array("I", (slot,))))
        else:
            made = array("I", _intern_python(terms, ids, names, postings, slot))
        self._slots[slot] = made  # (before the pending entry goes: a reader finds one of them)
        for ref in self._views.pop(slot, ()):
            view = ref()
            if view is not None:
                view.interned(made)
        del self._pending[slot]
        self._pending_terms -= len(terms)
        if not self._pending:
            self._scans = 0  # (the 32 lookups count while something is pending)
        return len(terms)

    def remove(self, slot: int) -> None:
        self.settle()
        if self._slots.pop(slot, None) is None:
            return
        self.keys.pop(slot, None)
        self.version += 1
        self._dead += 1
        if self._dead > max(64, len(self._slots)):
            self._compact()

    def _compact(self) -> None:
        live = self._slots
        postings = self._made_postings()
        for tid, plist in enumerate(postings):
            if plist:
                postings[tid] = array("I", (s for s in plist if s in live))
        self._dead = 0

    # -- the snapshot -----------------------------------------------------------------------

    def claim(self, key: bytes) -> int | None:
        """A restored slot whose vocabulary has `key`, now held by the caller (None: none
        is left)."""
        free = self.claimable.get(key)
        if not free:
            return None
        slot = free.pop()
        if not free:
            del self.claimable[key]
        return slot  # (no new version: a snapshot holds the slot whether claimed or not yet)

    def drop_unclaimed(self) -> int:
        """Remove the restored slots no state claimed (after a whole pass: their sessions
        are gone or changed). Returns how many."""
        dropped = [slot for slots in self.claimable.values() for slot in slots]
        self.claimable.clear()
        for slot in dropped:
            self.remove(slot)
        return len(dropped)

    def snapshot(self) -> bytes:
        """The sealed snapshot of the held slots (restored slots not claimed yet are left
        out), with terms and slots numbered afresh from 0: `encode_snapshot(self.capture())`."""
        return encode_snapshot(self.capture())

    def capture(self) -> SnapshotCapture:
        """What a snapshot of the held slots is made of, taken in time proportional to the
        number of slots (under the engine lock): their numbers, term-id arrays (never
        changed once made) and known keys, and the term names (only ever appended to).
        `encode_snapshot` then needs no lock."""
        unclaimed = {slot for slots in self.claimable.values() for slot in slots}
        live = sorted(slot for slot in self.slots if slot not in unclaimed)
        keys = self.keys
        return SnapshotCapture(live, [self.slots[slot] for slot in live], [keys.get(slot) for slot in live], self.names)

    def remember_keys(self, capture: SnapshotCapture) -> None:
        """Keep the keys `encode_snapshot` computed for `capture`'s slots (each only while
        the slot still holds the very array it was computed from), so the next snapshot
        does not compute them again."""
        slots, keys = self.slots, self.keys
        for slot, ids, key in zip(capture.slots, capture.arrays, capture.keys):
            if key is not None and slots.get(slot) is ids:
                keys.setdefault(slot, key)

    def restore(self, data: bytes) -> bool:
        """Take a snapshot's slots as restored, claimable slots (only into an empty table).
        False, changing nothing, when the data is not a whole, sealed, consistent snapshot."""
        if self._next_slot or self._slots or self._names:
            return False
        decoded = decode_snapshot(data)
        if decoded is None:
            return False
        names, slot_lens, slot_ids, key_bytes, post_lens, post_slots = decoded
        k = len(slot_lens)
        slots: dict[int, array[int]] = {}
        at = 0
        for slot, size in enumerate(slot_lens):
            slots[slot] = slot_ids[at : at + size]
            at += size
        keys = [key_bytes[i : i + KEY_BYTES] for i in range(0, len(key_bytes), KEY_BYTES)]
        self._names, self._slots = names, slots
        self._ids, self._postings, self._lookups = None, None, 0  # made when needed: `ids`, `postings`
        self._packed = (post_slots, array("Q", accumulate(post_lens, initial=0)))
        self.keys = dict(enumerate(keys))
        claimable: dict[bytes, list[int]] = {}
        for slot, key in enumerate(keys):
            claimable.setdefault(key, []).append(slot)
        self.claimable = claimable
        self._next_slot = k
        self._dead = 0
        self.version += 1
        return True

    # -- queries (a pending vocabulary is read as its list) ---------------------------------

    def vocabulary(self, slot: int) -> TermsView:
        ids = self._slots.get(slot)
        if ids is None and slot in self._pending:
            view = TermsView(self, None, slot)
            self._views.setdefault(slot, []).append(weakref.ref(view))
            return view
        return TermsView(self, ids if ids is not None else array("I"), slot)

    def sessions_with(self, term: str) -> array[int]:
        """Slots (live or dead: the caller filters by its own scope) that contain `term`,
        ascending."""
        found = self._interned_with(term)
        if self._pending:
            self._scans += 1
            if self._scans > _SCANNED_LOOKUPS:
                self.settle()
                return self._interned_with(term)
            # (each pending slot is above every interned one: the order holds)
            # (a slot once per time its vocabulary holds the term, as interning posts it)
            more = [slot for slot, terms in self._pending.items() if term in terms for _ in range(terms.count(term))]
            if more:
                found = found + array("I", more)
        return found

    def _interned_with(self, term: str) -> array[int]:
        tid = self._term_id(term)
        if tid is None:
            return array("I")
        packed = self._packed
        if packed is not None:
            flat, starts = packed
            return flat[starts[tid] : starts[tid + 1]]
        return self._made_postings()[tid]

    def terms_set(self, slot: int) -> TermsSet:
        """`term in ...` for one slot's vocabulary, answered from the postings."""
        return TermsSet(self, slot)

    def contains(self, slot: int, term: str) -> bool:
        pending = self._pending.get(slot)
        if pending is not None:
            return term in pending
        plist = self._interned_with(term)
        # postings are ascending: binary search
        lo, hi = 0, len(plist)
        while lo < hi:
            mid = (lo + hi) // 2
            if plist[mid] < slot:
                lo = mid + 1
            else:
                hi = mid
        return lo < len(plist) and plist[lo] == slot and slot in self._slots

    def stats(self) -> dict[str, int]:
        slots = self.slots
        pairs = sum(len(a) for a in slots.values())
        return {"sessions": len(slots), "terms": len(self._names), "pairs": pairs}


def _intern_python(
    terms: list[str], ids: dict[str, int], names: list[str], postings: list[array[int]], slot: int
) -> list[int]:
    """`_native.intern_terms` without the accelerator: the known terms' ids and their
    postings' appends run as C loops (map); only the terms new to the table take a Python
    step (a new id, in vocabulary order)."""
    found: list[int | None] = list(map(ids.get, terms))
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
    return cast("list[int]", found)  # every id is set now


class TermsView(Sequence[str]):
    """A session's vocabulary as a read-only sequence of strings (built on demand): its
    slot's term ids, or while the slot is pending its list of terms (the table sets the
    ids here when it interns the slot)."""

    __slots__ = ("_ids", "_table", "_slot", "__weakref__")

    def __init__(self, table: ColdTermTable, ids: array[int] | None, slot: int) -> None:
        self._table = table
        self._ids = ids
        self._slot = slot

    def interned(self, ids: array[int]) -> None:
        """The slot's term ids, now that its vocabulary is interned."""
        self._ids = ids

    def _terms(self) -> list[str] | None:
        """The pending list, or None when the ids are to be read (interned)."""
        return self._table.pending_terms(self._slot) if self._ids is None else None

    def __len__(self) -> int:
        terms = self._terms()
        return len(terms) if terms is not None else len(cast("array[int]", self._ids))

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        terms = self._terms()
        if terms is not None:
            return terms[i]
        ids, names = cast("array[int]", self._ids), self._table.interned_names
        if isinstance(i, slice):
            return [names[t] for t in ids[i]]
        return names[ids[i]]

    def __iter__(self) -> Iterator[str]:
        terms = self._terms()
        if terms is not None:
            return iter(terms)
        names = self._table.interned_names
        return (names[t] for t in cast("array[int]", self._ids))

    def __bool__(self) -> bool:
        return len(self) > 0


class TermsSet:
    """`term in view.vocab_set` for a slot, answered from the postings."""

    __slots__ = ("slot", "_table")

    def __init__(self, table: ColdTermTable, slot: int) -> None:
        self._table = table
        self.slot = slot

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self._table.contains(self.slot, term)


def score_digests_inverted(
    digests: list[DigestView],
    slots: list[int | None],
    terms: list[str],
    table: ColdTermTable,
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
        state.map_file_ops(packed)  # (a table not read yet is packed once it is)


class StateTable(dict[tuple[str, str], "SessionState"]):
    """The engine's `(file, branches) -> SessionState` map; a cold state put here hands
    its vocabulary to the shared `ColdTermTable` and keeps only its slot (the in-memory
    digest drops `vocabulary` and `addresses`, which live on in the disk record)."""

    def __init__(self, table: ColdTermTable) -> None:
        super().__init__()
        self.table = table
        self.version = 0  # bumped by every change (index.load_index's memo checks it)

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
        if isinstance(vocabulary, StoredVocabulary):  # loaded from disk (disk_cache.load_record)
            slot = self.table.claim(vocabulary.key) if vocabulary.values is None else None
            if slot is None:
                slot = self.table.add(vocabulary.terms(), vocabulary.key)
            state.cold_slot = slot
        else:
            # (a builder's key is for the vocabulary it built, the one taken now: used once)
            key, state.vocab_key = state.vocab_key, None
            state.cold_slot = self.table.add(vocabulary or (), key)
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
        self.version += 1

    def __delitem__(self, key: Any) -> None:
        self._release(super().__getitem__(key))
        super().__delitem__(key)
        self.version += 1

    _MISSING = object()

    def pop(self, key: Any, default: Any = _MISSING) -> Any:  # type: ignore[override]
        if key in self:
            state = super().pop(key)
            self._release(state)
            self.version += 1
            return state
        if default is StateTable._MISSING:
            raise KeyError(key)
        return default

    def clear(self) -> None:
        for state in self.values():
            self._release(state)
        super().clear()
        self.version += 1
