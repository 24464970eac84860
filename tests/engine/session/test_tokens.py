from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.session import (
    calculate_context_tokens,
    estimate_context_tokens,
    estimate_tokens,
    js_number,
    js_stringify,
    utf16_len,
)
from tests.support.examples import profile_examples


def test_utf16_length_counts_astral_characters_twice() -> None:
    assert utf16_len("abc") == 3
    assert utf16_len("é") == 1
    assert utf16_len("😀") == 2
    assert utf16_len("日本語😀x") == 6
    assert utf16_len("\ud800") == 1


def test_estimate_per_role() -> None:
    assert estimate_tokens({"role": "user", "content": "abcde"}) == 2
    assert (
        estimate_tokens(
            {
                "role": "user",
                "content": [{"type": "text", "text": "abcd"}, {"type": "image", "data": "", "mimeType": "image/png"}],
            }
        )
        == 1201
    )
    call = {"type": "toolCall", "id": "c", "name": "read", "arguments": {"path": "é😀"}}
    # "read" (4) + '{"path":"é😀"}' (14 UTF-16 units)
    assert (
        estimate_tokens(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "ab"}, {"type": "thinking", "thinking": "cd"}, call],
            }
        )
        == 6
    )
    assert (
        estimate_tokens({"role": "bashExecution", "command": "ls", "output": "a\nb", "excludeFromContext": True}) == 2
    )
    assert estimate_tokens({"role": "compactionSummary", "summary": "x" * 9}) == 3
    assert estimate_tokens({"role": "toolResult", "content": None}) == 0
    assert estimate_tokens({"role": "somethingElse", "content": "xxxx"}) == 0


def test_context_estimate_anchors_on_last_valid_usage() -> None:
    msgs = [
        {"role": "user", "content": "x" * 40},
        {"role": "assistant", "content": [], "stopReason": "stop", "usage": {"totalTokens": 100}},
        {"role": "assistant", "content": [], "stopReason": "error", "usage": {"totalTokens": 999}},
        {"role": "user", "content": "y" * 8},
    ]
    assert estimate_context_tokens(msgs) == 100 + 0 + 2
    assert estimate_context_tokens(msgs[:1]) == 10
    assert calculate_context_tokens({"totalTokens": 0, "input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4}) == 10
    # an assistant without usage is no checkpoint
    assert (
        estimate_context_tokens(
            [{"role": "assistant", "content": [{"type": "text", "text": "abcd"}], "stopReason": "stop"}]
        )
        == 1
    )


def test_js_number_formats() -> None:
    cases = {
        1.0: "1",
        0.5: "0.5",
        1e21: "1e+21",
        1e-7: "1e-7",
        1.5e-6: "0.0000015",
        123456789012345680000.0: "123456789012345680000",
        2.0**60: "1152921504606847000",
        -2.25: "-2.25",
        10**21: "1e+21",
    }
    for value, text in cases.items():
        assert js_number(value) == text


def test_js_stringify_puts_integer_like_keys_first_as_javascript_does() -> None:
    assert js_stringify({"b": 1, "10": 2, "2": 3, "01": 4}) == '{"2":3,"10":2,"b":1,"01":4}'
    # and the estimate counts what JavaScript would serialize
    call = {"type": "toolCall", "id": "c", "name": "x", "arguments": {"b": 1, "1": 2}}
    assert estimate_tokens({"role": "assistant", "content": [call]}) == -(-(1 + len('{"1":2,"b":1}')) // 4)


def test_js_stringify_matches_json_stringify_shape() -> None:
    assert js_stringify({"a": [1, 2.0, None, True], "b": "é\n\u0001"}) == '{"a":[1,2,null,true],"b":"é\\n\\u0001"}'
    assert js_stringify("\ud83d") == '"\\ud83d"'
    assert js_stringify("😀") == '"😀"'


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=5).filter(lambda k: not k[:1].isdigit()), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=profile_examples(200), deadline=None)
@given(json_values)
def test_stringify_round_trips_and_agrees_with_compact_json(value) -> None:
    text = js_stringify(value)
    assert json.loads(text) == value
    assert text == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
