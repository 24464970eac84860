"""Entry ids of a scanned session (scan.py), one 8-byte cell each: the id column the
branch walk reads without a dict per entry."""

from __future__ import annotations

import binascii
import sys
from array import array
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    Runs = list[tuple[int, int]]  # node ranges [a, b), root→leaf

_CELL = 8
_ODD = 0xFF  # first byte of a cell that indexes `IdTable.odd` (never the first byte of an ASCII id)


class IdTable:
    """Entry ids, one 8-byte cell each in a bytearray: an 8-character ASCII id (Pi writes
    8 hex digits) is its own bytes, any other id a marker and an index into `odd`."""

    __slots__ = ("blob", "odd", "odd_index")

    def __init__(self) -> None:
        self.blob: bytearray = bytearray()
        self.odd: list[str] = []
        self.odd_index: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.blob) >> 3

    def cell(self, s: str, add: bool = False) -> bytes | None:
        if len(s) == _CELL and s.isascii():
            return s.encode("ascii")
        k = self.odd_index.get(s)
        if k is None:
            if not add:
                return None
            k = self.odd_index[s] = len(self.odd)
            self.odd.append(s)
        return (k << 8 | _ODD).to_bytes(_CELL, "little")

    def append(self, s: str) -> None:
        if len(s) == _CELL and s.isascii():
            self.blob += s.encode("ascii")
        else:
            self.blob += self.cell(s, add=True)  # type: ignore[operator]

    def get(self, i: int) -> str:
        c = self.blob[i << 3 : (i << 3) + _CELL]
        if c[0] == _ODD:
            return self.odd[int.from_bytes(c[1:], "little")]
        return c.decode("ascii")

    def find(self, s: Any, stop: int | None = None, start: int = 0) -> int:
        """First position of id `s` in [start, stop), or -1."""
        if type(s) is not str:
            return -1
        c = self.cell(s)
        if c is None:
            return -1
        blob = self.blob
        end = len(blob) if stop is None else min(len(blob), stop << 3)
        pos = blob.find(c, start << 3, end)
        while pos > 0 and pos & 7:
            pos = blob.find(c, pos + 1, end)
        return pos >> 3 if pos >= 0 else -1

    def rfind(self, s: Any, stop: int | None = None) -> int:
        """Last position of id `s` in [0, stop), or -1."""
        if type(s) is not str:
            return -1
        c = self.cell(s)
        if c is None:
            return -1
        blob = self.blob
        end = len(blob) if stop is None else min(len(blob), stop << 3)
        pos = blob.rfind(c, 0, end)
        while pos > 0 and pos & 7:
            end = pos + _CELL - 1
            pos = blob.rfind(c, 0, end)
        return pos >> 3 if pos >= 0 else -1

    def find_near(self, s: Any, i: int) -> int:
        """The position of id `s` (assumed unique) searched from position `i` outwards:
        back from `i` (itself included) first, then forward (a parent is usually a little
        before its child)."""
        j = self.rfind(s, i + 1)
        return j if j >= 0 else self.find(s, None, i + 1)

    def cell_numbers(self) -> array[int]:
        """Every cell as a native 64-bit number (`cell_number` of an id)."""
        return array("Q", bytes(self.blob))

    def cell_number(self, s: Any) -> int | None:
        c = self.cell(s) if type(s) is str else None
        return int.from_bytes(c, sys.byteorder) if c is not None else None

    def has_duplicates(self) -> bool:
        if len(self) < 2:
            return False
        blob = bytes(self.blob)
        if not blob.translate(None, b"0123456789abcdef"):  # Pi's ids: 4 bytes each
            cells = array("I", binascii.unhexlify(blob))
        else:
            cells = array("Q", blob)
        del blob
        return len(set(cells)) != len(cells)  # (a set of random ids: a quarter of sorting them)

    def gather(self, runs: Runs) -> IdTable:
        out = IdTable()
        blob = self.blob
        out.blob = bytearray(b"".join([blob[a << 3 : b << 3] for a, b in runs]))
        out.odd = self.odd
        out.odd_index = self.odd_index
        return out
