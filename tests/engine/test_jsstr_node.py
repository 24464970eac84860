"""The one JavaScript-semantics module against real JavaScript: `js_stringify` (and its
msgspec fast path), `js_number`, `utf16_len` and `has_unpaired_surrogate` must give what
node gives for generated values with integer-like keys, `1e21`, `-0`, huge integers,
lone surrogates and raw surrogate pairs."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.jsstr import (
    has_unpaired_surrogate,
    iso_ms_or_none,
    join_surrogate_pairs,
    js_keys,
    js_number,
    js_string_of,
    js_stringify,
    js_stringify_exact,
    js_stringify_utf8_len,
    parse_date_ms,
    utf16_len,
)
from tests.support.examples import profile_examples

ROOT = Path(__file__).resolve().parents[2]
_BUNDLED = ROOT / ".tools" / "node22" / "node_modules" / ".bin" / "node"
NODE = str(_BUNDLED) if _BUNDLED.exists() else shutil.which("node")

# One node process answers one JSON line per request: the value arrives as ASCII JSON
# (so lone surrogates and -0 survive the trip) and goes back as what JavaScript computes.
_SCRIPT = r"""
const rl = require("readline").createInterface({ input: process.stdin });
rl.on("line", (line) => {
  const { op, v } = JSON.parse(line);
  let out;
  if (op === "stringify") out = JSON.stringify(v);
  else if (op === "number") out = String(v);
  else if (op === "string") out = String(v);
  else if (op === "keys") out = Object.keys(v);
  else if (op === "length") out = v.length;
  else if (op === "wellFormed") out = v.isWellFormed();
  else if (op === "utf8") out = Buffer.byteLength(JSON.stringify(v), "utf8");
  else if (op === "date") { const t = Date.parse(v); out = Number.isNaN(t) ? null : t; }
  else if (op === "iso") { try { out = new Date(v).toISOString(); } catch (e) { out = null; } }
  process.stdout.write(JSON.stringify({ out }) + "\n");
});
"""


class _Node:
    def __init__(self) -> None:
        assert NODE is not None
        self.proc = subprocess.Popen(
            [NODE, "-e", _SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8"
        )

    def __call__(self, op: str, value):
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"op": op, "v": value}, ensure_ascii=True, allow_nan=False) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())["out"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def node():
    if NODE is None:
        pytest.fail("node is not installed: scripts/deps/realpi.sh installs it (scripts/test runs it)")
    n = _Node()
    yield n
    n.close()


_SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
_PAIR = st.tuples(
    st.characters(min_codepoint=0xD800, max_codepoint=0xDBFF), st.characters(min_codepoint=0xDC00, max_codepoint=0xDFFF)
).map("".join)
_ANY_CHAR = st.characters(codec=None, exclude_categories=())
_TEXT = st.lists(
    st.one_of(_ANY_CHAR, _SURROGATES, _PAIR, st.sampled_from(['"', "\\", "\n", "\x00", "\u2028", "é", "😀"])),
    max_size=12,
).map("".join)
_INT_LIKE_KEY = st.one_of(
    st.integers(min_value=0, max_value=2**32).map(str),  # 4294967295 and up are not array indices
    st.sampled_from(["0", "01", "-1", "1.5", "4294967294", "4294967295", "1e3", " 1", "٣"]),
)
_KEY = st.one_of(_INT_LIKE_KEY, _TEXT)
_NUMBER = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(
        [
            1e21,
            1e20,
            123456789012345680000.0,
            -0.0,
            0.0,
            1e-7,
            1e-6,
            5e-324,
            1.7976931348623157e308,
            2**53,
            2**53 + 1,
            -(2**53) - 1,
            9007199254740993,
            1.5,
            100.0,
            0.1 + 0.2,
        ]
    ),
)
_SCALAR = st.one_of(st.none(), st.booleans(), _NUMBER, _TEXT)
_VALUE = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(_KEY, inner, max_size=6)),
    max_leaves=25,
)

_SETTINGS = settings(max_examples=profile_examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(_VALUE)
def test_js_stringify_matches_node(node, value):
    expected = node("stringify", value)
    assert js_stringify(value) == expected
    assert js_stringify_exact(value) == expected
    assert js_stringify_utf8_len(value) == len(expected.encode("utf-8")) == node("utf8", value)


@_SETTINGS
@given(st.dictionaries(_KEY, st.integers(0, 9), max_size=8))
def test_integer_like_keys_come_first_ascending(node, obj):
    # (node answers with raw pairs joined, as any JS string of the same code units)
    assert [join_surrogate_pairs(k) for k in js_keys(obj)] == node("keys", obj)


@_SETTINGS
@given(_NUMBER)
def test_number_formatting_matches_node(node, x):
    assert js_number(x) == node("number", x)
    assert js_string_of(x) == node("string", x)


@_SETTINGS
@given(_TEXT)
def test_utf16_measures_and_pairing_match_node(node, s):
    assert utf16_len(s) == node("length", s)
    assert has_unpaired_surrogate(s) == (not node("wellFormed", s))


def test_known_javascript_cases():
    assert js_stringify({"b": 1, "10": 2, "2": 3, "01": 4, "a": -0.0}) == '{"2":3,"10":2,"b":1,"01":4,"a":0}'
    assert js_stringify([1e21, 1e20, -0.0, 1e-7, 2**60, 5.0]) == (
        "[1e+21,100000000000000000000,0,1e-7,1152921504606847000,5]"
    )
    assert js_stringify("\ud800x\ud83d\ude00") == '"\\ud800x😀"'  # lone escaped, raw pair joined
    assert js_stringify_utf8_len("\ud83d\ude00") == len('"😀"'.encode())
    assert has_unpaired_surrogate("\ud83d\ude00") is False  # a raw pair is paired in UTF-16
    assert has_unpaired_surrogate("\ude00\ud83d") is True


_LONG_TEXT = st.text(min_size=260, max_size=600).filter(lambda t: not any(0xD800 <= ord(c) <= 0xDFFF for c in t))


@_SETTINGS
@given(_VALUE, _LONG_TEXT, st.sampled_from(["pad", "1", "0pad", "content"]))
def test_long_outputs_checked_on_the_value_match_node(node, value, long_text, key):
    """Outputs of 256 bytes and more are checked on the value (jsstr._structure_risk), not
    by scanning the output: a long text beside any value, under an ordinary or an
    integer-like key, still stringifies exactly as JavaScript does."""
    for wrapped in ({key: long_text, "v": value}, [value, long_text], {"v": [long_text, {key: value}]}):
        expected = node("stringify", wrapped)
        assert js_stringify(wrapped) == expected
        assert js_stringify_utf8_len(wrapped) == len(expected.encode("utf-8"))


def test_the_value_check_decides_like_the_output_scan_would_on_true_risks():
    from fabric_lsp.engine.jsstr import _structure_risk

    pad = "x" * 300
    assert _structure_risk({"path": "a.py", "content": pad}) is False
    assert _structure_risk({"content": '1.5e3, 10000000000000000 and {"7": 1}' + pad}) is False  # only strings
    assert _structure_risk({"n": 0.5, "c": pad}) is True
    assert _structure_risk({"n": 10**15, "c": pad}) is True and _structure_risk({"n": -(10**15) + 1}) is False
    assert _structure_risk({"7": 1}) is True and _structure_risk({"": 1, "a7": 2}) is False
    assert _structure_risk([list(range(100))]) is None  # more containers and numbers than the budget
    assert _structure_risk((1, 2)) is None  # not a JSON value of a decoder: the output scan decides


# Pi's timestamps, "YYYY-MM-DDTHH:MM:SS.mmmZ", for any real date and time.
_PI_DATE = st.datetimes().map(
    lambda d: (
        f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:{d.second:02d}.{d.microsecond // 1000:03d}Z"
    )
)


@_SETTINGS
@given(_PI_DATE)
def test_pi_dates_parse_as_node_parses_them(node, date):
    assert parse_date_ms(date) == node("date", date)


# time values around JavaScript Date's edges: ±8.64e15 ms, years 0 and 9999/10000, leap
# days, fractions (truncated toward zero) and beyond the range (RangeError: None here)
_TIME = st.one_of(
    st.integers(-8_640_000_000_000_100, 8_640_000_000_000_100),
    st.floats(-1e16, 1e16, allow_nan=False),
    st.integers(-62_198_755_200_100, -62_167_219_100_000),
    st.integers(253_402_300_700_000, 253_402_300_900_000),
    st.sampled_from([0, -1, 1, 8.64e15, -8.64e15, 8.64e15 + 1, 9.2e21, 951_782_400_000, -0.4, -1.5, 1.9]),
)


@settings(
    max_examples=profile_examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(_TIME)
def test_iso_time_matches_node(node, value):
    """`new Date(v).toISOString()` (None where JS throws): the cold pointer's time, the CLI's."""
    assert iso_ms_or_none(value) == node("iso", value)


def test_iso_time_of_what_is_not_a_number_is_none():
    for value in (None, True, "2026-01-01", float("inf"), float("nan"), [1]):
        assert iso_ms_or_none(value) is None
