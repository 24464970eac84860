"""`lineage_from_lines` walks a session's active branch in C where the accelerator is built
(`_native.lineage_walk`): the same leaf, ids, ordinals, reasons and fingerprint as the
Python loops, the same parent ids shared with their parents' own id objects, the same
error for a parent value a dict cannot hold, for any scanned columns (duplicates, cycles,
missing parents, odd values, a live leaf or one that names nothing)."""

from __future__ import annotations

from array import array

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.memory import source
from fabric_lsp.engine.memory.source import ScanLines, lineage_from_lines
from tests.support.examples import profile_examples

pytestmark = pytest.mark.skipif(source._lineage_walk is None, reason="the C accelerator is not built")

_IDS = ["a", "b", "c", "d", "e", "f"]


def _fresh(text: str) -> str:
    """A new string object equal to `text` (the scan makes one per line)."""
    return (text + "!")[:-1]


_LINE = st.tuples(
    st.one_of(st.sampled_from(_IDS), st.none()),  # id
    st.one_of(st.sampled_from(_IDS + ["zz"]), st.none(), st.just(5), st.just(["x"])),  # parent
    st.booleans(),  # a node
)


def _columns(rows) -> ScanLines:
    lines = ScanLines()
    for n, (eid, parent, is_node) in enumerate(rows):
        # ids as fresh string objects (the scan's own), so shared identity is observable
        fresh = None if eid is None else _fresh(eid + "-id")
        if isinstance(parent, str):
            parent = _fresh(parent + "-id")
        elif isinstance(parent, list):
            parent = list(parent)
        lines.add(n, n + 1, 10 * n, 9, type="message", id=fresh, parent=parent, is_node=is_node and fresh is not None)
    return lines


def _walk(rows, override, monkeypatch, *, native: bool):
    lines = _columns(rows)
    with monkeypatch.context() as m:
        if not native:
            m.setattr(source, "_lineage_walk", None)
        try:
            lineage, ordinals = lineage_from_lines(lines, "active", override)
        except TypeError as err:
            return ("TypeError", str(err).split(":")[0]), None
    shared = [
        next((j for j, own in enumerate(lines.id) if own is p), None) if isinstance(p, str) else None
        for p in lines.parent
    ]
    return (
        lineage.leaf_id,
        lineage.ids,
        list(lineage.ordinals),
        (bytes(lineage.ordinals.bits), lineage.ordinals.count),  # the bitmap itself
        lineage.fingerprint,
        lineage.reasons,
        list(ordinals),
        lines.parent,
        shared,
    ), lineage


@settings(
    max_examples=profile_examples(1000), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_LINE, max_size=12), st.one_of(st.none(), st.sampled_from([i + "-id" for i in _IDS] + ["zz"])))
def test_the_walk_in_c_equals_the_python_loops(monkeypatch, rows, override):
    got, _ = _walk(rows, override, monkeypatch, native=True)
    want, _ = _walk(rows, override, monkeypatch, native=False)
    assert got == want


def test_a_branch_a_cycle_and_a_live_leaf(monkeypatch):
    rows = [("a", None, True), ("b", "a", True), ("c", "b", True), ("d", "a", True), ("x", 5, False)]
    got, lineage = _walk(rows, None, monkeypatch, native=True)
    assert lineage is not None and lineage.leaf_id == "d-id" and lineage.ids == ["a-id", "d-id"]
    assert lineage.reasons == []
    _, live = _walk(rows, "c-id", monkeypatch, native=True)
    assert live is not None and live.ids == ["a-id", "b-id", "c-id"] and list(live.ordinals) == [0, 1, 2]
    _, looped = _walk([("a", "b", True), ("b", "a", True)], None, monkeypatch, native=True)
    assert looped is not None and looped.ids == ["a-id", "b-id"] and looped.reasons == ["invalid_parent_graph"]
    assert got[-1] == [None, 0, 1, 0, None]  # each parent id is its parent's own id object
    assert got == _walk(rows, None, monkeypatch, native=False)[0]
    assert isinstance(lineage.ordinals, source.OrdinalSet) and array("q", [0, 3]) == array("q", lineage.ordinals)
