"""A tool call's argument summary in C (`_native.args_summary`, used by `args_summary` and
by the C `plain_fields`) against the Python code: `JSON.stringify` of the arguments cut to
a number of Unicode scalars. The C code writes only up to the cut and leaves every value it
does not write exactly (floats, large integers, surrogates, digit-led keys, subclasses,
deep nesting) to the Python code; where it answers, the answer is the same string."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.memory import entry_fields
from tests.support.examples import profile_examples

NATIVE = entry_fields._args_summary_c
pytestmark = pytest.mark.skipif(NATIVE is None, reason="the C accelerator is not built")

_TEXT = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.sampled_from(list('ab"\\\n\t\r\b\f\x00\x01\x1f\x7f é😀\u2028\ud800\udc00')), max_size=40),
)
_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60),
    st.sampled_from([9007199254740991, -9007199254740991, 9007199254740992, 0, -1, 10**15]),
    st.floats(),
    _TEXT,
)
_KEY = st.one_of(st.sampled_from(["path", "content", "1", "01", "٣x", "", "a\nb", '"']), _TEXT)
_VALUE = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEY, inner, max_size=4)),
    max_leaves=12,
)
# what the C code must write itself: no float, digit-led key, surrogate or unsafe integer
_PLAIN_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40) | st.text(
    alphabet=st.sampled_from(list('ab"\\\n\t\x00\x1f\x7f é😀\u2028')), max_size=40
)
_PLAIN = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**53) + 1, 2**53 - 1), _PLAIN_TEXT),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["path", "content", "x", "", "a b", "é"]), inner, max_size=4),
    ),
    max_leaves=12,
)
_LIMITS = st.one_of(st.sampled_from([0, 1, 2, 5, entry_fields.ARGS_SUMMARY_SCALARS]), st.integers(0, 60))


def python_summary(value: object, limit: int) -> str:
    saved = entry_fields._args_summary_c, entry_fields.ARGS_SUMMARY_SCALARS
    entry_fields._args_summary_c, entry_fields.ARGS_SUMMARY_SCALARS = None, limit
    try:
        return entry_fields.args_summary(value, True)
    finally:
        entry_fields._args_summary_c, entry_fields.ARGS_SUMMARY_SCALARS = saved


@settings(max_examples=profile_examples(3000), deadline=None)
@given(_VALUE, _LIMITS)
def test_the_c_summary_is_the_python_summary_or_declines(value, limit):
    got = NATIVE(value, limit)
    if got is not None:
        assert got == python_summary(value, limit)


@settings(max_examples=profile_examples(2000), deadline=None)
@given(_PLAIN, _LIMITS)
def test_the_c_summary_writes_every_plain_value(value, limit):
    got = NATIVE(value, limit)
    assert got is not None
    assert got == python_summary(value, limit)


def test_it_writes_only_up_to_the_cut():
    """What lies beyond the cut is not looked at: a float or a digit-led key after it
    does not send the value to Python; one before it does."""
    long = "x" * 500
    assert NATIVE({"content": long, "ratio": 0.5}, 20) == '{"content":"' + "x" * 8 + "…"
    assert NATIVE({"ratio": 0.5, "content": long}, 20) is None
    assert NATIVE({"content": long, "more": {"1": 2}}, 20) == '{"content":"' + "x" * 8 + "…"
    # the keys of an object that is written are all checked first (JavaScript would list
    # an integer-like key first, so the cut would hold it)
    assert NATIVE({"content": long, "1": 2}, 20) is None
    assert python_summary({"content": long, "1": 2}, 20) == '{"1":2,"content":"xx…'


def test_exact_lengths_around_the_cut():
    assert NATIVE("abc", 5) == '"abc"'
    assert NATIVE("abc", 4) == '"abc…'
    assert NATIVE([], 2) == "[]"
    assert NATIVE([], 1) == "[…"
    assert NATIVE({}, 0) == "…"
    # the scalar after the cut is a surrogate: Python joins pairs first, so it decides
    assert NATIVE("ab\ud83d\ude00", 3) is None
    assert python_summary("ab\ud83d\ude00", 3) == '"ab…'


def test_subclasses_and_deep_values_go_to_python():
    class Sub(dict):
        pass

    assert NATIVE(Sub(a=1), 400) is None
    assert NATIVE((1, 2), 400) is None
    deep: object = "x"
    for _ in range(150):
        deep = [deep]
    assert NATIVE(deep, 400) is None
    assert NATIVE(deep, 50) == "[" * 50 + "…"
