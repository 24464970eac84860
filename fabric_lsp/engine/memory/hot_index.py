"""A hot session's inverted index (`HotIndex`): term -> packed (record index << 32 | term
frequency) postings, added record by record (in C where the accelerator is built), and the
segments its records group into. Below search.py, which scores queries against it."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from ..native import NATIVE
from .tokenize import count_terms, finish_piece_counts, native_index_text

if TYPE_CHECKING:
    from ..json_types import JsonObject

SEGMENT_ROLES = frozenset({"user", "bashExecution", "compaction"})

_index_text, _add_counts = native_index_text()
_compact_postings = getattr(NATIVE, "compact_postings", None)
# a build's postings gathered in C until `compact` (None: not built)
_postings_builder = getattr(NATIVE, "postings_builder", None)
_finish_postings = getattr(NATIVE, "finish_postings", None)


def _pack(plist: list[int]) -> array[int]:
    return array("Q", plist)


# A term's postings in a HotIndex: one packed int, then a list, then an array('Q').
Postings: TypeAlias = "int | list[int] | array[int]"


@dataclass
class HotIndex:
    """Inverted index over one session's hot records: term -> packed (index<<32 | tf).

    A term's postings are one bare int while it occurs in one record (most terms of a
    large session do), then a list, packed into an 8-byte array once it is long; read
    them through `postings_of`."""

    doc_len: array[int] = field(default_factory=lambda: array("I"))
    postings: dict[str, Postings] = field(default_factory=dict[str, "Postings"])
    seg_starts: list[int] = field(default_factory=list[int])
    seg_of: array[int] = field(default_factory=lambda: array("I"))  # position -> segment number
    total_len: int = 0

    def add(self, record: JsonObject) -> None:
        idx = len(self.doc_len)
        base = idx << 32
        text = record["text"]
        postings: dict[str, Any] = self.postings  # Any: `type(...) is int` does not narrow the else branch
        if _index_text is not None:
            # the same counts and postings as the loop below, in C; a text with non-ASCII
            # pieces comes back as its piece counts, which the tokenizer finishes
            done = _index_text(text.encode("utf-8", "surrogatepass"), postings, base, _pack)
            length = done if type(done) is int else self.add_pieces(done, base)
        else:
            counts, length = count_terms(text)
            get = postings.get
            for term, tf in counts.items():
                plist = get(term)
                if plist is None:
                    postings[term] = base | tf
                elif type(plist) is int:
                    postings[term] = [plist, base | tf]
                else:
                    plist.append(base | tf)
                    if len(plist) == 64:
                        postings[term] = array("Q", plist)
        length = max(1, length)
        self.doc_len.append(length)
        self.total_len += length
        if idx == 0 or record.get("role") in SEGMENT_ROLES:
            self.seg_starts.append(idx)
        self.seg_of.append(len(self.seg_starts) - 1)

    def add_pieces(self, pieces: dict[Any, int], base: int) -> int:
        """The postings of a text whose piece counts `index_text` gave back (a piece is not
        ASCII: the tokenizer finishes them); returns its tokens."""
        counts = finish_piece_counts(pieces)
        _add_counts(self.postings, counts, base, _pack)
        return sum(counts.values())

    def building(self) -> HotIndex:
        """This new index with its postings gathered in C (`_native.postings_builder`: no
        str or int per term occurrence) until `compact` makes them the dict they would be;
        nothing may read them before. Unchanged without the accelerator."""
        if _postings_builder is not None and _index_text is not None and not self.postings:
            self.postings = _postings_builder()
        return self

    def c_parts(self) -> tuple[Any, ...]:
        """What `_native.hot_plain` adds a record with (memory/hot_feed.py)."""
        return (self.postings, self.doc_len, self.seg_starts, self.seg_of, _pack, SEGMENT_ROLES, self.add_pieces, self)

    def compact(self) -> None:
        """Pack long posting lists into 8-byte arrays (lists are cheaper to grow)."""
        gathered: Any = self.postings
        if type(gathered) is not dict:  # gathered in C (`building`): made the dict here
            assert _finish_postings is not None
            self.postings = _finish_postings(gathered)
            return
        postings = self.postings
        if _compact_postings is not None:  # the loop below in C (test_hot_plain.py)
            _compact_postings(postings, _pack)
            return
        for term, plist in postings.items():
            if type(plist) is list and len(plist) > 8:
                postings[term] = array("Q", plist)

    @classmethod
    def build(cls, records: Iterable[JsonObject]) -> HotIndex:
        index = cls().building()
        for rec in records:
            index.add(rec)
        index.compact()
        return index


def postings_of(plist: Any) -> Sequence[int]:
    """A term's postings as a sequence (see HotIndex)."""
    return (plist,) if type(plist) is int else plist
