"""A successful tool result's stub in C (`_native.tool_output`, `loader.stub_output`) is
the Python one's (`stub_output_py`): the same estimate characters and transcript line for
any content (texts of any width with JavaScript's and Python's whitespace, blank texts,
images, odd parts, lines longer than the window `truncate_prefix_safe` looks at), and the
content left alone where Python leaves it."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.compaction import loader
from fabric_lsp.engine.compaction.loader import ToolOutput, stub_output, stub_output_py
from fabric_lsp.engine.jsstr import JS_WS_CHARS

pytestmark = pytest.mark.skipif(loader._tool_output is None, reason="the C accelerator is not built")

_CHARS = st.sampled_from(
    [*JS_WS_CHARS, "\x1c", "\x1f", "\x85", "a", "Z", "0", ".", "é", "字", "😀", "\ud800", "…", "-"]
)
_TEXT = st.one_of(
    st.text(_CHARS, max_size=40),
    st.text(st.sampled_from([" ", "\t", "\n", "a", "b"]), min_size=95, max_size=2100),
    st.text(max_size=30),
)
_PART = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, _TEXT),
    st.just({"type": "image", "data": "x", "mimeType": "image/png"}),
    st.sampled_from(
        [
            {"type": "text"},
            {"type": "text", "text": 7},
            {"type": "toolCall", "id": "c"},
            {"text": "no type"},
            {"type": None},
            "a string part",
            None,
        ]
    ),
)


def _shown(msg: dict[str, Any]) -> Any:
    c = msg["content"]
    return ("stub", c.chars, c.line) if isinstance(c, ToolOutput) else ("kept", c)


def _both(content: Any) -> tuple[Any, Any]:
    a = {"role": "toolResult", "content": copy.deepcopy(content)}
    b = {"role": "toolResult", "content": copy.deepcopy(content)}
    stub_output(a)
    stub_output_py(b)
    return _shown(a), _shown(b)


@settings(max_examples=600)
@given(st.lists(_PART, max_size=5))
def test_stub_matches_python(parts: list[Any]) -> None:
    native, python = _both(parts)
    assert native == python


@given(st.one_of(st.none(), st.text(max_size=5), st.integers(), st.dictionaries(st.text(max_size=3), st.integers())))
def test_content_not_a_list_is_kept(content: Any) -> None:
    native, python = _both(content)
    assert native == python == ("kept", content)


def test_known_lines() -> None:
    cases = [
        ([{"type": "text", "text": "  \n  hello   world\nsecond"}], (25, "hello world")),
        ([{"type": "text", "text": " \u3000"}, {"type": "text", "text": "\u00a0next\tline"}], (12, "next line")),
        ([{"type": "image"}, {"type": "text", "text": "x" * 150}], (4950, "x" * 99 + "…")),
        ([{"type": "text", "text": "a \x1c b"}], (5, "a \x1c b")),
        ([{"type": "text", "text": "😀 " * 60}], (180, "😀 " * 33 + "…")),
        ([{"type": "text", "text": ""}], (0, "")),
    ]
    for content, (chars, line) in cases:
        msg: dict[str, Any] = {"content": content}
        stub_output(msg)
        assert isinstance(msg["content"], ToolOutput)
        assert (msg["content"].chars, msg["content"].line) == (chars, line), content
