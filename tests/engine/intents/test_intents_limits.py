"""compact.request validation: exact limits and messages (seed 001, provider F9–F11)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.intents.limits import (
    MSG_ENCODED_TOO_LARGE,
    TYPED_REQUEST_PREFIX,
    check_bounds,
    encode_typed_request,
    has_unpaired_surrogate,
    utf16_units,
    validate_request_arguments,
)
from tests.support.examples import profile_examples

P = "Invalid compact.request arguments: "


def err(params):
    with pytest.raises(ValueError) as info:
        validate_request_arguments(params)
    return str(info.value)


def test_accepts_and_returns_only_request_arguments():
    args = validate_request_arguments(
        {
            "session": "/x.jsonl",
            "workDoneToken": 1,
            "reason": "r",
            "instructions": "i",
            "preserve": ["a"],
            "requestedBy": "skill",
        }
    )
    assert args == {"reason": "r", "instructions": "i", "preserve": ["a"], "requestedBy": "skill"}
    assert validate_request_arguments({"instructions": None}) == {}


def test_exact_limits_pass():
    validate_request_arguments({"instructions": "x" * 8192, "preserve": ["y" * 2048] * 3})
    validate_request_arguments({"reason": "r" * 1024, "requestedBy": "b" * 256})


@pytest.mark.parametrize(
    "params, message",
    [
        ({"preserve": [1]}, P + "/preserve/0: expected string"),
        ({"bogus": 1}, P + "/bogus: unknown property"),
        ({"instructions": "x" * 8193}, P + "/instructions: expected string length <= 8192"),
        ({"preserve": ["a"] * 17}, P + "/preserve: expected array length <= 16"),
        ({"preserve": ["x" * 2049]}, P + "/preserve/0: expected string length <= 2048"),
        ({"reason": 5}, P + "/reason: expected string"),
        ({"reason": "r" * 1025}, P + "/reason: expected string length <= 1024"),
        ({"requestedBy": "b" * 257}, P + "/requestedBy: expected string length <= 256"),
        ({"preserve": "x"}, P + "/preserve: expected array"),
        ({"instructions": "界" * 3000}, P + "typed compaction instructions exceed 8192 characters or 8192 UTF-8 bytes"),
        ({"instructions": "ok\ud800"}, P + "typed compaction instructions contain an unpaired UTF-16 surrogate"),
        ({"preserve": ["\udc00"]}, P + "typed compaction preserve item contains an unpaired UTF-16 surrogate"),
        ({"preserve": ["界" * 700]}, P + "typed compaction preserve item exceeds 2048 characters or 2048 UTF-8 bytes"),
    ],
)
def test_rejections_name_what_is_wrong(params, message):
    assert err(params) == message


def test_first_five_schema_messages_joined():
    message = err({"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6})
    assert message == P + "; ".join(f"/{k}: unknown property" for k in "abcde")


def test_aggregate_encoded_request_bound_is_raw_message():
    # 16 items of ~1.1 KB: every item is within bounds, the encoding is not.
    assert err({"preserve": ["x" * 1100] * 16}) == MSG_ENCODED_TOO_LARGE
    assert MSG_ENCODED_TOO_LARGE == "typed compaction request exceeds 16384 encoded UTF-8 bytes"


def test_emoji_counts_two_utf16_units():
    check_bounds("😀" * 2048, None)  # 4096 units, 8192 bytes: at both limits
    with pytest.raises(ValueError):
        check_bounds("😀" * 2048 + "x", None)  # 8193 UTF-8 bytes


def test_encoding_is_compact_json_with_raw_non_ascii():
    text = encode_typed_request('say "hi"\n', ["界", "a\tb"])
    assert text == TYPED_REQUEST_PREFIX + '{"version":1,"instructions":"say \\"hi\\"\\n","preserve":["界","a\\tb"]}'
    assert json.loads(text[len(TYPED_REQUEST_PREFIX) :])["preserve"] == ["界", "a\tb"]


@settings(max_examples=profile_examples(200), deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF)))
def test_surrogate_and_utf16_measures_match_utf16_encoding(text):
    try:
        encoded = text.encode("utf-16-le")
    except UnicodeEncodeError:
        assert has_unpaired_surrogate(text)
        return
    assert not has_unpaired_surrogate(text)
    assert utf16_units(text) == len(encoded) // 2
