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

What a user types (`:Fabric expand`, Expand Entry…, `fabric-lsp expand`) is one
reference read by `parse_reference`, in one of four forms:

    pi-entry:<sessionId>/<entryId>    the canonical form above
    <session>/<entryId>               <session>: an id, an id prefix (>= 8 chars) or a path
    <entryId>                         an entry of the session at hand (buffer, --session)
    <entryId>/<n>                     operation n (1-6 digits) of that entry's fabric_exec

`<x>/<n>` with `<n>` of 1 to 6 digits is always an operation address (Pi's entry ids are
8 hex digits, so never that short). A session containing `/` or `\\`, or starting with
`~`, `.` or `file://`, or ending in `.jsonl`, is a path; the entry id is after its last
`/`. The same rules, with the same table of cases (tests/fixtures/references.json), are
implemented in editors/vscode/src/references.ts and editors/neovim/lua/fabric/references.lua.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

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


class ParsedReference(NamedTuple):
    """A reference as typed: `session` is None for the bare forms (the session at hand
    decides), else an id, id prefix or path still to resolve; `operation` is the sequence
    of an operation address."""

    session: str | None
    entry: str
    operation: int | None = None


class ReferenceSyntaxError(ValueError):
    """Text that is none of the reference forms; the message says which forms are."""


FORMS = "pi-entry:<session>/<entry>, <session>/<entry>, <entry> or <entry>/<n>"
_OPERATION_RE = re.compile(r"[0-9]{1,6}\Z")


def _is_path(session: str) -> bool:
    return "/" in session or "\\" in session or session.startswith(("~", ".", "file://")) or session.endswith(".jsonl")


def _entry_part(text: str, whole: str) -> str:
    # Trailing sentence punctuation is not part of the id, as in running text.
    entry = text
    while len(entry) > 1 and entry[-1] in ".:":
        entry = entry[:-1]
    if not is_valid_entry_id(entry):
        raise ReferenceSyntaxError(f"not an entry id: {text!r} in {whole!r} (expected {FORMS})")
    return entry


def parse_reference(text: str) -> ParsedReference:
    """Read one typed reference (surrounding whitespace ignored). Raises
    `ReferenceSyntaxError` for anything else. Never touches the file system: a session
    prefix or path is resolved later by `engine.session.resolve_session`."""
    whole = text.strip()
    if not whole:
        raise ReferenceSyntaxError(f"empty reference (expected {FORMS})")
    if whole.startswith(SCHEME + ":"):
        rest = whole[len(SCHEME) + 1 :]
        session, slash, entry = rest.partition("/")
        if not slash or not is_valid_session_id(session):
            raise ReferenceSyntaxError(f"not a {SCHEME}:<session>/<entry> reference: {whole!r}")
        return ParsedReference(session, _entry_part(entry, whole))
    head, slash, tail = whole.rpartition("/")
    # Only a path may hold spaces ("~/My Sessions/x.jsonl/<entry>").
    if any(ch.isspace() for ch in tail) or (not _is_path(head) and any(ch.isspace() for ch in head)):
        raise ReferenceSyntaxError(f"a reference has no spaces: {whole!r} (expected {FORMS})")
    if not slash:
        return ParsedReference(None, _entry_part(whole, whole))
    if not tail:
        raise ReferenceSyntaxError(f"missing entry id after '/': {whole!r} (expected {FORMS})")
    if _OPERATION_RE.match(tail) and is_valid_entry_id(head):
        return ParsedReference(None, head, int(tail))
    if not head:
        raise ReferenceSyntaxError(f"missing session before '/': {whole!r} (expected {FORMS})")
    if not _is_path(head) and not is_valid_session_id(head):
        raise ReferenceSyntaxError(f"not a session id or path: {head!r} in {whole!r} (expected {FORMS})")
    return ParsedReference(head, _entry_part(tail, whole))


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
