"""Entry previews (hover text) and the entry reference parser, as pure functions."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.entry_preview import operation_addresses, render_entry
from fabric_lsp.engine.references import PATTERN, find_references, format_reference, reference_at
from fabric_lsp.protocol import ENTRY_REFERENCE_PATTERN
from tests.support.examples import profile_examples

TRACE = {
    "kind": "pi-fabric.execution",
    "version": 1,
    "outcome": "succeeded",
    "phases": [],
    "counts": {"droppedValues": 0, "truncatedValues": 0, "redactedValues": 0, "droppedOperations": 0},
    "operations": [
        {"type": "call", "sequence": 1, "ref": "pi.read", "args": {"path": "a.py"}, "outcome": "succeeded"},
        {"type": "call", "sequence": 4, "ref": "pi.bash", "args": {"command": "ls"}, "outcome": "failed", "error": "x"},
    ],
}


def fabric_result(details):
    return {
        "type": "message",
        "id": "abcd1234",
        "parentId": "0000aaaa",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {
            "role": "toolResult",
            "toolName": "fabric_exec",
            "isError": False,
            "content": [{"type": "text", "text": "done"}],
            "details": details,
        },
    }


def test_operation_addresses_of_a_fabric_exec_result():
    entry = fabric_result({"trace": TRACE})
    assert operation_addresses(entry) == ["abcd1234/1", "abcd1234/4"]
    text = render_entry(entry, session_id="sess-1", line=7)
    assert "operation addresses: `abcd1234/1`, `abcd1234/4`" in text
    assert "tool: `fabric_exec`" in text and "line 8" in text
    assert "`pi-entry:sess-1/abcd1234`" in text


def test_no_operation_addresses_for_other_entries():
    assert operation_addresses(fabric_result({"trace": "nope"})) == []
    plain = {"type": "message", "id": "x1", "message": {"role": "user", "content": "hi"}}
    assert operation_addresses(plain) == []


@settings(max_examples=profile_examples(100), deadline=None)
@given(st.text(max_size=300))
def test_entry_text_cannot_escape_its_fence(text):
    entry = {"type": "message", "id": "e1", "parentId": None, "message": {"role": "user", "content": text}}
    out = render_entry(entry, session_id="s", line=0)
    if text:
        fence_lines = [ln for ln in out.splitlines() if re.fullmatch(r"`{3,}(text)?", ln)]
        opening = fence_lines[0].removesuffix("text")
        assert all(len(run) < len(opening) for run in re.findall(r"`+", text))


ids = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,20}", fullmatch=True)


@settings(max_examples=profile_examples(200), deadline=None)
@given(sid=ids, eid=ids, before=st.text(max_size=20), after=st.sampled_from(["", " ", ".", ", ", ")", "\n"]))
def test_every_formatted_reference_is_found_again(sid, eid, before, after):
    ref = format_reference(sid, eid)
    prefix = before + " "
    text = prefix + ref + after
    found = list(find_references(text))
    assert (found[-1].session_id, found[-1].entry_id) == (sid, eid)
    assert text[found[-1].start : found[-1].end] == ref
    assert reference_at(text, len(prefix) + 3) == found[-1]


def test_reference_rules():
    assert re.compile(ENTRY_REFERENCE_PATTERN).pattern in PATTERN.pattern
    (r,) = find_references("see pi-entry:01a2-b/d47ccd08. Next")
    assert (r.session_id, r.entry_id) == ("01a2-b", "d47ccd08")
    assert not list(find_references("xpi-entry:a/b"))  # not inside a longer word
    assert not list(find_references("pi-entry:/b pi-entry:a/ pi-entry:-a/b"))
    assert reference_at("pi-entry:a/b and more", 15) is None
