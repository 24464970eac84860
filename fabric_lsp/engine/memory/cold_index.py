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

import hashlib
import sys
from array import array
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate, pairwise
from operator import methodcaller
from typing import TYPE_CHECKING, Any, cast, overload

import msgspec

from . import disk_cache
from .disk_cache import StoredVocabulary, vocabulary_key
from .file_history import packed
from .search import CANDIDATE_DIGESTS, DigestHit, DigestView, rank_digest_hits
from .tokenize import native_intern_terms

SNAPSHOT_NAME = disk_cache.SNAPSHOT_FILE  # not *.json: the cache cleanup inspects records only
_SNAPSHOT_MAGIC = b"fabric-lsp cold terms 1; keys sha256/16\n"
_KEY_BYTES = disk_cache.VOCABULARY_KEY_BYTES
_intern_terms = native_intern_terms()
_SCANNED_LOOKUPS = 32  # lookups a restored table answers by scanning its names (`_term_id`)


def _le(values: array[int]) -> bytes:
    if sys.byteorder != "little":
        values = array("I", values)
        values.byteswap()
    return values.tobytes()


def _from_le(data: bytes) -> array[int]:
    out = array("I")
    out.frombytes(data)
    if sys.byteorder != "little":
        out.byteswap()
    return out


class _SnapshotHead(msgspec.Struct):
    terms: int
    slots: int
    names: int  # bytes of the newline-joined term names
    ids: int  # term ids over all slots
    postings: int  # slot numbers over all postings


if TYPE_CHECKING:
    from .state import SessionState


class ColdTermTable:
    """Interned terms, per-slot term-id arrays and term -> slots postings."""

    def __init__(self) -> None:
        # term -> id and term id -> ascending live-or-dead slots (`ids`, `postings`); a
        # restored snapshot leaves both unmade until something needs them whole (`restore`)
        self._ids: dict[str, int] | None = {}
        self.names: list[str] = []
        self._postings: list[array[int]] | None = []
        self._packed: tuple[array[int], array[int]] | None = None  # (every posting, each term's start)
        self._lookups = 0  # terms looked up by name while `_ids` is unmade
        self.slots: dict[int, array[int]] = {}  # live slot -> term ids (vocabulary order)
        self.keys: dict[int, bytes] = {}  # slot -> its vocabulary's key, where known
        self.claimable: dict[bytes, list[int]] = {}  # restored slots no state holds yet
        self.version = 0  # bumped by every change a snapshot would show
        self._next_slot = 0
        self._dead = 0

    def __len__(self) -> int:
        return len(self.slots)

    @property
    def ids(self) -> dict[str, int]:
        """term -> term id (made on first use after a restore)."""
        ids = self._ids
        if ids is None:
            ids = self._ids = dict(zip(self.names, range(len(self.names))))
        return ids

    @property
    def postings(self) -> list[array[int]]:
        """term id -> the ascending slots (live or dead) holding it (split per term on
        first use after a restore; `sessions_with` reads a restored table's unsplit)."""
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
            return self.ids.get(term)
        try:
            return self.names.index(term)
        except ValueError:
            return None

    def add(self, vocabulary: Iterable[str], key: bytes | None = None) -> int:
        """A new slot holding `vocabulary` (its order is kept); `key`: its vocabulary key
        when the caller knows it (else it is computed when a snapshot is written)."""
        slot = self._next_slot
        self._next_slot += 1
        self.version += 1
        if key is not None:
            self.keys[slot] = key
        ids, names, postings = self.ids, self.names, self.postings
        terms = vocabulary if isinstance(vocabulary, list) else list(vocabulary)
        if _intern_terms is not None and type(terms) is list:
            # the loop below in C (the same ids, names and postings; test_native_tokens.py)
            self.slots[slot] = array("I", _intern_terms(terms, ids, names, postings, slot, array("I", (slot,))))
            return slot
        # The known terms' ids and their postings' appends run as C loops (map); only
        # the terms new to the table take a Python step (a new id, in vocabulary order).
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
        self.slots[slot] = array("I", cast("list[int]", found))  # every id is set now
        return slot

    def remove(self, slot: int) -> None:
        if self.slots.pop(slot, None) is None:
            return
        self.keys.pop(slot, None)
        self.version += 1
        self._dead += 1
        if self._dead > max(64, len(self.slots)):
            self._compact()

    def _compact(self) -> None:
        live = self.slots
        for tid, plist in enumerate(self.postings):
            if plist:
                self.postings[tid] = array("I", (s for s in plist if s in live))
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
        if self.slots or self.names or self._next_slot:
            return False
        try:
            body, seal = data[:-32], data[-32:]
            if len(data) < len(_SNAPSHOT_MAGIC) + 36 or not data.startswith(_SNAPSHOT_MAGIC):
                return False
            if hashlib.sha256(body).digest() != seal:
                return False
            at = len(_SNAPSHOT_MAGIC)
            head_len = int.from_bytes(body[at : at + 4], "little")
            at += 4
            head = msgspec.json.decode(body[at : at + head_len], type=_SnapshotHead)
            at += head_len
            n, k = head.terms, head.slots
            sizes = (head.names, _KEY_BYTES * k, 4 * k, 4 * head.ids, 4 * n, 4 * head.postings)
            if min(n, k, *sizes) < 0 or at + sum(sizes) != len(body):
                return False
            parts: list[bytes] = []
            for size in sizes:
                parts.append(body[at : at + size])
                at += size
            blob, key_bytes, slot_lens_b, slot_ids_b, post_lens_b, post_slots_b = parts
            names = blob.decode("utf-8", "surrogatepass").split("\n") if n else []
            slot_lens, slot_ids = _from_le(slot_lens_b), _from_le(slot_ids_b)
            post_lens, post_slots = _from_le(post_lens_b), _from_le(post_slots_b)
            if len(names) != n or sum(slot_lens) != len(slot_ids) or sum(post_lens) != len(post_slots):
                return False
            if slot_ids and max(slot_ids) >= n:
                return False
            # Not checked here, to restore in time proportional to the slots rather than the
            # terms (a process answering one query restores the table for a few lookups):
            # that the names are distinct and that postings name slots below `k`. The seal
            # proves the bytes are `encode_snapshot`'s, which writes both so; and a posting
            # naming no held slot is ignored by every reader (they filter by held slots).
        except (ValueError, msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
            return False
        slots: dict[int, array[int]] = {}
        at = 0
        for slot, size in enumerate(slot_lens):
            slots[slot] = slot_ids[at : at + size]
            at += size
        keys = [key_bytes[i : i + _KEY_BYTES] for i in range(0, len(key_bytes), _KEY_BYTES)]
        self.names, self.slots = names, slots
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

    def vocabulary(self, slot: int) -> TermsView:
        return TermsView(self, self.slots.get(slot, array("I")))

    def sessions_with(self, term: str) -> array[int]:
        """Slots (live or dead: the caller filters by its own scope) that contain `term`."""
        tid = self._term_id(term)
        if tid is None:
            return array("I")
        packed = self._packed
        if packed is not None:
            flat, starts = packed
            return flat[starts[tid] : starts[tid + 1]]
        return self.postings[tid]

    def terms_set(self, slot: int) -> TermsSet:
        """`term in ...` for one slot's vocabulary, answered from the postings."""
        return TermsSet(self, slot)

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


class SnapshotCapture:
    """`ColdTermTable.capture`: the held slots' numbers, term-id arrays and keys (None: to
    compute; `encode_snapshot` fills them in), and the table's term names."""

    __slots__ = ("slots", "arrays", "keys", "names")

    def __init__(self, slots: list[int], arrays: list[array[int]], keys: list[bytes | None], names: list[str]) -> None:
        self.slots, self.arrays, self.keys, self.names = slots, arrays, keys, names


def encode_snapshot(capture: SnapshotCapture) -> bytes:
    """The sealed snapshot bytes of a capture. Each term's postings are made from the
    captured slots themselves (not read from the live table, which may change meanwhile),
    so every slot is listed under exactly the terms of its vocabulary. Keys the capture
    lacked are computed and filled into it (`ColdTermTable.remember_keys` keeps them)."""
    # (run from a background thread while requests are answered: no single C call walks
    # more than one slot's terms, so the interpreter lock changes hands in between)
    arrays, names = capture.arrays, capture.names
    held: set[int] = set()
    for ids in arrays:
        held.update(ids)
    used = sorted(held)
    renumber = [0] * (used[-1] + 1 if used else 0)  # old term id -> new (a list: no hashing)
    for new_id, old_id in enumerate(used):
        renumber[old_id] = new_id
    keys = capture.keys
    for i, ids in enumerate(arrays):
        if keys[i] is None:  # interned from a build here: the key of the list the record holds
            keys[i] = vocabulary_key(disk_cache.encoder.encode([names[t] for t in ids]))
    slot_lens = array("I", map(len, arrays))
    slot_ids = array("I")
    postings: list[array[int]] = [array("I") for _ in used]
    for slot, ids in enumerate(arrays):
        renumbered = array("I", map(renumber.__getitem__, ids))
        slot_ids.extend(renumbered)
        # (slots in ascending order: each term's postings come out ascending)
        deque(map(methodcaller("append", slot), map(postings.__getitem__, renumbered)), maxlen=0)
    post_lens = array("I", map(len, postings))
    post_slots = array("I")
    for plist in postings:
        post_slots.extend(plist)
    blob = "\n".join(names[t] for t in used).encode("utf-8", "surrogatepass")
    head = disk_cache.encoder.encode(_SnapshotHead(len(used), len(arrays), len(blob), len(slot_ids), len(post_slots)))
    body = b"".join(
        (
            _SNAPSHOT_MAGIC,
            len(head).to_bytes(4, "little"),
            head,
            blob,
            b"".join(cast("list[bytes]", keys)),
            _le(slot_lens),
            _le(slot_ids),
            _le(post_lens),
            _le(post_slots),
        )
    )
    return body + hashlib.sha256(body).digest()


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
