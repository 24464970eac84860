"""Validation of `compact.request` arguments, with seed 001's exact limits and messages.

Two layers, as in the reference provider:

* `validate_request_arguments(params)` is the schema layer of the `compact` provider:
  types, unknown fields and `maxLength`/`maxItems` (counted in code points, which the
  digest allows), then the bounds check, then the encoded-size trial. Schema and bounds
  failures are prefixed with `Invalid compact.request arguments: `; the encoded-size
  failure is the raw encoder message (seed behaviour, discrepancies.md C.30).
* `check_bounds(instructions, preserve)` is the controller/decoder bounds check, in the
  seed's check order, with the UTF-16 and UTF-8 measures the reference uses.

Every failure raises `ValueError` carrying the exact message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

# the one JS-semantics module: UTF-16 pairing and length rules shared with both engines
from ..jsstr import has_unpaired_surrogate as has_unpaired_surrogate
from ..jsstr import utf16_len as utf16_units

TYPED_REQUEST_PREFIX = "__pi_fabric_compact_request_v1__:"
MAX_INSTRUCTIONS = 8192
MAX_PRESERVE_ITEMS = 16
MAX_PRESERVE_ITEM = 2048
MAX_ENCODED_BYTES = 16384
MAX_REASON = 1024
MAX_REQUESTED_BY = 256

MSG_PRESERVE_NOT_ARRAY = "compact preserve must be an array of strings"
MSG_INSTRUCTIONS_SURROGATE = "typed compaction instructions contain an unpaired UTF-16 surrogate"
MSG_INSTRUCTIONS_TOO_LARGE = (
    f"typed compaction instructions exceed {MAX_INSTRUCTIONS} characters or {MAX_INSTRUCTIONS} UTF-8 bytes"
)
MSG_PRESERVE_TOO_MANY = f"typed compaction preserve exceeds {MAX_PRESERVE_ITEMS} items"
MSG_ITEM_SURROGATE = "typed compaction preserve item contains an unpaired UTF-16 surrogate"
MSG_ITEM_TOO_LARGE = (
    f"typed compaction preserve item exceeds {MAX_PRESERVE_ITEM} characters or {MAX_PRESERVE_ITEM} UTF-8 bytes"
)
MSG_ENCODED_TOO_LARGE = f"typed compaction request exceeds {MAX_ENCODED_BYTES} encoded UTF-8 bytes"
INVALID_ARGUMENTS_PREFIX = "Invalid compact.request arguments: "

# Keys of the wire params that are not request arguments (the LSP layer adds them).
_TRANSPORT_KEYS = frozenset({"session", "workDoneToken"})
_REQUEST_KEYS = ("reason", "instructions", "preserve", "requestedBy")


def utf8_bytes(text: str) -> int:
    """UTF-8 length of `text`; only called on surrogate-free text."""
    return len(text.encode("utf-8"))


def _too_large(text: str, limit: int) -> bool:
    return utf16_units(text) > limit or utf8_bytes(text) > limit


def check_bounds(instructions: str | None, preserve: Sequence[str] | None) -> None:
    """The seed's bounds check, in its order; raises ValueError with the exact message."""
    if instructions is not None:
        if has_unpaired_surrogate(instructions):
            raise ValueError(MSG_INSTRUCTIONS_SURROGATE)
        if _too_large(instructions, MAX_INSTRUCTIONS):
            raise ValueError(MSG_INSTRUCTIONS_TOO_LARGE)
    if preserve is not None:
        if len(preserve) > MAX_PRESERVE_ITEMS:
            raise ValueError(MSG_PRESERVE_TOO_MANY)
        for item in preserve:
            if has_unpaired_surrogate(item):
                raise ValueError(MSG_ITEM_SURROGATE)
            if _too_large(item, MAX_PRESERVE_ITEM):
                raise ValueError(MSG_ITEM_TOO_LARGE)


def encode_typed_request(instructions: str | None, preserve: Sequence[str]) -> str:
    """`prefix + JSON.stringify({version: 1, instructions?, preserve})`.

    Compact JSON with raw non-ASCII, as JavaScript writes it (the text is surrogate-free
    after `check_bounds`, so Python's escaping of control characters matches).
    Raises ValueError when the encoding exceeds 16384 UTF-8 bytes.
    """
    payload: dict[str, Any] = {"version": 1}
    if instructions:
        payload["instructions"] = instructions
    payload["preserve"] = list(preserve)
    encoded = TYPED_REQUEST_PREFIX + json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    if len(encoded.encode("utf-8")) > MAX_ENCODED_BYTES:
        raise ValueError(MSG_ENCODED_TOO_LARGE)
    return encoded


def _code_points_over(value: str, limit: int) -> bool:
    return len(value) > limit


def validate_request_arguments(params: object) -> dict[str, Any]:
    """Schema + bounds + encoded-size validation of `compact.request` arguments.

    Returns the request arguments (only `reason`, `instructions`, `preserve`,
    `requestedBy`; `None` values count as absent). Raises ValueError with the
    provider's message; nothing is recorded by the caller on a raise.
    """
    if not isinstance(params, Mapping):
        raise ValueError(INVALID_ARGUMENTS_PREFIX + "/: expected object")
    params = cast("Mapping[str, Any]", params)  # a wire JSON object: string keys
    errors: list[str] = []
    args: dict[str, Any] = {}
    for key in sorted(params):
        if key in _TRANSPORT_KEYS:
            continue
        if key not in _REQUEST_KEYS:
            errors.append(f"/{key}: unknown property")
    for key, limit in (("reason", MAX_REASON), ("instructions", MAX_INSTRUCTIONS), ("requestedBy", MAX_REQUESTED_BY)):
        value = params.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            errors.append(f"/{key}: expected string")
        elif _code_points_over(value, limit):
            errors.append(f"/{key}: expected string length <= {limit}")
        else:
            args[key] = value
    preserve = params.get("preserve")
    if preserve is not None:
        if not isinstance(preserve, (list, tuple)):
            errors.append("/preserve: expected array")
        else:
            preserve = cast("Sequence[Any]", preserve)  # a list or tuple, checked above
            if len(preserve) > MAX_PRESERVE_ITEMS:
                errors.append(f"/preserve: expected array length <= {MAX_PRESERVE_ITEMS}")
            item_ok = True
            for i, item in enumerate(preserve):
                if not isinstance(item, str):
                    errors.append(f"/preserve/{i}: expected string")
                    item_ok = False
                elif _code_points_over(item, MAX_PRESERVE_ITEM):
                    errors.append(f"/preserve/{i}: expected string length <= {MAX_PRESERVE_ITEM}")
                    item_ok = False
            if item_ok:
                args["preserve"] = list(preserve)
    if errors:
        raise ValueError(INVALID_ARGUMENTS_PREFIX + "; ".join(errors[:5]))
    check_request(args.get("instructions"), args.get("preserve"))
    return args


def check_request(instructions: str | None, preserve: Sequence[str] | None) -> None:
    """The checks after the schema layer, in the seed's order: the bounds (prefixed with
    `Invalid compact.request arguments: `), then the encoded-size trial (the raw encoder
    message). What `fabric/compact/request` runs on its decoded params, whose Struct is
    the schema layer."""
    try:
        check_bounds(instructions, preserve)
    except ValueError as err:
        raise ValueError(INVALID_ARGUMENTS_PREFIX + str(err)) from None
    if preserve is not None:
        encode_typed_request(instructions, preserve)  # raw message on failure
