"""Custom instructions (digest §9): plain text, the `__pi_vcc__` sentinel, and the strict
typed v1 `compact.request` protocol with its fail-closed decoder."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, TypeAlias

from ..jsstr import has_unpaired_surrogate, is_str_list, js_keys, js_quote, js_stringify, utf16_len
from .bounds import canonicalize_text, utf8_bytes

PI_VCC_SENTINEL = "__pi_vcc__"
TYPED_PREFIX = "__pi_fabric_compact_request_v1__:"
MAX_ENCODED_BYTES = 16384
MAX_INSTRUCTIONS = 8192
MAX_PRESERVE_ITEMS = 16
MAX_PRESERVE_ITEM = 2048
MAX_DEPTH = 32
MAX_NODES = 4096

MSG_TOO_LARGE = f"typed compaction request exceeds {MAX_ENCODED_BYTES} encoded UTF-8 bytes"
MSG_MALFORMED = "typed compaction request contains malformed JSON"
MSG_UNPAIRED_JSON = "typed compaction JSON string contains an unpaired UTF-16 surrogate"
MSG_DEPTH = "typed compaction JSON exceeds the structural depth limit"
MSG_NODES = "typed compaction JSON exceeds the structural node limit"
MSG_OBJECT = "typed compaction request must be a JSON object"
MSG_VERSION = "typed compaction request version must be 1"
MSG_INSTR_TYPE = "typed compaction request instructions must be a string"
MSG_PRESERVE_TYPE = "typed compaction request preserve must be an array"
MSG_PRESERVE_MANY = f"typed compaction preserve exceeds {MAX_PRESERVE_ITEMS} items"
MSG_ITEM_TYPE = "typed compaction preserve items must be strings"
MSG_INSTR_UNPAIRED = "typed compaction instructions contain an unpaired UTF-16 surrogate"
MSG_INSTR_LARGE = "typed compaction instructions exceed 8192 characters or 8192 UTF-8 bytes"
MSG_ITEM_UNPAIRED = "typed compaction preserve item contains an unpaired UTF-16 surrogate"
MSG_ITEM_LARGE = "typed compaction preserve item exceeds 2048 characters or 2048 UTF-8 bytes"

ALLOWED_FIELDS = ("version", "instructions", "preserve")

# What the strict parser returns: a JSON value (numbers are int or float).
Json: TypeAlias = None | bool | int | float | str | list["Json"] | dict[str, "Json"]


class DecodeError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def none_policy() -> dict[str, Any]:
    return {
        "mode": "none",
        "canonicalized": False,
        "sourceBytes": 0,
        "truncated": False,
        "preserveCount": 0,
        "omittedPreserveCount": 0,
    }


# ---------------------------------------------------------------- strict parser

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_WS = " \t\n\r"
_SIMPLE_ESC = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX = frozenset("0123456789abcdefABCDEF")


class _Parser:
    __slots__ = ("s", "i", "n", "nodes")

    def __init__(self, s: str) -> None:
        self.s = s
        self.i = 0
        self.n = len(s)
        self.nodes = 0

    def fail(self) -> DecodeError:
        return DecodeError("malformed-json", MSG_MALFORMED)

    def ws(self) -> None:
        s, i, n = self.s, self.i, self.n
        while i < n and s[i] in _WS:
            i += 1
        self.i = i

    def parse(self) -> Json:
        self.ws()
        v = self.value(0)
        self.ws()
        if self.i != self.n:
            raise self.fail()
        return v

    def count(self) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise DecodeError("structure-too-complex", MSG_NODES)

    def value(self, depth: int) -> Json:
        if self.i >= self.n:
            raise self.fail()
        c = self.s[self.i]
        self.count()
        if c == "{":
            return self.obj(depth + 1)
        if c == "[":
            return self.arr(depth + 1)
        if c == '"':
            return self.string()
        if c == "t":
            return self.lit("true", True)
        if c == "f":
            return self.lit("false", False)
        if c == "n":
            return self.lit("null", None)
        if c == "-" or c.isdigit():
            return self.number()
        raise self.fail()

    def lit(self, word: str, val: Json) -> Json:
        if self.s.startswith(word, self.i):
            self.i += len(word)
            return val
        raise self.fail()

    def number(self) -> int | float:
        m = _NUMBER.match(self.s, self.i)
        if m is None or not m.group(0).isascii():
            raise self.fail()
        text = m.group(0)
        self.i = m.end()
        if "." in text or "e" in text or "E" in text:
            v = float(text)
            if not math.isfinite(v):
                raise self.fail()
            return v
        if not math.isfinite(float(text)):
            raise self.fail()
        return int(text)

    def string(self) -> str:
        s, i, n = self.s, self.i + 1, self.n
        out: list[str] = []
        start = i
        while True:
            if i >= n:
                raise self.fail()
            c = s[i]
            if c == '"':
                out.append(s[start:i])
                i += 1
                break
            if c == "\\":
                out.append(s[start:i])
                if i + 1 >= n:
                    raise self.fail()
                e = s[i + 1]
                if e in _SIMPLE_ESC:
                    out.append(_SIMPLE_ESC[e])
                    i += 2
                elif e == "u":
                    h = s[i + 2 : i + 6]
                    if len(h) != 4 or not all(ch in _HEX for ch in h):
                        raise self.fail()
                    out.append(chr(int(h, 16)))
                    i += 6
                else:
                    raise self.fail()
                start = i
                continue
            if c <= "\x1f":
                raise self.fail()
            i += 1
        self.i = i
        text = "".join(out)
        if not text.isascii():
            # join escaped/raw surrogate halves into pairs exactly as UTF-16 would
            text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
            if has_unpaired_surrogate(text):
                raise DecodeError("invalid-unicode", MSG_UNPAIRED_JSON)
        return text

    def arr(self, depth: int) -> list[Json]:
        if depth > MAX_DEPTH:
            raise DecodeError("structure-too-complex", MSG_DEPTH)
        self.i += 1
        out: list[Json] = []
        self.ws()
        if self.i < self.n and self.s[self.i] == "]":
            self.i += 1
            return out
        while True:
            self.ws()
            out.append(self.value(depth))
            self.ws()
            if self.i >= self.n:
                raise self.fail()
            c = self.s[self.i]
            self.i += 1
            if c == ",":
                continue
            if c == "]":
                return out
            raise self.fail()

    def obj(self, depth: int) -> dict[str, Json]:
        if depth > MAX_DEPTH:
            raise DecodeError("structure-too-complex", MSG_DEPTH)
        self.i += 1
        out: dict[str, Json] = {}
        self.ws()
        if self.i < self.n and self.s[self.i] == "}":
            self.i += 1
            return out
        while True:
            self.ws()
            if self.i >= self.n or self.s[self.i] != '"':
                raise self.fail()
            key = self.string()
            if key in out:
                raise DecodeError(
                    "duplicate-field", f"typed compaction request contains duplicate field {js_quote(key)}"
                )
            self.ws()
            if self.i >= self.n or self.s[self.i] != ":":
                raise self.fail()
            self.i += 1
            self.ws()
            out[key] = self.value(depth)
            self.ws()
            if self.i >= self.n:
                raise self.fail()
            c = self.s[self.i]
            self.i += 1
            if c == ",":
                continue
            if c == "}":
                return out
            raise self.fail()


# ------------------------------------------------------------------ bounds check


def bounds_error(instructions: str | None, preserve: Sequence[str] | None) -> tuple[str, str] | None:
    if instructions is not None:
        if has_unpaired_surrogate(instructions):
            return ("invalid-unicode", MSG_INSTR_UNPAIRED)
        if utf16_len(instructions) > MAX_INSTRUCTIONS or utf8_bytes(instructions) > MAX_INSTRUCTIONS:
            return ("instructions-too-large", MSG_INSTR_LARGE)
    if preserve is not None:
        if len(preserve) > MAX_PRESERVE_ITEMS:
            return ("preserve-too-many", MSG_PRESERVE_MANY)
        for item in preserve:
            if has_unpaired_surrogate(item):
                return ("invalid-unicode", MSG_ITEM_UNPAIRED)
            if utf16_len(item) > MAX_PRESERVE_ITEM or utf8_bytes(item) > MAX_PRESERVE_ITEM:
                return ("preserve-item-too-large", MSG_ITEM_LARGE)
    return None


def encode_request_unchecked(instructions: str | None, preserve: Sequence[str] | None) -> str:
    payload: dict[str, Any] = {"version": 1}
    if instructions is not None:
        payload["instructions"] = instructions
    if preserve is not None:
        payload["preserve"] = list(preserve)
    return TYPED_PREFIX + js_stringify(payload)


def encode_compaction_request(instructions: str | None = None, preserve: Sequence[str] | None = None) -> str:
    """The controller's encoder: bounds check (raises ValueError), then prefix + JSON."""
    err = bounds_error(instructions, preserve)
    if err is not None:
        raise ValueError(err[1])
    out = encode_request_unchecked(instructions, preserve)
    if utf8_bytes(out) > MAX_ENCODED_BYTES:
        raise ValueError(MSG_TOO_LARGE)
    return out


# --------------------------------------------------------------------- decoding


def decode_instructions(source: str | None) -> dict[str, Any]:
    """`{ok: True, policy, requestLines}` or `{ok: False, error: {code, message, sourceBytes}}`."""
    if source is None or source == "":
        return {"ok": True, "policy": none_policy(), "requestLines": []}
    if not source.startswith(TYPED_PREFIX):
        c = canonicalize_text(source, MAX_INSTRUCTIONS)
        return {
            "ok": True,
            "policy": {
                "mode": "plain",
                "canonicalized": c["text"] != source,
                "sourceBytes": c["sourceBytes"],
                "truncated": c["truncated"],
                "preserveCount": 0,
                "omittedPreserveCount": 0,
            },
            "requestLines": [c["text"]] if c["text"] else [],
        }
    try:
        return _decode_typed(source)
    except DecodeError as e:
        return {"ok": False, "error": {"code": e.code, "message": e.message, "sourceBytes": utf8_bytes(source)}}
    except RecursionError:
        return {
            "ok": False,
            "error": {"code": "structure-too-complex", "message": MSG_DEPTH, "sourceBytes": utf8_bytes(source)},
        }


def _decode_typed(source: str) -> dict[str, Any]:
    if utf8_bytes(source) > MAX_ENCODED_BYTES:
        raise DecodeError("encoded-source-too-large", MSG_TOO_LARGE)
    value = _Parser(source[len(TYPED_PREFIX) :]).parse()
    if not isinstance(value, dict):
        raise DecodeError("invalid-object", MSG_OBJECT)
    for k in js_keys(value):
        if k not in ALLOWED_FIELDS:
            raise DecodeError("unknown-field", f"typed compaction request contains unknown field {js_quote(k)}")
    version = value.get("version")
    if isinstance(version, bool) or not isinstance(version, (int, float)) or version != 1:
        raise DecodeError("unsupported-version", MSG_VERSION)
    instructions: str | None = None
    if "instructions" in value:
        raw_instructions = value["instructions"]
        if not isinstance(raw_instructions, str):
            raise DecodeError("invalid-type", MSG_INSTR_TYPE)
        instructions = raw_instructions
    preserve: list[str] | None = None
    if "preserve" in value:
        raw_preserve = value["preserve"]
        if not isinstance(raw_preserve, list):
            raise DecodeError("invalid-type", MSG_PRESERVE_TYPE)
        if len(raw_preserve) > MAX_PRESERVE_ITEMS:
            raise DecodeError("preserve-too-many", MSG_PRESERVE_MANY)
        if not is_str_list(raw_preserve):
            raise DecodeError("invalid-type", MSG_ITEM_TYPE)
        preserve = raw_preserve
    err = bounds_error(instructions, preserve)
    if err is not None:
        raise DecodeError(*err)
    lines: list[str] = []
    source_bytes = 0
    truncated = False
    canonicalized = False
    if instructions is not None:
        c = canonicalize_text(instructions, MAX_INSTRUCTIONS)
        source_bytes += c["sourceBytes"]
        truncated = truncated or c["truncated"]
        canonicalized = canonicalized or c["text"] != instructions
        if c["text"]:
            lines.append(c["text"])
    items = preserve or []
    for i, item in enumerate(items):
        c = canonicalize_text(item, MAX_PRESERVE_ITEM)
        source_bytes += c["sourceBytes"]
        truncated = truncated or c["truncated"]
        canonicalized = canonicalized or c["text"] != item
        if c["text"]:
            lines.append(f"- {c['text']} [preserve:{i}]")
    return {
        "ok": True,
        "policy": {
            "mode": "typed-v1",
            "canonicalized": canonicalized,
            "sourceBytes": source_bytes,
            "truncated": truncated,
            "preserveCount": len(items),
            "omittedPreserveCount": 0,
        },
        "requestLines": lines,
    }
