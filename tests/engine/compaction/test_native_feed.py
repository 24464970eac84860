"""The common messages in C give exactly what the Python code gives, for any sequence of
messages (every role, content of every shape: parts that are not dicts, missing or
non-string fields, null or missing arguments; errors, bash and fabric_exec results,
stubbed outputs; usage of every shape and stop reasons):

* normalization (`_native.feed_message`, called by `Normalizer.feed`): the same events
  (keys in the same order), the same pending-call map (with pass 1's `_Calls` bookkeeping
  of who paired with whom), the same erased-thinking count;
* the facts (`_native.message_facts`, called by `facts.message_facts`): the same kind
  (the shared tuple itself), tokens, usage, spans and deferred arguments."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.compaction import facts, normalize
from fabric_lsp.engine.compaction.loader import ToolOutput, stub_output
from fabric_lsp.engine.compaction.normalize import Normalizer
from fabric_lsp.engine.compaction.scan import _Calls
from fabric_lsp.engine.jsstr import js_stringify

pytestmark = pytest.mark.skipif(normalize._feed_message is None, reason="the C accelerator is not built")

_IDS = st.sampled_from(["c1", "c2", "c3", "", None, 7])
_TEXT = st.one_of(st.text(max_size=12), st.sampled_from([None, 3, ["x"]]))
_ARGS = st.one_of(
    st.none(),
    st.just({"command": "ls -la"}),
    st.just({"command": 5}),
    st.just({"path": "/a"}),
    st.just([1, 2]),
    st.just("raw"),
)


def _call_part(cid: Any, name: Any, args: Any, with_args: bool) -> dict[str, Any]:
    part = {"type": "toolCall", "id": cid, "name": name}
    if with_args:
        part["arguments"] = args
    return part


_PART = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, _TEXT),
    st.builds(lambda t: {"type": "thinking", "thinking": t}, _TEXT),
    st.builds(_call_part, _IDS, st.sampled_from(["bash", "read", "fabric_exec", None, 4]), _ARGS, st.booleans()),
    st.sampled_from([{"type": "image"}, {"text": "no type"}, {"type": 3}, "a string", None, 5, {"type": "text"}]),
)
_CONTENT = st.one_of(st.lists(_PART, max_size=4), _TEXT, st.just({"type": "text", "text": "a dict"}))


@st.composite
def message(draw: st.DrawFn, stubs: bool = True) -> dict[str, Any]:
    """A `message` entry of any shape; with `stubs`, some successful tool results already
    stubbed as pass 1 leaves them (without: plain JSON values, for a session file)."""
    role = draw(st.sampled_from(["assistant", "user", "toolResult", "toolResult", "bashExecution", "custom", None, 9]))
    m: dict[str, Any] = {}
    if role is not None or draw(st.booleans()):
        m["role"] = role
    if draw(st.integers(0, 5)):
        m["content"] = draw(_CONTENT)
    if role == "assistant" and draw(st.integers(0, 5)):
        m["usage"] = draw(
            st.sampled_from(
                [
                    {"totalTokens": 120, "input": 1},
                    {"totalTokens": 2.5},
                    {"totalTokens": float("nan")},
                    {"totalTokens": 0, "input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4},
                    {"totalTokens": True},
                    {"totalTokens": "7"},
                    {"input": 1},
                    None,
                    [1],
                ]
            )
        )
        if draw(st.booleans()):
            m["stopReason"] = draw(st.sampled_from(["stop", "error", "aborted", "toolUse", None]))
    if role == "toolResult":
        for key, values in (
            ("toolCallId", _IDS),
            ("toolName", st.sampled_from(["bash", "read", "fabric_exec", "", None, 3])),
            ("isError", st.sampled_from([True, False, None, "true", 1])),
        ):
            if draw(st.integers(0, 4)):
                m[key] = draw(values)
        if stubs and draw(st.booleans()):
            stub_output(m)  # as pass 1 does for a successful result
    return {"type": "message", "id": draw(st.sampled_from(["e1", "e2", None, 4])), "message": m}


def _run(entries: list[dict[str, Any]], native: bool, pass_one: bool) -> str:
    saved = normalize._feed_message
    if not native:
        normalize._feed_message = None
    try:
        calls: Any = _Calls() if pass_one else None
        nz = Normalizer(calls=calls)
        for i, e in enumerate(copy.deepcopy(entries)):
            if isinstance(nz.calls, _Calls):
                nz.calls.node = i
            nz.feed(e)
    finally:
        normalize._feed_message = saved

    def plain(v: Any) -> Any:
        if isinstance(v, ToolOutput):
            return {"stub": [v.chars, v.line]}
        if isinstance(v, dict):
            return {"keys": list(v), "items": {k: plain(x) for k, x in v.items()}}
        if isinstance(v, list):
            return [plain(x) for x in v]
        return v

    state: dict[str, Any] = {
        "events": plain(nz.events),
        "calls": {k: plain(v) for k, v in dict(nz.calls).items()},
        "thinking": nz.thinking,
    }
    if isinstance(nz.calls, _Calls):
        state["owners"] = nz.calls.owners
        state["users"] = list(nz.calls.users)
        state["suppliers"] = list(nz.calls.suppliers)
    return js_stringify(state)


@settings(max_examples=500)
@given(st.lists(message(), max_size=8), st.booleans())
def test_feed_matches_python(entries: list[dict[str, Any]], pass_one: bool) -> None:
    assert _run(entries, True, pass_one) == _run(entries, False, pass_one)


def test_known_events() -> None:
    entries = [
        {
            "type": "message",
            "id": "a1",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hm"},
                    {"type": "text", "text": "running"},
                    {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "make"}},
                ],
            },
        },
        {
            "type": "message",
            "id": "r1",
            "message": {"role": "toolResult", "toolCallId": "c1", "toolName": "bash", "content": []},
        },
        {"type": "message", "id": "u1", "message": {"role": "user", "content": [{"type": "text", "text": "ok"}]}},
    ]
    nz = Normalizer()
    for e in entries:
        nz.feed(e)
    assert nz.thinking == 1
    assert [(ev["type"], ev.get("text"), ev.get("command")) for ev in nz.events] == [
        ("assistantText", "running", None),
        ("toolCall", None, None),
        ("bash", None, "make"),
        ("user", "ok", None),
    ]
    assert list(nz.events[2]) == ["type", "entryId", "sourceEntryId", "toolCallId", "command", "isError", "exitCode"]


@settings(max_examples=500)
@given(st.lists(message(), min_size=1, max_size=4))
def test_facts_match_python(entries: list[dict[str, Any]]) -> None:
    saved = facts._message_facts
    for e in entries:
        native = facts.message_facts(copy.deepcopy(e), True)
        facts._message_facts = None
        try:
            python = facts.message_facts(copy.deepcopy(e), True)
        finally:
            facts._message_facts = saved
        assert native[0] is python[0]
        assert repr(native) == repr(python)
