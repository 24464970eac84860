"""Entry references: the one syntax for "entry E of session S".

    pi-entry:<sessionId>/<entryId>

`sessionId` starts with a letter or digit and continues with letters, digits, `_`, `.`
or `-` (Pi's UUIDv7 session ids fit); `entryId` starts with a letter or digit and
continues with letters, digits, `_`, `.`, `:` or `-` (Pi's 8-hex entry ids fit). A `/`
ends the entry id, so an operation address such as `abcd1234/7` is referenced through
its carrier entry. Rendered recall text, hover and go-to-definition all use this syntax.

Pure Python; the invariant kept: every reference `format_reference` produces is found by
`find_references` with the same ids, and a reference is never matched inside a longer
word (the character before `pi-entry:` must not be a letter, digit, `_`, `-` or `.`).
"""

from __future__ import annotations

import re
from typing import Iterator, NamedTuple

SCHEME = "pi-entry"
_SESSION_ID = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
_ENTRY_ID = r"[A-Za-z0-9][A-Za-z0-9_.:-]*"
PATTERN = re.compile(rf"(?<![A-Za-z0-9_.-])pi-entry:({_SESSION_ID})/({_ENTRY_ID})")
_SESSION_ID_RE = re.compile(rf"{_SESSION_ID}\Z")
_ENTRY_ID_RE = re.compile(rf"{_ENTRY_ID}\Z")


class EntryReference(NamedTuple):
    session_id: str
    entry_id: str
    start: int  # character offset of `p` in the text searched
    end: int  # offset just past the entry id

    @property
    def text(self) -> str:
        return format_reference(self.session_id, self.entry_id)


def is_valid_session_id(value: str) -> bool:
    return bool(_SESSION_ID_RE.match(value))


def is_valid_entry_id(value: str) -> bool:
    return bool(_ENTRY_ID_RE.match(value))


def format_reference(session_id: str, entry_id: str) -> str:
    """`pi-entry:<sessionId>/<entryId>`; raises ValueError for ids the syntax cannot carry."""
    if not is_valid_session_id(session_id):
        raise ValueError(f"session id {session_id!r} cannot be written as an entry reference")
    if not is_valid_entry_id(entry_id):
        raise ValueError(f"entry id {entry_id!r} cannot be written as an entry reference")
    return f"{SCHEME}:{session_id}/{entry_id}"


def _trim(session_id: str, entry_id: str, end: int) -> tuple[str, str, int]:
    # Trailing sentence punctuation ("see pi-entry:s/e.") is not part of the id.
    while entry_id and entry_id[-1] in ".:" and len(entry_id) > 1:
        entry_id = entry_id[:-1]
        end -= 1
    return session_id, entry_id, end


def find_references(text: str) -> Iterator[EntryReference]:
    """Every reference in `text`, in order of appearance."""
    for m in PATTERN.finditer(text):
        sid, eid, end = _trim(m.group(1), m.group(2), m.end())
        yield EntryReference(sid, eid, m.start(), end)


def reference_at(line: str, character: int) -> EntryReference | None:
    """The reference covering `character` (a str index into `line`), if any. A cursor
    just past the last character still counts, as editors place it there."""
    for ref in find_references(line):
        if ref.start <= character <= ref.end:
            return ref
        if ref.start > character:
            break
    return None
