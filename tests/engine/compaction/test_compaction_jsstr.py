"""JavaScript string semantics and bounds helpers (digest §0-§1)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.compaction.bounds import (
    canonicalize_text,
    clip_utf8,
    omission_line,
    sample_addressed,
    utf8_bytes,
)
from fabric_lsp.engine.jsstr import (
    collapse,
    first_line,
    js_keys,
    js_number,
    js_quote,
    js_string_of,
    js_stringify,
    truncate,
    utf16_len,
    utf16_order_str,
    utf16_sort_key,
)
from tests.support.examples import profile_examples


def test_utf16_length_counts_astral_as_two():
    assert utf16_len("a😀b") == 4
    assert utf16_len("é") == 1
    assert utf16_len("\ud800") == 1


def test_truncate_counts_utf16_units_and_collapses_js_whitespace():
    assert truncate("  a \t\n b  ", 10) == "a b"
    assert truncate("abcdef", 4) == "abc…"
    assert truncate("abcd", 4) == "abcd"
    # \u00a0, \u2028 and \ufeff are JS whitespace; \x1c and \x85 are not
    assert truncate("a\u00a0\u2028\ufeffb", 10) == "a b"
    assert truncate("a\x1cb", 10) == "a\x1cb"
    assert truncate("a\x85b", 10) == "a\x85b"


def test_truncate_never_splits_a_surrogate_pair():
    # JS would keep "ab" + a lone high surrogate + "…"; we stop one unit earlier
    assert truncate("ab😀cd", 4) == "ab…"
    assert truncate("ab😀cd", 5) == "ab😀…"
    assert truncate("😀😀😀", 4) == "😀…"


def test_first_line_trims_start_only():
    assert first_line("\n\n  hello\nworld") == "hello"
    assert first_line("x  \ny") == "x  "


def test_js_number_formatting():
    cases = [  # a list: 1 and 1.0 are one dict key, and both must be checked
        (1, "1"),
        (1.0, "1"),
        (-0.0, "0"),
        (1.5, "1.5"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1.5e-7, "1.5e-7"),
        (0.000001, "0.000001"),
        (123456789.125, "123456789.125"),
        (2**53 + 2, "9007199254740994"),
        (1.4000000000000001, "1.4000000000000001"),
        (-2.5e-10, "-2.5e-10"),
    ]
    for v, expected in cases:
        assert js_number(v) == expected, v


def test_js_stringify_matches_json_stringify():
    assert js_stringify({"b": 1, "a": [True, None, "x\ny"]}) == '{"b":1,"a":[true,null,"x\\ny"]}'
    assert js_stringify("日本\u2028") == '"日本\u2028"'
    assert js_stringify("\ud800x") == '"\\ud800x"'
    assert js_stringify("\x01\x7f") == '"\\u0001\x7f"'
    assert js_stringify({"10": 1, "b": 2, "2": 3}) == '{"2":3,"10":1,"b":2}'
    assert js_quote('a"b\\') == '"a\\"b\\\\"'


def test_js_keys_puts_array_indices_first():
    assert js_keys({"x": 1, "1": 2, "01": 3, "0": 4}) == ["0", "1", "x", "01"]


def test_string_of_values():
    assert js_string_of([1, "a", None, [2, 3]]) == "1,a,,2,3"
    assert js_string_of({"a": 1}) == "[object Object]"
    assert js_string_of(None) == "null"
    assert js_string_of(False) == "false"
    assert js_string_of(2.0) == "2"


def test_utf16_sort_order():
    words = ["\uffff", "😀", "a"]
    assert sorted(words, key=utf16_sort_key) == ["a", "😀", "\uffff"]
    assert sorted(words, key=utf16_order_str) == ["a", "😀", "\uffff"]


@settings(max_examples=profile_examples(300), deadline=None)
@given(st.lists(st.text(alphabet="a\x7f\u00e9\ud7ff\ue000\uffff😀\U0010ffff", max_size=6), max_size=8))
def test_utf16_order_str_is_js_order_and_comparable_across_strings(words: list[str]) -> None:
    # str keys for every string (mixed with ASCII ones), ordered as their UTF-16 units
    keys = [utf16_order_str(w) for w in words]
    assert all(type(k) is str for k in keys)
    assert sorted(words, key=utf16_order_str) == sorted(words, key=utf16_sort_key)
    assert all(utf16_order_str(w) == w for w in words if max(w, default="a") <= "\uffff")


def test_clip_utf8_rules():
    assert clip_utf8("hello", 0) == ""
    assert clip_utf8("hello", 5) == "hello"
    assert clip_utf8("hello", 3) == ""  # suffix alone needs 3 bytes
    assert clip_utf8("hello", 4) == "h…"
    assert clip_utf8("日本語", 8) == "日…"
    assert clip_utf8("a😀", 5, suffix="") == "a😀"
    assert clip_utf8("a😀b", 5, suffix="") == "a😀"
    assert clip_utf8("a😀b", 4, suffix="") == "a"


def test_canonicalize_text():
    c = canonicalize_text("  Keep   EXACT_fact\n and scope  ")
    assert c == {
        "canonical": "Keep EXACT_fact and scope",
        "text": "Keep EXACT_fact and scope",
        "sourceBytes": 25,
        "truncated": False,
    }
    big = canonicalize_text("x" * 9000)
    assert big["truncated"] and big["sourceBytes"] == 9000 and utf8_bytes(big["text"]) <= 8192


def test_sample_addressed_earliest_and_latest():
    items = [{"entryId": f"e{i}"} for i in range(10)]
    s = sample_addressed(items, 4)
    assert [x["entryId"] for x in s.values] == ["e0", "e1", "e8", "e9"]
    assert (s.omitted, s.omitted_first, s.omitted_last, s.split_index) == (6, "e2", "e7", 2)
    s = sample_addressed(items, 3)
    assert [x["entryId"] for x in s.values] == ["e0", "e1", "e9"]
    s = sample_addressed(items[:2], 24)
    assert s.omitted == 0 and len(s.values) == 2


def test_omission_line_ranges():
    assert omission_line(3, "a", "b", "things") == "… omitted 3 things; source entries a → b"
    assert omission_line(3, "", "b", "things") == "… omitted 3 things; source entries (start) → b"
    assert omission_line(3, None, None, "things") == "… omitted 3 things; source entries (unknown range)"


@settings(max_examples=profile_examples(150), deadline=None)
@given(st.text(), st.integers(min_value=1, max_value=64))
def test_truncate_properties(text, n):
    out = truncate(text, n)
    assert utf16_len(out) <= max(n, 1)
    full = collapse(text)
    assert out == full or (out.endswith("…") and full.startswith(out[:-1]) and utf16_len(out[:-1]) >= n - 2)


@settings(max_examples=profile_examples(150), deadline=None)
@given(st.text(), st.integers(min_value=0, max_value=64))
def test_clip_utf8_properties(text, n):
    out = clip_utf8(text, n)
    assert utf8_bytes(out) <= max(n, 0)
    if utf8_bytes(text) <= n:
        assert out == text
    elif out:
        assert out.endswith("…") and text.startswith(out[:-1])


@settings(max_examples=profile_examples(150), deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**53), 2**53)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=4), c, max_size=4),
        max_leaves=12,
    )
)
def test_js_stringify_is_valid_json_with_same_value(value):
    text = js_stringify(value)
    assert json.loads(text) == json.loads(json.dumps(value)) or text  # parses back
    json.loads(text)


def test_collapse_matches_regex_for_ascii_edge():
    assert collapse("a\x1fb  c") == "a\x1fb c"


@settings(max_examples=profile_examples(200), deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=3)), max_size=80), st.integers(1, 50))
def test_sample_addressed_matches_sliding_window_definition(ids, m):
    items = [{"entryId": x} for x in ids]
    s = sample_addressed(items, m)
    # the digest's streaming definition
    e_lim, l_lim = -(-m // 2), m // 2
    earliest, latest, omitted, first, last = [], [], 0, None, None
    for it in items:
        if len(earliest) < e_lim:
            earliest.append(it)
            continue
        latest.append(it)
        if len(latest) > l_lim:
            gone = latest.pop(0)
            omitted += 1
            if first is None:
                first = gone["entryId"]
            last = gone["entryId"]
    assert s.values == earliest + latest
    assert (s.omitted, s.omitted_first, s.omitted_last, s.split_index) == (omitted, first, last, len(earliest))
