"""JavaScript string and value semantics (UTF-16 lengths, JSON.stringify, number format,
key order, whitespace) shared by the engines: the compactor reproduces them byte for byte and the
session model uses them for Pi's token estimate. Python strings are code-point sequences while JS
strings are UTF-16 code-unit sequences; JS whitespace, `JSON.stringify`, `String(v)`,
number formatting, object key order and default sort order all differ from Python's.
Every helper here copies the JS behaviour described in the compaction digest §0, with
one deliberate deviation: `truncate` never splits a surrogate pair (see docs/compaction.md).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, TypeGuard, cast

import msgspec

from .native import NATIVE

# JS `\s` (WhiteSpace + LineTerminator), used by /\s+/g, trim(), trimStart().
JS_WS_CHARS = (
    "\t\n\x0b\x0c\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_WS_CLASS = "[" + re.escape(JS_WS_CHARS) + "]"
_WS_RUN = re.compile(_WS_CLASS + "+")
_WS_TRANS = {ord(c): " " for c in JS_WS_CHARS}

ELLIPSIS = "\u2026"
MAX_SAFE_INTEGER = 9007199254740991


# A compact non-ASCII str stores (len + 1) * kind bytes after a fixed header; only kind 4
# (some character above U+FFFF) can make UTF-16 longer than len(). Strings that are not
# compact, or carry a cached UTF-8 copy, only look bigger, so they take the exact path.
_NONASCII_BASE = sys.getsizeof("\u00e9") - 2


def utf16_len_py(s: str) -> int:
    """JS `s.length`: UTF-16 code units (astral characters count 2)."""
    if s.isascii():
        return len(s)
    n = len(s)
    if sys.getsizeof(s) < _NONASCII_BASE + (n + 1) * 4:
        return n
    return len(s.encode("utf-16-le", "surrogatepass")) >> 1


# (the same count in C where the accelerator is built: no UTF-16 copy of an astral text)
utf16_len: Callable[[str], int] = getattr(NATIVE, "utf16_len", utf16_len_py)


def utf16_prefix(s: str, units: int) -> str:
    """The longest prefix of `s` of at most `units` UTF-16 code units that never splits
    a surrogate pair (JS `slice(0, units)` would keep a lone high surrogate; we stop one
    code unit earlier instead — the documented deviation)."""
    if units <= 0:
        return ""
    if s.isascii():
        return s[:units]
    if len(s) <= units and utf16_len(s) <= units:
        return s
    used = 0
    for i, ch in enumerate(s):
        w = 2 if ord(ch) > 0xFFFF else 1
        if used + w > units:
            return s[:i]
        used += w
    return s


def js_trim(s: str) -> str:
    return s.strip(JS_WS_CHARS)


_SURROGATE = re.compile("[\ud800-\udfff]")
_NON_WS = re.compile("[^" + re.escape(JS_WS_CHARS) + "]")


def is_blank(s: str) -> bool:
    return _NON_WS.search(s) is None


_PY_ONLY_WS = re.compile("[\x1c-\x1f]")  # Python whitespace that JS does not treat as such


def collapse(s: str) -> str:
    """Exact JS whitespace collapse (handles the \\x1c-\\x1f difference)."""
    if s.isascii() and _PY_ONLY_WS.search(s) is None:
        return " ".join(s.split())
    return _WS_RUN.sub(" ", s).strip(JS_WS_CHARS)


def split_ws_words(s: str) -> list[str]:
    """`s.trim().split(/\\s+/u).filter(Boolean)`."""
    if s.isascii() and _PY_ONLY_WS.search(s) is None:
        return s.split()
    return [p for p in _WS_RUN.split(s) if p]


def truncate(text: str, max_units: int) -> str:
    """Projection `truncate`: collapse whitespace, trim; over `max_units` UTF-16 units,
    keep `max_units - 1` units plus `…` (never splitting a surrogate pair)."""
    t = collapse(text)
    if len(t) <= max_units and (t.isascii() or utf16_len(t) <= max_units):
        return t
    if utf16_len(t) <= max_units:
        return t
    return utf16_prefix(t, max_units - 1) + ELLIPSIS


def truncate_prefix_safe(text: str, max_units: int, window: int = 1024) -> str:
    """`truncate(text, max_units)` that only collapses a prefix of a long text when that
    prefix already decides the result (collapse(prefix) is a prefix of collapse(text))."""
    if len(text) > window > max_units:
        head = collapse(text[:window])
        if utf16_len(head) > max_units:
            return utf16_prefix(head, max_units - 1) + ELLIPSIS
    return truncate(text, max_units)


def first_line(text: str) -> str:
    """trimStart, then up to the first `\\n` (exclusive); never copies the rest."""
    m = _NON_WS.search(text)
    if m is None:
        return ""
    start = m.start()
    i = text.find("\n", start)
    if start == 0 and i < 0:
        return text
    return text[start:] if i < 0 else text[start:i]


def utf16_sort_key(s: str) -> bytes:
    """Key for JS default string comparison (UTF-16 code unit order)."""
    return s.encode("utf-16-be", "surrogatepass")


def utf16_order_str(s: str) -> str:
    """A str whose code point order is JS's order of `s` (UTF-16 code units), comparable
    with any other result of this function: `s` itself when it has no character beyond
    U+FFFF, else `s` with each such character written as its two surrogate code points
    (which sort below U+E000–U+FFFF, as its UTF-16 units do)."""
    if s.isascii() or max(s, default="\0") <= "\uffff":
        return s
    out: list[str] = []
    for ch in s:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            out.append(chr(0xD800 + (cp >> 10)) + chr(0xDC00 + (cp & 0x3FF)))
        else:
            out.append(ch)
    return "".join(out)


def has_unpaired_surrogate(s: str) -> bool:
    """True when `s`, read as JS UTF-16 code units, holds a surrogate that is not half of
    a high+low pair. Strings decoded from JSON carry a pair as one code point; a str built
    from raw surrogates can still hold an adjacent high+low pair, which UTF-16 (and so
    JS) reads as one character, so such a pair is not unpaired. The one rule of both
    engines and the intents layer."""
    if s.isascii() or _SURROGATE.search(s) is None:
        return False
    i = 0
    n = len(s)
    while i < n:
        o = ord(s[i])
        if 0xD800 <= o <= 0xDBFF:
            if i + 1 < n and 0xDC00 <= ord(s[i + 1]) <= 0xDFFF:
                i += 2
                continue
            return True
        if 0xDC00 <= o <= 0xDFFF:
            return True
        i += 1
    return False


def join_surrogate_pairs(s: str) -> str:
    """`s` with each adjacent raw high+low surrogate pair joined into its character, as a
    JS string of the same code units reads it; lone surrogates stay as they are."""
    return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


# --------------------------------------------------------------------------- numbers


def js_number(x: Any) -> str:
    """JS Number#toString for finite numbers (JSON.stringify gives "null" otherwise)."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        if -MAX_SAFE_INTEGER <= x <= MAX_SAFE_INTEGER:
            return str(x)
        try:
            x = float(x)
        except OverflowError:
            return "Infinity" if x > 0 else "-Infinity"
    if not math.isfinite(x):
        if x != x:
            return "NaN"
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) <= MAX_SAFE_INTEGER:
        return str(int(x))  # exact; larger integers print their shortest digits padded, below
    sign = "-" if x < 0 else ""
    d = Decimal(repr(abs(x)))
    _, digits_t, exp = d.as_tuple()
    assert isinstance(exp, int)  # x is finite here: only NaN and Infinity have a letter exponent
    digits = "".join(map(str, digits_t)).rstrip("0") or "0"
    # value = 0.digits * 10^n  -> n = exp + len(all digits)
    n = exp + len(digits_t)
    k = len(digits)
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        es = ("+" if e >= 0 else "-") + str(abs(e))
        out = digits + "e" + es if k == 1 else digits[0] + "." + digits[1:] + "e" + es
    return sign + out


def is_finite_number(x: Any) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, int):
        return True
    return isinstance(x, float) and math.isfinite(x)


def is_safe_int(x: Any) -> TypeGuard[float]:
    """A JavaScript safe integer: an int, or an integral float, within ±(2^53 - 1); never a bool."""
    if isinstance(x, bool):
        return False
    if isinstance(x, int):
        return -MAX_SAFE_INTEGER <= x <= MAX_SAFE_INTEGER
    return isinstance(x, float) and math.isfinite(x) and x.is_integer() and abs(x) <= MAX_SAFE_INTEGER


# ------------------------------------------------------------------ JSON value guards
# Decoded JSON reaches the engines as `Any`; these checks narrow it for the type checker
# (a bare `isinstance(v, dict)` leaves the key and value types unknown).


def is_json_object(v: object) -> TypeGuard[dict[str, Any]]:
    """`v` is a dict: a decoded JSON object (string keys, any JSON values)."""
    return isinstance(v, dict)


def is_json_array(v: object) -> TypeGuard[list[Any]]:
    """`v` is a list: a decoded JSON array (any JSON values)."""
    return isinstance(v, list)


def is_str_list(v: object) -> TypeGuard[list[str]]:
    """`v` is a list of strings only."""
    return isinstance(v, list) and all(isinstance(x, str) for x in cast("list[object]", v))


# ------------------------------------------------------------------------ object keys


def _is_array_index(k: str) -> bool:
    if not k or not k.isdigit() or not k.isascii():
        return False
    if len(k) > 1 and k[0] == "0":
        return False
    return int(k) < 4294967295


def js_keys(obj: Mapping[Any, Any]) -> list[str]:
    """`Object.keys(obj)`: integer-like keys first (ascending), then insertion order.
    (A JSON object's keys are strings; `_emit` also copes with other keys via `str(k)`.)"""
    keys: list[Any] = list(obj.keys())
    idx = [k for k in keys if isinstance(k, str) and k[:1].isdigit() and _is_array_index(k)]
    if not idx:
        return keys
    idx_set = set(idx)
    idx.sort(key=int)
    return idx + [k for k in keys if k not in idx_set]


# --------------------------------------------------------------------- JSON.stringify

_ESC = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
_NEEDS_ESC = re.compile('["\\\\\x00-\x1f\ud800-\udfff]')


def _esc_char(m: re.Match[str]) -> str:
    c = m.group(0)
    e = _ESC.get(c)
    if e is not None:
        return e
    return f"\\u{ord(c):04x}"


def _quote_nonascii(s: str) -> str:
    # A surrogate code point left after joining raw pairs is a lone surrogate, which
    # well-formed JSON.stringify writes as a lowercase `\udxxx` escape.
    if _SURROGATE.search(s) is not None:
        s = join_surrogate_pairs(s)
    return '"' + _NEEDS_ESC.sub(_esc_char, s) + '"'


def js_quote(s: str) -> str:
    """`JSON.stringify(s)` for a string."""
    if _NEEDS_ESC.search(s) is None:
        return '"' + s + '"'
    return _quote_nonascii(s)


# msgspec writes the same bytes as JSON.stringify for strings without lone surrogates
# (same short escapes, lowercase \u00xx, raw non-ASCII and U+2028/2029), for integers,
# booleans, null, NaN/Infinity (null) and for insertion-ordered keys. It differs on
# non-integral or large numbers (`1e21`, `-0.0`, `1e-07`, 2**60) and on integer-like keys
# (JS lists them first, ascending). An output token that could be one of those sends
# the value down the exact path; a string that merely looks like one costs only time.
_ENCODER = msgspec.json.Encoder()
_FAST_RISK = re.compile(rb'[:\[,]-?[0-9]+[.eE]|[:\[,]-?[0-9]{16}|[{,]"[0-9]+":')


# A long output of a value with few containers (tool arguments holding a file's text) is
# checked on the value instead of by scanning every byte of the output: see
# `_structure_risk`.
_STRUCTURE_CHECK_MIN_BYTES = 256
_STRUCTURE_CHECK_NODES = 64
_DIGIT_STARTS = frozenset("0123456789")
_BIG_INT = 10**15  # 16 digits and more: the output pattern's large integers


def _structure_risk(value: Any) -> bool | None:
    """Whether `value` holds anything msgspec may write differently from JSON.stringify
    (a float, an integer of 16 digits or more, an object key starting with a digit), read
    from the value itself: what `_FAST_RISK` finds in the output, without the false alarms
    of strings that merely look like numbers. None when it holds more than
    `_STRUCTURE_CHECK_NODES` containers and numbers, or something else (undecided)."""
    stack = [value]
    budget = _STRUCTURE_CHECK_NODES
    while stack:
        v = stack.pop()
        cls = v.__class__
        if cls is str or cls is bool or v is None:
            continue
        budget -= 1
        if budget < 0:
            return None
        if cls is dict:
            for k in v:
                if k.__class__ is not str:
                    return None
                if k[:1] in _DIGIT_STARTS:
                    return True
            stack.extend(v.values())
        elif cls is list:
            stack.extend(v)
        elif cls is int:
            if not -_BIG_INT < v < _BIG_INT:
                return True
        elif cls is float:
            return True
        else:
            return None
    return False


def _fast_stringify(value: Any) -> bytes | None:
    if value.__class__ is float:
        return None
    try:
        out = _ENCODER.encode(value)
    except (TypeError, ValueError, OverflowError, RecursionError):
        return None  # lone surrogates (UnicodeEncodeError), non-JSON values, depth
    if len(out) >= _STRUCTURE_CHECK_MIN_BYTES:
        risk = _structure_risk(value)
        if risk is not None:
            return None if risk else out
    if _FAST_RISK.search(out) is not None:
        return None
    if out[:1].isdigit() or out[:1] == b"-":  # a bare integer: no delimiter before it
        if len(out.lstrip(b"-")) >= 16:
            return None
    return out


def js_stringify(value: Any) -> str:
    """`JSON.stringify(value)`: compact, non-ASCII raw, JS number format (`1e+21`,
    `-0` -> `0`), JS key order (integer-like keys first ascending, then insertion order),
    lone surrogates escaped. The one JSON.stringify of both engines."""
    fast = _fast_stringify(value)
    if fast is not None:
        return fast.decode("utf-8")
    return js_stringify_exact(value)


def js_stringify_exact(value: Any) -> str:
    """`js_stringify` without the msgspec fast path (what the fast path is tested against)."""
    parts: list[str] = []
    _emit(value, parts)
    return "".join(parts)


def js_stringify_utf8_len(value: Any) -> int:
    """UTF-8 byte length of `JSON.stringify(value)` (the trace and envelope size limits)."""
    fast = _fast_stringify(value)
    if fast is not None:
        return len(fast)
    return len(js_stringify_exact(value).encode("utf-8"))


def _emit(v: Any, out: list[str]) -> None:
    if isinstance(v, str):
        out.append(js_quote(v))
    elif v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, (int, float)):
        out.append(js_number(v) if is_finite_number(v) else "null")
    elif isinstance(v, dict):
        obj = cast("dict[Any, Any]", v)
        out.append("{")
        first = True
        for k in js_keys(obj):
            if not first:
                out.append(",")
            first = False
            out.append(js_quote(str(k)))
            out.append(":")
            _emit(obj[k], out)
        out.append("}")
    elif isinstance(v, (list, tuple)):
        out.append("[")
        for i, item in enumerate(cast("list[Any] | tuple[Any, ...]", v)):
            if i:
                out.append(",")
            _emit(item, out)
        out.append("]")
    else:
        out.append("null")


def js_string_of(v: Any) -> str:
    """`String(v)` for JSON values."""
    if isinstance(v, str):
        return v
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (int, float)):
        return js_number(v)
    if isinstance(v, list):
        return ",".join("" if x is None else js_string_of(x) for x in cast("list[Any]", v))
    return "[object Object]"


def js_entries(v: Any) -> list[tuple[str, Any]]:
    """`Object.entries(v)` for JSON values (strings enumerate characters)."""
    if isinstance(v, dict):
        obj = cast("dict[str, Any]", v)
        return [(k, obj[k]) for k in js_keys(obj)]
    if isinstance(v, list):
        return [(str(i), x) for i, x in enumerate(cast("list[Any]", v))]
    if isinstance(v, str):
        return [(str(i), c) for i, c in enumerate(v)]
    return []


def js_truthy(value: Any) -> bool:
    """`Boolean(value)` for JSON values."""
    if value is None or value is False:
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return not (value == 0 or (isinstance(value, float) and math.isnan(value)))
    if isinstance(value, str):
        return value != ""
    return True


# ------------------------------------------------------------------------------ dates

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# `parse_date_ms` of JavaScript's toISOString form in C (None: another form, or no
# accelerator / one built from an older source)
_iso_ms: Callable[[Any], int | None] | None = getattr(NATIVE, "iso_ms", None)


def parse_date_ms(value: Any) -> int | None:
    """`Date.parse` for the ISO-8601 forms Pi writes; None when it is not a date."""
    if _iso_ms is not None:
        ms = _iso_ms(value)
        if ms is not None:
            return ms
    return parse_date_ms_py(value)


def parse_date_ms_py(value: Any) -> int | None:
    """`parse_date_ms` in Python (every form; the oracle of the accelerator's `iso_ms`)."""
    if not isinstance(value, str):
        return None
    try:
        dt = datetime.fromisoformat(value)  # 3.11 accepts "Z"
    except ValueError:
        s = value.strip()
        if not s or s == value:
            return None
        try:
            dt = datetime.fromisoformat(s)
        except ValueError:
            return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    try:
        delta = dt - _EPOCH
    except (OverflowError, ValueError):
        return None
    return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000


_JS_DATE_LIMIT_MS = 8.64e15  # |time value| of a valid JS Date (ECMA-262 TimeClip)


def iso_ms_or_none(ms: object) -> str | None:
    """`new Date(ms).toISOString()` for a number; None where JavaScript throws ("Invalid
    time value": not finite, or beyond ±8.64e15 ms) or `ms` is not a number. Exact over the
    whole range: the time is truncated toward zero (TimeClip), years past 9999 and before 0
    are written with a sign and six digits, as JS writes them."""
    if isinstance(ms, bool) or not isinstance(ms, (int, float)):
        return None
    if not math.isfinite(ms) or abs(ms) > _JS_DATE_LIMIT_MS:
        return None
    t = int(ms)  # toward zero
    day, rest = divmod(t, 86_400_000)
    # the civil date of a day number (days since 1970-01-01), proleptic Gregorian
    z = day + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    y = yoe + era * 400 + (1 if m <= 2 else 0)
    year = f"{y:04d}" if 0 <= y <= 9999 else f"{'+' if y > 0 else '-'}{abs(y):06d}"
    hh, rest = divmod(rest, 3_600_000)
    mm, rest = divmod(rest, 60_000)
    ss, milli = divmod(rest, 1000)
    return f"{year}-{m:02d}-{d:02d}T{hh:02d}:{mm:02d}:{ss:02d}.{milli:03d}Z"


def iso_ms(ms: float | int) -> str:
    """`new Date(ms).toISOString()`: always millisecond precision, UTC. Raises ValueError
    where JavaScript throws RangeError (`iso_ms_or_none`)."""
    out = iso_ms_or_none(ms)
    if out is None:
        raise ValueError(f"Invalid time value: {ms!r}")
    return out
