"""Decoding one session line as JSON.parse reads it: whole (numbers as JavaScript's,
non-finite constants refused, lone surrogate escapes read as U+FFFD), or, for a line over
the line limit, checked whole and decoded only up to a cut (`cut_json`: the lineage keys
always, then the small members, every cut string ending in `cut_note`). Below source.py
(the scan), which decides which lines are over the limit."""

from __future__ import annotations

import json
import re
from array import array
from itertools import accumulate
from typing import TYPE_CHECKING, Any, TypedDict

import msgspec

from ..native import NATIVE
from ..session.reader import MAX_JSON_DEPTH, exceeds_json_depth

if TYPE_CHECKING:
    from ..json_types import JsonValue

OVERSIZE_CUT_BYTES = 1 << 20  # bytes of an oversize line's JSON values decoded into its cut entry


def js_float(text: str) -> float | int:
    """JSON number with a fraction or exponent, as JS sees it: integral values are plain
    integers (JSON.stringify prints `1.0` as `1`), so re-encoding needs no fix-ups."""
    value = float(text)
    if value.is_integer() and abs(value) < 1e21:
        return int(value)
    return value


# (the accelerator's js_float is the same function in C: msgspec calls it for every
# number with a fraction or exponent)
_any_decoder = msgspec.json.Decoder(float_hook=getattr(NATIVE, "js_float", js_float))
whole_decoder = _any_decoder  # `decode_whole`'s first decoder (the C line scan calls it)


# ---- the kept values of a whole-file build: only the members memory reads ---------------
#
# A build keeps each content line's decoded value until its lineage is known (state_build
# `single_pass`). A message entry of a user, assistant or tool result message (nearly all
# lines, nearly all bytes) is decoded by `kept_decoder` instead: the members below, each
# value as `whole_decoder` gives it, every other member skipped (checked, never built: an
# assistant's `usage` and `cost`, `api`, `model`, `responseId`, a part's signatures or
# image data). They are every member of such an entry, its message and its content parts
# that the memory normalizer reads (entry_text.py, entry_fields.py, file_history.py,
# session/content.py, fabric_payloads.py via `details`), so its records, digest and file
# operations are those of the whole value (tests/engine/memory/test_kept_decoder.py builds
# both ways). A member the normalizer comes to read must be named here. The C line scan
# (`_native.scan_lines`) takes such a value only for an entry of that shape, whose line
# has at most MAX_JSON_DEPTH brackets (so it nests no deeper); any other line, and any line
# the typed decode refuses, is decoded whole as before.


class _KeptPart(TypedDict, total=False):
    type: Any
    text: Any
    thinking: Any
    name: Any
    id: Any
    arguments: Any


class _KeptMessage(TypedDict, total=False):
    role: Any
    content: str | list[_KeptPart]
    toolName: Any
    toolCallId: Any
    isError: Any
    errorMessage: Any
    timestamp: Any
    details: Any
    command: Any
    exitCode: Any
    output: Any
    summary: Any
    fromId: Any
    customType: Any
    display: Any


class _KeptEntry(TypedDict, total=False):
    type: Any
    id: Any
    parentId: Any
    timestamp: Any
    message: _KeptMessage
    summary: Any
    details: Any
    fromId: Any
    customType: Any
    content: Any
    display: Any


# (the roles whose entries the C scan takes from `kept_decoder`)
KEPT_ROLES = frozenset({"user", "assistant", "toolResult"})
kept_decoder = msgspec.json.Decoder(_KeptEntry, float_hook=getattr(NATIVE, "js_float", js_float))
# What the C line scan and entry loop (scan_lines, stream_entries) are handed to decode a
# kept line with; None for an extension built from an older source (no `KEPT_DECODE`
# mark), which takes only the whole decoder
KEPT_DECODE: Any = (
    (kept_decoder.decode, whole_decoder.decode, KEPT_ROLES) if getattr(NATIVE, "KEPT_DECODE", 0) == 1 else None
)


def _scrub(value: JsonValue) -> Any:
    """Replace lone surrogates (legal in JSON, not in UTF-8) so the value can be re-encoded."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            # One U+FFFD per lone surrogate (UTF-16 round trip keeps valid pairs).
            return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def _reject_constant(name: str) -> Any:
    # json.loads accepts NaN, Infinity and -Infinity; JSON.parse (and so Pi) skips the line.
    raise ValueError(f"{name} is not valid JSON")


def decode_whole(raw: bytes, depth_checked: bool) -> tuple[bool, Any]:
    try:
        value = _any_decoder.decode(raw)
    except Exception:  # DecodeError, RecursionError
        try:
            # msgspec rejects lone surrogate escapes and out-of-range numbers; JSON.parse does not.
            value = _scrub(
                json.loads(
                    raw.decode("utf-8", "surrogateescape"), parse_float=js_float, parse_constant=_reject_constant
                )
            )
        except Exception:
            return False, None
    if not depth_checked and exceeds_json_depth(raw, value):
        return False, None
    return True, value


# ---- lines over MAX_LINE_BYTES: checked whole, decoded only up to a cut ----------------

_SMALL_VALUE = 4096  # a value of at most this many bytes is decoded whole or not at all
_CUT_ARRAY_ITEMS = 64  # elements of an array a cut value looks at (the rest are skipped)
_CUT_DEPTH = 32  # containers a cut value descends into (deeper ones become empty)
_ENVELOPE_KEYS = ("type", "id", "parentId")
_MiB = 1 << 20

_raw_decoder = msgspec.json.Decoder(msgspec.Raw)  # checks a whole JSON text, allocates nothing
_object_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ArrayHead = msgspec.defstruct(
    "_ArrayHead", [(f"e{i}", msgspec.Raw, msgspec.Raw()) for i in range(_CUT_ARRAY_ITEMS)], array_like=True
)
_array_head_decoder = msgspec.json.Decoder(_ArrayHead)  # the first elements; the rest are skipped
_ARRAY_FIELDS = _ArrayHead.__struct_fields__
# An escaped backslash (consumed, so the parity of a backslash run is respected), a
# surrogate pair escape (kept) or a lone surrogate escape (replaced by U+FFFD).
_SURROGATE_ESCAPE = re.compile(
    rb"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_BRACKET_STEPS = bytes.maketrans(b"[]{}", b"\x01\xff\x01\xff")  # +1 / -1 as signed bytes


def cut_note(size: int, limit: int) -> str:
    """What ends every text cut from a line over the limit."""
    shown = f"{limit // _MiB} MiB" if limit % _MiB == 0 else f"{limit:,} bytes"
    return (
        f"\n[… cut by fabric-lsp: this entry's line in the session file is {size:,} bytes, over the "
        f"line limit of {shown}; only its first part is read here — the rest is in the file]"
    )


def _lone_surrogates_replaced(raw: bytes) -> bytes:
    """`raw` with every lone surrogate escape (legal JSON, refused by msgspec) written as
    `\\ufffd`: what `decode_json_line`'s fallback decodes such a string to (`_scrub`)."""

    def sub(m: re.Match[bytes]) -> bytes:
        text = m.group(0)
        return b"\\ufffd" if len(text) == 6 else text

    return _SURROGATE_ESCAPE.sub(sub, raw)


def _nests_deeper(raw: bytes, limit: int) -> bool:
    """Whether the valid JSON text `raw` nests arrays/objects deeper than `limit`, without
    decoding it: only brackets outside strings count (escapes removed first, then every
    other run between quotes is a string)."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    bare = raw.replace(b"\\\\", b"").replace(b'\\"', b"")  # valid JSON: backslashes only escape
    outside = b"".join(bare.split(b'"')[0::2])
    del bare
    brackets = outside.translate(None, _NOT_BRACKETS)
    del outside
    if len(brackets) <= 2 * limit:
        return False  # (balanced: at most limit openings)
    return max(accumulate(array("b", brackets.translate(_BRACKET_STEPS)))) > limit


class _Cut:
    __slots__ = ("budget", "note")

    def __init__(self, budget: int, note: str) -> None:
        self.budget = budget
        self.note = note


_DROPPED = object()


def _exact(raw: Any) -> Any:
    """The value of one JSON value taken from a checked line (`JSON.parse`'s, as
    `decode_json_line` gives it; None when even the fallback refuses it)."""
    ok, value = decode_whole(bytes(raw), True)
    return value if ok else None


def _string_head(raw: Any, keep: int) -> str:
    """The longest decodable prefix of the JSON string `raw` (quotes included) within its
    first `keep` bytes: never half an escape or half a UTF-8 sequence."""
    view = memoryview(raw)
    head = bytes(view[: max(1, min(keep, len(view) - 1))])
    for strict in (True, False):
        for back in range(min(16, len(head))):
            piece = head[: len(head) - back] + b'"'
            if strict:
                try:
                    value = _any_decoder.decode(piece)
                except Exception:
                    continue
            else:
                ok, value = decode_whole(piece, True)
                if not ok:
                    continue
            if isinstance(value, str):
                return value
    return ""


def _cut_value(raw: Any, cut: _Cut, depth: int) -> Any:
    """`raw` (one checked JSON value) decoded within `cut.budget` bytes: whole when it
    fits; otherwise a string keeps a prefix (+ the note), a container its members that fit
    (small ones first, then the others in order, cut in turn)."""
    size = len(raw)
    if size <= cut.budget:
        cut.budget -= size
        return _exact(raw)
    first = memoryview(raw)[0]
    if first == 0x22:  # "
        keep, cut.budget = cut.budget, 0
        return _string_head(raw, keep) + cut.note
    if first == 0x7B:  # {
        if depth >= _CUT_DEPTH:
            return {}
        try:
            members: Any = _object_decoder.decode(raw)
        except Exception:  # e.g. a key msgspec will not decode (invalid UTF-8)
            return {}
        keys = list(members)
        values = _cut_members(list(members.values()), cut, depth, keys if depth == 0 else None)
        return {k: v for k, v in zip(keys, values) if v is not _DROPPED}
    if first == 0x5B:  # [
        if depth >= _CUT_DEPTH:
            return []
        try:
            head = _array_head_decoder.decode(raw)
        except Exception:
            return []
        items = [r for r in (getattr(head, name) for name in _ARRAY_FIELDS) if len(r)]
        return [v for v in _cut_members(items, cut, depth, None) if v is not _DROPPED]
    return _exact(raw)  # a number of more digits than the budget (JSON.parse reads it)


def _cut_members(raws: list[Any], cut: _Cut, depth: int, keys: list[str] | None) -> list[Any]:
    out: list[Any] = [_DROPPED] * len(raws)
    if keys is not None:
        # an entry's envelope first: its lineage must not depend on what else fits (a
        # value too long to be an id is no id: False, neither a string nor null)
        for i, key in enumerate(keys):
            if key in _ENVELOPE_KEYS:
                out[i] = _exact(raws[i]) if len(raws[i]) <= _SMALL_VALUE else False
                cut.budget = max(0, cut.budget - len(raws[i]))
    for i, raw in enumerate(raws):
        if out[i] is _DROPPED and len(raw) <= _SMALL_VALUE and len(raw) <= cut.budget:
            cut.budget -= len(raw)
            out[i] = _exact(raw)
    for i, raw in enumerate(raws):
        if out[i] is _DROPPED and len(raw) > _SMALL_VALUE:
            out[i] = _cut_value(raw, cut, depth + 1)
    return out


def cut_json(
    raw: bytes, *, budget: int | None = None, depth_checked: bool = False, limit: int | None = None
) -> tuple[bool, Any]:
    """(parsed, value) of a line too long to decode whole (`decode_json_line`'s contract).

    `parsed` is what `JSON.parse` says, checked over the whole line without building its
    values (msgspec's skip; a lone surrogate escape is read as U+FFFD, as `_scrub` does),
    and a line nested deeper than `MAX_JSON_DEPTH` is not parsed, as everywhere. The
    value is the line's value decoded within `budget` bytes (`_cut_value`): an object's
    `type`, `id` and `parentId` always (the lineage), then its small members, then the
    rest in order; every string cut short ends with `cut_note`. A line of at most
    `budget` bytes is decoded whole: the value is then exactly `decode_json_line`'s.
    `budget` defaults to `OVERSIZE_CUT_BYTES` (never more than the line limit), `limit`
    (named in the note) is the caller's line limit (`source.MAX_LINE_BYTES`). Never raises
    for bad input."""
    if limit is None:
        raise TypeError("cut_json: the line limit must be given (source.MAX_LINE_BYTES)")
    if budget is None:
        budget = min(OVERSIZE_CUT_BYTES, limit)
    line = raw
    try:
        top = _raw_decoder.decode(raw)
    except Exception:
        try:
            fixed = _lone_surrogates_replaced(raw)
            top = _raw_decoder.decode(fixed)
        except Exception:
            return False, None
        raw = fixed
    if not depth_checked and _nests_deeper(raw, MAX_JSON_DEPTH):
        return False, None
    if len(top) <= budget:
        return decode_whole(line, True)
    note = cut_note(len(raw), limit)
    try:
        return True, _cut_value(top, _Cut(budget, note), 0)
    except Exception:  # (a decoder refusing a member it already checked: cut to nothing)
        return True, None
