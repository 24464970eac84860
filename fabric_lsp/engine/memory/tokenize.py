"""The one canonical lexical tokenizer of memory (digest §1).

`tokenize_lexical(text)`: Unicode NFKC over the whole text, then every maximal run of
code points in `[\\p{L}\\p{N}_]`, then each run lowercased (after matching, never before
for non-ASCII text). Literal queries, hot BM25 scoring and cold vocabularies all use it,
so a term found by one is found by the others.

Invariant: `tokenize_lexical` equals the code-point category scan `reference_tokenize`
(checked by property tests); the fast paths below only change speed, never tokens.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from typing import Iterable

# For str patterns, `\w` is exactly letters (L*), numbers (N*) and `_` on this
# interpreter's Unicode tables (verified by tests against `unicodedata.category`).
_WORD = re.compile(r"\w+")
_ASCII_WORD = re.compile(r"[a-z0-9_]+")

UNICODE_VERSION = unicodedata.unidata_version


def tokenize_lexical(text: str) -> list[str]:
    """Tokens of `text` in order, duplicates kept."""
    if text.isascii():
        # NFKC is the identity on ASCII, and ASCII lowercasing cannot change a token's extent.
        return _ASCII_WORD.findall(text.lower())
    normalized = unicodedata.normalize("NFKC", text)
    return [run.lower() for run in _WORD.findall(normalized)]


def unique_terms(text: str) -> set[str]:
    """The set of tokens of `text` (cheaper than counting when only presence matters)."""
    if text.isascii():
        return set(_ASCII_WORD.findall(text.lower()))
    normalized = unicodedata.normalize("NFKC", text)
    return {run.lower() for run in set(_WORD.findall(normalized))}


def lexical_term_counts(text: str) -> Counter[str]:
    return Counter(tokenize_lexical(text))


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


def utf16_key(s: str) -> bytes:
    """Sort key giving JS `<` order (UTF-16 code units)."""
    return s.encode("utf-16-be", "surrogatepass")


def sort_lexical(items: Iterable[str]) -> list[str]:
    """Sort strings in JS `<` order. Code point order agrees unless an astral character
    is present, so the UTF-16 key is only paid for then."""
    out = sorted(items)
    if out and any(max(s, default="\0") > "\uffff" for s in out):
        out.sort(key=utf16_key)
    return out


def plan_memory_query(query: str | None, mode: str = "literal") -> dict:
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


# JS String.prototype.trim removes WhiteSpace and LineTerminator code points.
_JS_WS = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def js_trim(s: str) -> str:
    return s.strip(_JS_WS)
