"""A preview's pass-1 line loop in C (`_native.read_lines`, driven by `loader.each_line`
and `loader._stream_fp`) leaves exactly the scan the Python loop leaves: the same counts
(blank, malformed, oversize, non-object, no id), header, nodes, positions, facts and
speculative events, and the same preview, for files whose first lines are anything
(a header, blanks, bad JSON, a bare value), lines over the line limit, lines nested
deeper than the limit, lone surrogate escapes, a partial last line, in every chunking."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_compaction_properties import entry
from test_native_feed import message

from fabric_lsp.engine.compaction import facts, loader, normalize, scan
from fabric_lsp.engine.compaction.api import preview_compaction
from fabric_lsp.engine.compaction.scan import Scanned, scan_session_bytes, scan_session_file
from fabric_lsp.engine.jsstr import js_stringify
from tests.support.examples import profile_examples

needs_native = pytest.mark.skipif(loader._read_lines is None, reason="the C accelerator is not built")

HEADER = msgspec.json.encode({"type": "session", "version": 3, "id": "s", "timestamp": "t", "cwd": "/"})
_ODD = [
    b"",
    b"   ",
    b"\t\r",
    b"{not json",
    b"[1,2]",
    b"7",
    b"\xff\xfe",
    b'{"type":"message","id":"x","parentId":7}',
    b'{"type":"message","parentId":null}',
    b'{"type":"message","id":"lone\\ud800","parentId":null}',
    b'{"type":"session","id":"late","cwd":"/late"}',
    b'{"type":"message","id":"deep","parentId":null,"x":' + b"[" * 513 + b"]" * 513 + b"}",
    b'{"type":"message","id":"fine","parentId":null,"x":' + b"[" * 500 + b"]" * 500 + b"}",
    b'{"type":"message","id":"long","parentId":null,"t":"' + b"y" * 300 + b'"}',
]


@st.composite
def session_bytes(draw: st.DrawFn) -> bytes:
    lines: list[bytes] = []
    if draw(st.booleans()):
        lines.extend(draw(st.lists(st.sampled_from(_ODD), max_size=3)))  # before any header
    if draw(st.integers(0, 3)):
        lines.append(HEADER)
    n = draw(st.integers(0, 20))
    ids: list[str] = []
    for i in range(n):
        e: dict[str, Any] = dict(draw(entry()))
        # (Pi's 8 hex digits mostly; ids of other lengths or not ASCII go to the id table's
        # other column)
        e["id"] = draw(
            st.sampled_from([f"{i:08x}"] * 4 + [None, 5, f"{max(0, i - 1):08x}", f"id-{i}", f"\u00fc{i:07x}"])
        )
        e["parentId"] = draw(st.sampled_from([ids[-1] if ids else None] * 4 + [None, "ghost", 3]))
        if isinstance(e["id"], str):
            ids.append(e["id"])
        lines.append(msgspec.json.encode(e))
        if draw(st.integers(0, 5)) == 0:
            lines.append(draw(st.sampled_from(_ODD)))
    data = b"\n".join(lines) + b"\n"
    if draw(st.booleans()):
        data += b'{"type":"message","id":"half'
    return data


def _state(scan: Scanned) -> str:
    nodes = scan.nodes
    spec = nodes.spec
    assert spec is not None
    counts = {k: getattr(scan, k) for k in ("malformed", "oversize", "non_object", "no_id", "blank", "size")}
    return js_stringify(
        {
            "counts": counts,
            "tail": scan.partial_tail_bytes,
            "header": scan.header,
            "isSession": scan.is_session,
            "parents": sorted(scan.parents.items()),
            "ids": [nodes.id(i) for i in range(len(nodes))],
            "offsets": list(nodes.offsets),
            "lengths": list(nodes.lengths),
            "kinds": [list(k) for k in nodes.kinds],
            "tokens": list(nodes.tokens),
            "usage": sorted((k, list(v)) for k, v in nodes.usage.items()),
            "spans": sorted((k, list(v)) for k, v in nodes.spans.items()),
            "compactions": sorted((k, list(v)) for k, v in nodes.compactions.items()),
            "deferred": sorted((k, repr(v)) for k, v in nodes.deferred.items()),
            "events": spec.nz.events,
            "starts": list(spec.starts),
            "thinking": sorted(spec.thinking.items()),
            "normalizerThinking": spec.nz.thinking,
            "calls": sorted(spec.calls.items()),
            "owners": sorted(spec.calls.owners.items()),
            "pairings": list(zip(spec.calls.users, spec.calls.suppliers)),
        }
    )


def _both(monkeypatch: pytest.MonkeyPatch, run) -> tuple[str, str]:
    """`run()` with the accelerator, then with every pass-1 path of it turned off."""
    native = run()
    with monkeypatch.context() as m:
        m.setattr(loader, "_read_lines", None)
        m.setattr(loader, "_tool_output", None)
        m.setattr(scan, "_message_node", None)
        m.setattr(facts, "_message_facts", None)
        m.setattr(normalize, "_feed_message", None)
        python = run()
    return native, python


@needs_native
@settings(max_examples=profile_examples(300), deadline=None)
@given(session_bytes(), st.sampled_from([7, 64, 512 << 10]), st.sampled_from([64, 4096, 1 << 20]))
def test_native_line_loop_leaves_the_python_scan(tmp_path_factory, data, chunk, limit):
    path = tmp_path_factory.mktemp("s") / "s.jsonl"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as mp:
        a, b = _both(mp, lambda: _state(scan_session_bytes(data, max_line_bytes=limit)))
        assert a == b
        streamed = _both(mp, lambda: _state(scan_session_file(str(path), max_line_bytes=limit, chunk_size=chunk)[0]))
        assert streamed[0] == streamed[1]
        previews = _both(mp, lambda: json.dumps(preview_compaction(str(path)), sort_keys=True))
        assert previews[0] == previews[1]


@needs_native
def test_the_native_loop_calls_the_cancel_check_as_the_python_loop(monkeypatch):
    """`check` runs before every 4096th line in both loops (a cancelled preview stops)."""
    data = b"".join(b'{"type":"custom","id":"%08x","parentId":null}\n' % i for i in range(10_000))
    calls: list[int] = []

    def run() -> str:
        calls.clear()
        scan_session_bytes(data, check=lambda: calls.append(1))
        return str(len(calls))

    assert _both(monkeypatch, run) == ("2", "2")

    class Stop(Exception):
        pass

    def stop() -> None:
        raise Stop

    with pytest.raises(Stop):
        scan_session_bytes(data, check=stop)


@st.composite
def message_session(draw: st.DrawFn) -> bytes:
    """A session of messages of every shape (test_native_feed.message), some of them
    branching, so pass 1's speculative events are the branch's or not."""
    lines = [HEADER]
    for i, m in enumerate(draw(st.lists(message(stubs=False), max_size=12))):
        parent = draw(st.integers(-1, i - 1))  # mostly the line before: a branch now and then
        if i and draw(st.integers(0, 3)):
            parent = i - 1
        m = dict(m, id=f"{i:08x}", parentId=f"{parent:08x}" if parent >= 0 else None)
        lines.append(msgspec.json.encode(m))
    return b"\n".join(lines) + b"\n"


@needs_native
@settings(max_examples=profile_examples(300), deadline=None)
@given(message_session())
def test_native_message_nodes_leave_the_python_scan(tmp_path_factory, data):
    """Pass 1's C call for a common message node (`_native.message_node`: its stub,
    facts and events at once) against the Python sink, scan and preview."""
    path = tmp_path_factory.mktemp("s") / "s.jsonl"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as mp:
        a, b = _both(mp, lambda: _state(scan_session_file(str(path))[0]))
        assert a == b
        previews = _both(mp, lambda: json.dumps(preview_compaction(str(path), include_qa=True), sort_keys=True))
        assert previews[0] == previews[1]


_CALL_IDS = st.sampled_from(["c1", "c2", "c3", "c4"])


@st.composite
def tool_session(draw: st.DrawFn) -> bytes:
    """A session of tool calls and their results (the same call ids again and again, some
    results on another branch than their call, some thinking, ids of every kind): the
    pass-1 pairings `_Calls` notes, which decide whether its events are the branch's."""
    lines = [HEADER]
    ids: list[str] = []
    for i in range(draw(st.integers(1, 14))):
        role = draw(st.sampled_from(["assistant", "toolResult", "toolResult", "user"]))
        m: dict[str, Any]
        if role == "assistant":
            parts: list[dict[str, Any]] = [
                {"type": "toolCall", "id": cid, "name": draw(st.sampled_from(["bash", "read"])), "arguments": {}}
                for cid in draw(st.lists(_CALL_IDS, min_size=1, max_size=3))
            ]
            if draw(st.booleans()):
                parts.insert(0, {"type": "thinking", "thinking": "hm"})
            m = {"role": "assistant", "content": parts, "usage": {"totalTokens": draw(st.integers(1, 500))}}
        elif role == "toolResult":
            m = {
                "role": "toolResult",
                "toolCallId": draw(_CALL_IDS),
                "toolName": draw(st.sampled_from(["bash", "read"])),
                "content": [{"type": "text", "text": draw(st.sampled_from(["ok", "x" * 300, "\u00e9" * 150]))}],
                "isError": draw(st.sampled_from([False, None, True])),
            }
        else:
            m = {"role": "user", "content": "go"}
        eid = draw(st.sampled_from([f"{i:08x}"] * 6 + [f"n{i}", f"\u00fc{i:07x}"]))
        parent = ids[-1] if ids and draw(st.integers(0, 3)) else draw(st.sampled_from([None, *ids[-4:]]))
        ids.append(eid)
        lines.append(msgspec.json.encode({"type": "message", "id": eid, "parentId": parent, "message": m}))
    return b"\n".join(lines) + b"\n"


@needs_native
@settings(max_examples=profile_examples(300), deadline=None)
@given(tool_session(), st.sampled_from([64, 512 << 10]))
def test_native_sink_pairs_results_with_calls_as_the_python_scan(tmp_path_factory, data, chunk):
    """The accelerator's loop fills the scan's columns for a common message node itself
    (`read_lines`' sink): the same columns, pending calls, owners and pairings, thinking
    counts and preview as the Python sink."""
    path = tmp_path_factory.mktemp("s") / "s.jsonl"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as mp:
        a, b = _both(mp, lambda: _state(scan_session_file(str(path), chunk_size=chunk)[0]))
        assert a == b
        previews = _both(mp, lambda: json.dumps(preview_compaction(str(path), include_qa=True), sort_keys=True))
        assert previews[0] == previews[1]
