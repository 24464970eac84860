"""The few JavaScript value semantics memory records depend on (String(), Boolean(),
JSON.stringify, Date.parse), so that derived text equals the reference's bytes."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

import msgspec

_encoder = msgspec.json.Encoder()


def _js_numbers(value: Any) -> Any:
    """Integral floats print as integers in JS (`1.0` -> `1`)."""
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e21:
            return int(value)
        return value
    if isinstance(value, dict):
        return {k: _js_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_js_numbers(v) for v in value]
    return value


def _has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_float(v) for v in value)
    return False


def js_stringify(value: Any) -> str:
    """`JSON.stringify(value)`: compact, insertion key order, non-ASCII kept raw.

    Session values come from a decoder that already turns integral floats into ints
    (`source.js_float`); other floats print as JS prints them (except exponents >= 1e21)."""
    return _encoder.encode(value).decode("utf-8")


def js_stringify_bytes_len(value: Any) -> int:
    return len(_encoder.encode(value))


def js_number_string(value: float | int) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        if value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        return repr(value)
    return str(value)


def js_string(value: Any) -> str:
    """`String(value)`; a missing value is passed as `None` only when JSON null."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return js_number_string(value)
    if isinstance(value, list):
        return ",".join("" if v is None else js_string(v) for v in value)
    return "[object Object]"


def js_truthy(value: Any) -> bool:
    if value is None or value is False:
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return not (value == 0 or (isinstance(value, float) and math.isnan(value)))
    if isinstance(value, str):
        return value != ""
    return True


def parse_date_ms(value: Any) -> int | None:
    """`Date.parse` for the ISO-8601 forms Pi writes; None when it is not a date."""
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
        dt = dt.replace(tzinfo=timezone.utc)
    try:
        delta = dt - _EPOCH
    except (OverflowError, ValueError):
        return None
    return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def iso_ms(ms: float | int) -> str:
    """`new Date(ms).toISOString()`: always millisecond precision, UTC."""
    dt = datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"
