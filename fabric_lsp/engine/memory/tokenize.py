"""The one canonical lexical tokenizer of memory (digest §1).

`tokenize_lexical(text)`: Unicode NFKC over the whole text, then every maximal run of
code points in `[\\p{L}\\p{N}_]`, then each run lowercased (after matching, never before
for non-ASCII text). Literal queries, hot BM25 scoring and cold vocabularies all use it,
so a term found by one is found by the others.

Invariant: `tokenize_lexical` equals the code-point category scan `reference_tokenize`
(checked by property tests); the fast paths below only change speed, never tokens.
"""

from __future__ import annotations

import collections
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, cast

from ..jsstr import js_trim as js_trim  # JS String#trim, re-exported for memory's callers
from ..jsstr import utf16_sort_key
from ..native import NATIVE


def _py_count_elements(mapping: dict[str, int], iterable: Iterable[str]) -> None:  # pragma: no cover
    get = mapping.get
    for elem in iterable:
        mapping[elem] = get(elem, 0) + 1


# The C helper behind Counter.update (skips Counter's Python-level dispatch). It is
# private to CPython's collections and no stub declares it, hence the lookup by name;
# other interpreters get the Python loop above.
_count_elements: Callable[[dict[str, int], Iterable[str]], None] = getattr(
    collections, "_count_elements", _py_count_elements
)

# For str patterns, `\w` is exactly letters (L*), numbers (N*) and `_` on this
# interpreter's Unicode tables (verified by tests against `unicodedata.category`).
_WORD = re.compile(r"\w+")
_ASCII_WORD = re.compile(r"[a-z0-9_]+")

UNICODE_VERSION = unicodedata.unidata_version

# The optional C accelerator of `unique_terms_utf8` (fabric_lsp/engine/_native.c, built at
# install where a C compiler is at hand; the same tokens either way). FABRIC_LSP_NATIVE=0
# turns it off (the pure-Python path): engine/native.py.
_native: Any = NATIVE


# Lowercasing the whole text before matching gives the same tokens as lowercasing each
# run afterwards, except for U+0130 (its lowercase adds a combining mark) and U+03A3
# (the final-sigma rule looks across punctuation). Checked over all code points by tests.
_LOWER_FIRST_UNSAFE = ("\u0130", "\u03a3")

# ASCII fast path: one byte-table pass maps A-Z to a-z and every non-word byte to a space.
_ASCII_TABLE = bytes(
    (b + 32) if 65 <= b <= 90 else b if (48 <= b <= 57 or 97 <= b <= 122 or b == 95) else 32 for b in range(256)
)


def _ascii_tokens(text: str) -> list[str]:
    return text.encode("ascii").translate(_ASCII_TABLE).decode("ascii").split()


def tokenize_lexical(text: str) -> list[str]:
    """Tokens of `text` in order, duplicates kept."""
    if text.isascii():
        # NFKC is the identity on ASCII, and ASCII lowercasing cannot change a token's extent.
        return _ascii_tokens(text)
    normalized = unicodedata.normalize("NFKC", text)
    if _LOWER_FIRST_UNSAFE[0] not in normalized and _LOWER_FIRST_UNSAFE[1] not in normalized:
        return _WORD.findall(normalized.lower())
    return [run.lower() for run in _WORD.findall(normalized)]


# Mixed text: one byte-table pass turns ASCII non-word bytes into spaces (ASCII letters
# keep their case: composition with combining marks can depend on it, e.g. I + U+0307).
# The resulting pieces are split by ASCII separators, which are NFKC-stable starters that
# never compose into a letter or number, so each piece tokenizes independently; pure-ASCII
# pieces are whole tokens and only the rest pays for NFKC and the Unicode scan.
_MIXED_TABLE = bytes(
    b if (b >= 128 or 48 <= b <= 57 or 65 <= b <= 90 or 97 <= b <= 122 or b == 95) else 32 for b in range(256)
)


def _pieces(text: str) -> list[bytes]:
    """UTF-8 pieces of `text` between ASCII separators (ASCII letters keep their case).
    Splitting bytes is cheaper than splitting a non-ASCII str, and only the few pieces
    with non-ASCII bytes are decoded again."""
    return text.encode("utf-8", "surrogatepass").translate(_MIXED_TABLE).split()


def _slow_piece(piece: str) -> list[str]:
    normalized = unicodedata.normalize("NFKC", piece)
    if _LOWER_FIRST_UNSAFE[0] not in normalized and _LOWER_FIRST_UNSAFE[1] not in normalized:
        return _WORD.findall(normalized.lower())
    return [run.lower() for run in _WORD.findall(normalized)]


def native_index_text() -> tuple[Any, Any]:
    """The C accelerator's `index_text` and `add_counts` (a hot record's terms counted into
    its index's postings: `HotIndex.add`), or (None, None) without them (no accelerator,
    or one compiled from an older source, as an editable checkout keeps until rebuilt)."""
    index_text = getattr(_native, "index_text", None)
    add_counts = getattr(_native, "add_counts", None)
    if index_text is None or add_counts is None:
        return None, None
    return index_text, add_counts


def native_intern_terms() -> Any:
    """The C accelerator's `intern_terms` (a cold vocabulary into the cold term table:
    `ColdTermTable.add`), or None without it (or from an older source)."""
    return getattr(_native, "intern_terms", None)


# `finish_piece_counts`' loop in C (engine/_native.c), when it is built
_finish_counts: Any = getattr(NATIVE, "finish_counts", None)


def finish_piece_counts(pieces: dict[str | bytes, int]) -> dict[str, int]:
    """Term counts in first-seen order (as `term_counts`) from piece counts in first-seen
    order: a lowercased ASCII piece (str) is a term, a piece with a non-ASCII byte (bytes)
    is tokenized with NFKC and the Unicode scan."""
    if _finish_counts is not None:  # the loop below in C (test_native_tokens.py)
        return cast("dict[str, int]", _finish_counts(pieces, _slow_piece))
    counts: dict[str, int] = {}
    get = counts.get
    for piece, n in pieces.items():
        if type(piece) is str:
            counts[piece] = get(piece, 0) + n
        else:
            for token in _slow_piece(cast(bytes, piece).decode("utf-8", "surrogatepass")):
                counts[token] = get(token, 0) + n
    return counts


def unique_terms(text: str) -> set[str]:
    """The set of tokens of `text` (cheaper than counting when only presence matters)."""
    if _native is not None:
        return unique_terms_utf8(text.encode("utf-8", "surrogatepass"))
    if text.isascii():
        # split the bytes and decode only the distinct tokens (a text repeats its terms)
        return {t.decode("ascii") for t in set(text.encode("ascii").translate(_ASCII_TABLE).split())}
    return _unique_mixed(set(_pieces(text)))


def unique_terms_utf8(data: bytes) -> set[str]:
    """`unique_terms(data.decode("utf-8", "surrogatepass"))`, for text its caller holds
    encoded already (no second encoding)."""
    if _native is not None:
        words, mixed = _native.pieces(data)
        for piece in mixed:
            words.update(_slow_piece(piece.decode("utf-8", "surrogatepass")))
        return words
    return unique_terms_utf8_py(data)


def unique_terms_utf8_py(data: bytes) -> set[str]:
    """`unique_terms_utf8` without the C accelerator (what it is tested against)."""
    if data.isascii():
        return {t.decode("ascii") for t in set(data.translate(_ASCII_TABLE).split())}
    return _unique_mixed(set(data.translate(_MIXED_TABLE).split()))


def _unique_mixed(pieces: set[bytes]) -> set[str]:
    """The tokens of a text's distinct UTF-8 pieces (`_pieces`)."""
    mixed = {piece for piece in pieces if not piece.isascii()}
    pieces.difference_update(mixed)
    out = set(b" ".join(pieces).lower().decode("ascii").split())
    for piece in mixed:
        out.update(_slow_piece(piece.decode("utf-8", "surrogatepass")))
    return out


def term_counts(text: str) -> Counter[str]:
    """Token -> count, equal to `Counter(tokenize_lexical(text))`."""
    if text.isascii():
        return Counter(_ascii_tokens(text))
    counts: Counter[str] = Counter()
    for piece, n in Counter(_pieces(text)).items():
        if piece.isascii():
            counts[piece.lower().decode("ascii")] += n
        else:
            for token in _slow_piece(piece.decode("utf-8", "surrogatepass")):
                counts[token] += n
    return counts


def count_terms(text: str) -> tuple[dict[str, int], int]:
    """(token -> count in first-seen order, number of tokens): `term_counts` as a plain
    dict plus its total, the shape the hot index wants."""
    if text.isascii():
        tokens = _ascii_tokens(text)
        counts: dict[str, int] = {}
        _count_elements(counts, tokens)
        return counts, len(tokens)
    mixed = term_counts(text)
    return mixed, sum(mixed.values())


def reference_tokenize(text: str) -> list[str]:
    """The digest's definition, code point by code point (slow; the oracle for tests)."""
    normalized = unicodedata.normalize("NFKC", text)
    out: list[str] = []
    run: list[str] = []
    for ch in normalized:
        if ch == "_" or unicodedata.category(ch)[0] in "LN":
            run.append(ch)
        elif run:
            out.append("".join(run).lower())
            run = []
    if run:
        out.append("".join(run).lower())
    return out


# The one UTF-16 sort key (JS `<` order) is jsstr's; memory's modules import it from here.
utf16_key = utf16_sort_key


def sort_lexical(items: Iterable[str]) -> list[str]:
    """Sort strings in JS `<` order. Code point order agrees unless an astral character
    is present, so the UTF-16 key is only paid for then."""
    out = sorted(items)
    joined = "".join(out)
    if not joined.isascii() and len(joined.encode("utf-16-le", "surrogatepass")) != 2 * len(joined):
        out.sort(key=utf16_sort_key)
    return out


def plan_memory_query(query: str | None, mode: str = "literal") -> dict[str, Any]:
    """`{kind: browse}`, `{kind: regex, pattern}` (untrimmed) or `{kind: terms, terms}`.

    Literal input is never compiled as a regex: `src/foo.ts` is the terms src, foo, ts.
    """
    if query is None or not js_trim(query):
        return {"kind": "browse"}
    if mode == "regex":
        return {"kind": "regex", "pattern": query}
    seen: dict[str, None] = {}
    for term in tokenize_lexical(query):
        seen.setdefault(term, None)
    return {"kind": "terms", "terms": list(seen)}
