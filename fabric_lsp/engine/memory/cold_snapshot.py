"""The cold term table's snapshot bytes (cold_index.ColdTermTable.snapshot / restore).

Layout: a magic line, a 4-byte length and a JSON head (`_SnapshotHead`), then the term
names newline-joined (UTF-8, surrogates passed), each slot's vocabulary key, the slots'
lengths and term ids, the terms' posting lengths and slots (uint32 little-endian), and a
SHA-256 seal of everything before it.
"""

from __future__ import annotations

import hashlib
import sys
from array import array
from collections import deque
from operator import methodcaller
from typing import TypeAlias, cast

import msgspec

from . import disk_cache
from .disk_cache import vocabulary_key

SNAPSHOT_NAME = disk_cache.SNAPSHOT_FILE  # not *.json: the cache cleanup inspects records only
_SNAPSHOT_MAGIC = b"fabric-lsp cold terms 1; keys sha256/16\n"
KEY_BYTES = disk_cache.VOCABULARY_KEY_BYTES


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


# (names, slot lengths, slot term ids, keys' bytes, posting lengths, postings' slots)
Decoded: TypeAlias = "tuple[list[str], array[int], array[int], bytes, array[int], array[int]]"


def decode_snapshot(data: bytes) -> Decoded | None:
    """A snapshot's parts, or None when the data is not a whole, sealed, consistent one."""
    try:
        body, seal = data[:-32], data[-32:]
        if len(data) < len(_SNAPSHOT_MAGIC) + 36 or not data.startswith(_SNAPSHOT_MAGIC):
            return None
        if hashlib.sha256(body).digest() != seal:
            return None
        at = len(_SNAPSHOT_MAGIC)
        head_len = int.from_bytes(body[at : at + 4], "little")
        at += 4
        head = msgspec.json.decode(body[at : at + head_len], type=_SnapshotHead)
        at += head_len
        n, k = head.terms, head.slots
        sizes = (head.names, KEY_BYTES * k, 4 * k, 4 * head.ids, 4 * n, 4 * head.postings)
        if min(n, k, *sizes) < 0 or at + sum(sizes) != len(body):
            return None
        parts: list[bytes] = []
        for size in sizes:
            parts.append(body[at : at + size])
            at += size
        blob, key_bytes, slot_lens_b, slot_ids_b, post_lens_b, post_slots_b = parts
        names = blob.decode("utf-8", "surrogatepass").split("\n") if n else []
        slot_lens, slot_ids = _from_le(slot_lens_b), _from_le(slot_ids_b)
        post_lens, post_slots = _from_le(post_lens_b), _from_le(post_slots_b)
        if len(names) != n or sum(slot_lens) != len(slot_ids) or sum(post_lens) != len(post_slots):
            return None
        if slot_ids and max(slot_ids) >= n:
            return None
        # Not checked here, to restore in time proportional to the slots rather than the
        # terms (a process answering one query restores the table for a few lookups):
        # that the names are distinct and that postings name slots below `k`. The seal
        # proves the bytes are `encode_snapshot`'s, which writes both so; and a posting
        # naming no held slot is ignored by every reader (they filter by held slots).
    except (ValueError, msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return None
    return names, slot_lens, slot_ids, key_bytes, post_lens, post_slots
