"""A whole-file build keeps the common message entries as `json_line.kept_decoder` reads
them: only the members its three TypedDicts name. That is sound only while those are all
the members memory reads, so:

* every member the normalizer reads (its Python steps, which the C steps equal:
  test_normalize_fast_path.py, test_hot_plain.py) of any kept entry, its message and its
  content parts, under every setting, is named there — read through dicts that record
  each access, so a read of a member no fixture holds counts too, and a walk over all
  members fails the test;
* a build from kept values equals the build that decodes its lines whole (generated
  sessions with members memory never reads; the real sessions: test_streaming_build.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memory_kit import REAL_SESSIONS
from test_memory_fabric_records import _rows as fabric_rows
from test_native_scan import kept_shape
from test_streaming_build import _build, _facts

from fabric_lsp.engine.memory import json_line
from fabric_lsp.engine.memory.digest_fold import DigestFolder
from fabric_lsp.engine.memory.entry_fields import plain_role
from fabric_lsp.engine.memory.entry_text import Normalizer
from fabric_lsp.engine.memory.file_history import new_collector
from fabric_lsp.engine.memory.state import SourceMissing
from tests.support.examples import profile_examples

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures"
SESSIONS = sorted(
    [
        *REAL_SESSIONS.glob("*.jsonl"),
        *(FIXTURES / "pi160").glob("*.jsonl"),
        *(FIXTURES / "memory").glob("*.jsonl"),
        *(REPO / "fabric_lsp" / "examples" / "agent" / "sessions").glob("*/*.jsonl"),
    ]
)
DECLARED = {
    "entry": set(json_line._KeptEntry.__annotations__),
    "message": set(json_line._KeptMessage.__annotations__),
    "part": set(json_line._KeptPart.__annotations__),
}
EVERY_MEMBER = "*"


class Recording(dict[str, Any]):
    """A dict that notes each member read (`seen[level]`), and EVERY_MEMBER for a walk."""

    def __init__(self, data: dict[str, Any], seen: dict[str, set[str]], level: str) -> None:
        super().__init__(data)
        self.seen, self.level = seen, level

    def _note(self, key: object) -> None:
        self.seen.setdefault(self.level, set()).add(str(key))

    def get(self, key: str, default: Any = None) -> Any:
        self._note(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self._note(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self._note(key)
        return super().__contains__(key)

    def _walk(self) -> None:
        self._note(EVERY_MEMBER)

    def keys(self) -> Any:
        self._walk()
        return super().keys()

    def values(self) -> Any:
        self._walk()
        return super().values()

    def items(self) -> Any:
        self._walk()
        return super().items()

    def __iter__(self) -> Any:
        self._walk()
        return super().__iter__()


def _recording(entry: dict[str, Any], seen: dict[str, set[str]]) -> Recording:
    message = dict(entry["message"])
    content = message.get("content")
    if isinstance(content, list):
        message["content"] = [Recording(p, seen, "part") if isinstance(p, dict) else p for p in content]
    return Recording({**entry, "message": Recording(message, seen, "message")}, seen, "entry")


def _entries() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in SESSIONS:
        for line in path.read_bytes().splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if kept_shape(value):
                out.append(value)
    out += [row for row in fabric_rows() if kept_shape(row)]
    out += [row for row in (_message_row(i, m) for i, m in enumerate(_ODD_MESSAGES)) if kept_shape(row)]
    return out


def _message_row(i: int, message: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"{i:08x}",
        "parentId": None,
        "timestamp": "2025-01-01T00:00:01.000Z",
        "message": message,
    }


_ODD_MESSAGES: list[dict[str, Any]] = [
    {"role": "assistant", "content": [], "errorMessage": "boom", "stopReason": "error", "timestamp": 5},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "thinkingSignature": "sig"}]},
    {"role": "assistant", "content": [{"type": "toolCall", "id": "c9", "name": "edit", "arguments": {"path": "a.py"}}]},
    {"role": "assistant", "content": [{"type": "toolCall", "name": 7}, {"type": "toolCall", "id": "x"}, 3, "s"]},
    {"role": "toolResult", "toolCallId": "c9", "toolName": "edit", "content": "ok", "isError": True},
    {"role": "toolResult", "toolName": 4, "content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]},
    {"role": "toolResult", "content": None},
    {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image", "data": "AAAA"}]},
    {"role": "user", "content": 5, "timestamp": "2025-01-01T00:00:09.000Z"},
]


def test_every_member_memory_reads_of_a_kept_entry_is_declared():
    entries = _entries()
    assert len(entries) > 100
    seen: dict[str, set[str]] = {}
    for max_chars in (None, 40):
        for thinking in (False, True):
            for tool_output in (False, True):
                norm = Normalizer("/s.jsonl", "sid", max_entry_chars=max_chars, index_thinking=thinking,
                                  index_tool_output=tool_output)  # fmt: skip
                norm.file_ops = new_collector("/w")
                folder = DigestFolder(1 << 20, batch_chars=0)
                for line, entry in enumerate(entries):
                    role = plain_role(entry)
                    if role is not None:
                        rec = _recording(entry, seen)
                        norm._feed_plain(rec, rec["message"], role, line)
                    norm.feed(_recording(entry, seen), line)  # (the general steps: not an exact dict)
                    norm.fold(_recording(entry, seen), line, folder)
                    rec = _recording(entry, seen)
                    message = rec["message"]
                    norm.file_ops.observe_entry(message, message.get("role"), line, rec.get("id"), 1, line=line)
    assert seen["entry"] and seen["message"] and seen["part"]
    for level, names in seen.items():
        assert EVERY_MEMBER not in names, f"memory walks every member of a kept {level}"
        assert names <= DECLARED[level], f"{level} members read but not kept: {sorted(names - DECLARED[level])}"


_extra = st.dictionaries(
    st.sampled_from(["usage", "api", "model", "responseId", "textSignature", "data", "zz"]),
    st.one_of(st.integers(), st.text(max_size=4), st.just({"cost": {"total": 0.5}}), st.just([[1.5e300]])),
    max_size=3,
)
_part = st.builds(
    lambda base, extra: {**extra, **base},
    st.sampled_from(
        [
            {"type": "text", "text": "parse the epoch"},
            {"type": "thinking", "thinking": "private epoch"},
            {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "src/x.py"}},
            {"type": "toolCall", "id": "c2", "name": "bash", "arguments": {"command": "cat a.txt"}},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        ]
    ),
    _extra,
)
_message = st.builds(
    lambda base, content, extra: {**extra, **base, "content": content},
    st.sampled_from(
        [
            {"role": "user"},
            {"role": "assistant", "errorMessage": "failed epoch"},
            {"role": "toolResult", "toolCallId": "c1", "toolName": "read", "isError": False},
            {"role": "toolResult", "toolCallId": "c2", "toolName": "bash", "isError": True},
            {"role": "toolResult", "toolCallId": "k1", "toolName": "fabric_exec", "details": {"success": True}},
            {"role": "bashExecution", "command": "ls", "output": "a b", "exitCode": 0},
        ]
    ),
    st.one_of(st.text(max_size=12), st.lists(_part, max_size=4), st.none()),
    _extra,
)


@settings(max_examples=profile_examples(120), deadline=None)
@given(st.lists(st.tuples(_message, _extra), min_size=1, max_size=10), st.sampled_from(["hot", "cold"]))
def test_a_build_from_kept_values_equals_the_whole_decode(tmp_path_factory, messages, tier):
    rows = [{"type": "session", "version": 3, "id": "s-1", "cwd": "/w", "timestamp": "2025-01-01T00:00:00.000Z"}]
    for i, (message, extra) in enumerate(messages):
        parent = rows[-1].get("id") if i else None
        rows.append({**extra, **_message_row(i, message), "parentId": parent})
    path = tmp_path_factory.mktemp("s") / "x.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    mp = pytest.MonkeyPatch()
    try:

        def facts(keep: bool) -> Any:
            try:
                return _facts(_build(path, tier, "active", stream=False, chunk=1 << 20, monkeypatch=mp, keep=keep))
            except SourceMissing as missing:
                return ("missing", missing.reason)

        assert facts(True) == facts(False)
    finally:
        mp.undo()


@pytest.mark.parametrize("tier", ["hot", "cold"])
def test_an_extension_without_the_typed_decode_is_given_the_whole_decoder(tier, monkeypatch):
    """An editable checkout keeps the extension it was built with until it is rebuilt: one
    built from an older source (no `KEPT_DECODE` mark) is handed the whole decoder, and
    the builds are the same either way."""
    from fabric_lsp.engine.memory import entry_rows, source

    if source._scan_lines is not None:
        assert source._KEPT_DECODE is not None and isinstance(entry_rows._STREAM_DECODE, tuple)
    for path in SESSIONS:
        typed = _facts(_build(path, tier, "active", stream=False, chunk=1 << 20, monkeypatch=monkeypatch))
        streamed = _facts(_build(path, tier, "active", stream=True, chunk=4096, monkeypatch=monkeypatch))
        with monkeypatch.context() as m:
            m.setattr(source, "_KEPT_DECODE", None)
            m.setattr(entry_rows, "_STREAM_DECODE", json_line.whole_decoder.decode)
            assert _facts(_build(path, tier, "active", stream=False, chunk=1 << 20, monkeypatch=m)) == typed
            assert _facts(_build(path, tier, "active", stream=True, chunk=4096, monkeypatch=m)) == streamed == typed
