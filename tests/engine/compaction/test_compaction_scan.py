"""The two-pass preview scanner (engine/compaction/scan.py) against the lean loader and
the session package: same branch, same counts, same facts, and pass 1's speculative
normalization equal to normalizing the branch itself."""

from __future__ import annotations

import copy
import hashlib
import tracemalloc

import msgspec
import pytest
from compaction_builders import assistant, call, link, tool_result, user
from hypothesis import given
from hypothesis import strategies as st
from test_compaction_properties import PROPS, entry, odd_file

from fabric_lsp.engine.compaction.api import PreviewError, preview_compaction
from fabric_lsp.engine.compaction.facts import DictFacts, Facts, facts
from fabric_lsp.engine.compaction.hook import compaction_hook
from fabric_lsp.engine.compaction.id_table import IdTable
from fabric_lsp.engine.compaction.loader import load_session_bytes
from fabric_lsp.engine.compaction.normalize import normalize
from fabric_lsp.engine.compaction.pigate import model_key, pi_tokens_before
from fabric_lsp.engine.compaction.scan import SourceChanged, _stub, scan_session_bytes, scan_session_file
from fabric_lsp.engine.jsstr import js_stringify
from fabric_lsp.engine.session import SessionTree, parse_session_bytes

HEADER = {"type": "session", "version": 3, "id": "s", "timestamp": "t", "cwd": "/"}
HEX = [f"{i * 2654435761 % (1 << 32):08x}" for i in range(40)]


@st.composite
def tree_file(draw):
    """Sessions with Pi-style 8-hex ids (some odd ones), forks, duplicates, orphans,
    forward references and the occasional bad line."""
    n = draw(st.integers(0, 30))
    ents = draw(st.lists(entry(), min_size=n, max_size=n))
    pool = HEX[:n] + ["e1", "ghost", "ABCDEF01"]
    lines = [msgspec.json.encode(HEADER)]
    ids: list = []
    for i, e in enumerate(ents):
        e = dict(e)
        e["id"] = draw(st.sampled_from([HEX[i]] * 6 + pool[: i + 2] + [None]))
        choices = [ids[-1] if ids else None] * 6 + ids[-6:] + [None, "ghost", HEX[min(i + 1, 39)]]
        e["parentId"] = draw(st.sampled_from(choices))
        e["timestamp"] = f"2025-01-01T00:00:{i % 60:02d}Z"
        if isinstance(e["id"], str):
            ids.append(e["id"])
        lines.append(msgspec.json.encode(e))
        if draw(st.integers(0, 12)) == 0:
            lines.append(draw(st.sampled_from([b"", b"  ", b"{bad", b"[1]", b'{"type":"x","id":"y","parentId":3}'])))
    return b"\n".join(lines) + b"\n"


def _leaves(data: bytes) -> list:
    loaded = load_session_bytes(data, slim=False)
    return [None, "ghost"] + [e.get("id") for e in loaded.nodes[-4:]] + [e.get("id") for e in loaded.nodes[:2]]


def _same_branch(data: bytes) -> None:
    loaded = load_session_bytes(data, slim=False)
    scanned = scan_session_bytes(data)
    assert scanned.is_session == loaded.is_session
    assert scanned.leaf_id == loaded.leaf_id
    for k in ("malformed", "oversize", "non_object", "no_id", "blank", "partial_tail_bytes", "size"):
        assert getattr(scanned, k) == getattr(loaded, k), k
    for leaf in _leaves(data):
        assert scanned.has_id(leaf) == (leaf in loaded.by_id)
        used, entries, err = loaded.branch(leaf)
        used2, f, err2 = scanned.branch(leaf)
        assert (used2, err2) == (used, err)
        assert [f.id(i) for i in range(len(f))] == [e["id"] for e in entries]
        ref = DictFacts(entries)
        assert f.kinds == ref.kinds
        assert (f.spans, f.compactions) == (ref.spans, ref.compactions)
        assert js_stringify(sorted(f.usage.items(), key=lambda kv: kv[0])) == js_stringify(
            sorted(ref.usage.items(), key=lambda kv: kv[0])
        )
        assert pi_tokens_before(f) == pi_tokens_before(entries)  # completes the deferred estimates
        assert model_key(f) == model_key(entries)
        # every estimate the engine reads (from the last compaction's kept entry on) is
        # complete and equal; earlier tool-call estimates may stay deferred (-1)
        lc = f.last_compaction()
        first = 0 if lc < 0 else (f.index(f.compactions[lc][0], lc) if f.index(f.compactions[lc][0], lc) >= 0 else lc)
        for i, (a, b) in enumerate(zip(f.tokens, ref.tokens)):
            assert a == b or (i < first and a == -1), (i, first)
        for i in range(len(f)):
            assert f.entry(i)["id"] == entries[i]["id"]


@PROPS
@given(odd_file())
def test_scan_matches_the_lean_loader_on_odd_files(data):
    _same_branch(data)


@PROPS
@given(tree_file())
def test_scan_matches_the_lean_loader_on_pi_style_trees(data):
    _same_branch(data)
    log = parse_session_bytes(data)
    tree = SessionTree.from_records(log.records)
    scanned = scan_session_bytes(data)
    leaf, f, err = scanned.branch()
    br = tree.branch()
    assert [f.id(i) for i in range(len(f))] == [r.id for r in br.entries]
    assert err == br.error


@PROPS
@given(tree_file(), st.sampled_from([7, 64, 1 << 20]))
def test_streaming_scan_matches_bytes_scan(tmp_path_factory, data, chunk):
    p = tmp_path_factory.mktemp("s") / "s.jsonl"
    p.write_bytes(data)
    a = scan_session_bytes(data)
    b, digest = scan_session_file(str(p), chunk_size=chunk)
    try:
        assert digest == hashlib.sha256(data).hexdigest()
        fa, fb = a.branch()[1], b.branch()[1]
        assert [fa.id(i) for i in range(len(fa))] == [fb.id(i) for i in range(len(fb))]
        assert fa.kinds == fb.kinds and list(fa.offsets) == list(fb.offsets)
        assert [fa.entry(i) for i in range(len(fa))] == [fb.entry(i) for i in range(len(fb))]
    finally:
        b.fp.close()


def _events_both_ways(data: bytes, leaf=None) -> None:
    """Pass 1's speculative events for every prefix equal normalizing the prefix's
    (stubbed) entries; when the speculation is refused, pass 2 is what runs."""
    scanned = scan_session_bytes(data)
    _, f, _ = scanned.branch(leaf)
    for stop in range(len(f) + 1):
        s1: dict = {}
        s2: dict = {}
        got = f.events(stop, stats=s1)
        ref = Facts.events(f, stop, stats=s2)  # pass 2: decode the prefix again
        assert got == ref and s1 == s2


@PROPS
@given(tree_file())
def test_speculative_events_equal_the_branch_normalization(data):
    for leaf in _leaves(data)[:4]:
        _events_both_ways(data, leaf)


@PROPS
@given(odd_file())
def test_speculative_events_equal_the_branch_normalization_on_odd_files(data):
    _events_both_ways(data)


def _lines(entries: list[dict]) -> bytes:
    return b"".join(msgspec.json.encode(x) + b"\n" for x in [HEADER, *entries])


def test_a_pairing_across_branches_falls_back_to_the_branch_itself():
    """Abandoned branch and active branch reuse the call id `call_0`: in file order the
    active result would pair with the abandoned bash call; on the branch it pairs with its
    own. The speculation is refused and pass 2 gives the branch's own pairing."""
    base = link([user("go"), assistant(call("call_0", "bash", {"command": "make"}))], prefix="a")
    abandoned = link([assistant(call("call_0", "bash", {"command": "rm -rf build"}))], start=3, prefix="a")
    abandoned[0]["parentId"] = base[0]["id"]
    result = link(
        [
            tool_result("call_0", "bash", "boom", True),
            user("next"),
            assistant(call("c2", "read", {"path": "x"})),
            tool_result("c2", "read", "ok"),
            user("end"),
        ],
        start=4,
        prefix="a",
    )
    result[0]["parentId"] = base[-1]["id"]
    entries = base + abandoned + result
    data = _lines(entries)
    scanned = scan_session_bytes(data)
    _, f, _ = scanned.branch()
    assert f.spec is not None and f.spec.events(f.runs, len(f), None) is None  # refused
    branch = [e for e in entries if e["id"] != abandoned[0]["id"]]
    stubbed = copy.deepcopy(branch)
    for e in stubbed:
        _stub(e)
    assert Facts.events(f, len(f)) == normalize(stubbed)
    res = preview_compaction(data, session_path="/b.jsonl", keep_recent_tokens=1, context_window=0)
    hook = compaction_hook(
        branch,
        tokens_before=res["tokensBefore"],
        model_key=model_key(branch),
        pi_settings={"reserveTokens": 16384, "keepRecentTokens": 1},
    )
    assert res["outcome"] == "compacted" and res["summary"] == hook["compaction"]["summary"]
    assert "make: boom" in res["summary"] and "rm -rf" not in res["summary"]


def test_id_table_cells():
    t = IdTable()
    for s in ["0000abcd", "e1", "ghost", "0000abcd", "é", "x" * 8, "e1"]:
        t.append(s)
    assert [t.get(i) for i in range(len(t))] == ["0000abcd", "e1", "ghost", "0000abcd", "é", "x" * 8, "e1"]
    assert (t.find("0000abcd"), t.rfind("0000abcd"), t.find("e1"), t.rfind("e1")) == (0, 3, 1, 6)
    assert (t.find("nope"), t.rfind("nope"), t.find(5), t.find("0000abcd", 0)) == (-1, -1, -1, -1)
    assert t.rfind("0000abcd", 3) == 0 and t.find("xxxxxxxx") == 5
    assert t.has_duplicates()
    u = IdTable()
    u.blob += b"ab" + b"0000abcd" + b"cdefgh"  # a match that is not on a cell boundary
    assert (u.find("0000abcd"), u.rfind("0000abcd")) == (-1, -1)
    v = IdTable()
    for s in HEX[:30] + ["odd", "ODD00000"]:
        v.append(s)
    assert not v.has_duplicates()
    v.append(HEX[7])
    assert v.has_duplicates()


@PROPS
@given(
    st.lists(
        st.one_of(
            st.integers(0, 40).map(lambda i: f"{i * 2654435761 % (1 << 32):08x}"),  # Pi's ids
            st.sampled_from(["e1", "ghost", "\u00e9", "x" * 8, "ODD00000", "0000ABCD"]),
        ),
        max_size=60,
    )
)
def test_id_table_duplicates_are_the_ids_duplicates(ids):
    t = IdTable()
    for s in ids:
        t.append(s)
    assert t.has_duplicates() == (len(set(ids)) != len(ids))


def test_a_line_rewritten_between_the_passes_is_refused(tmp_path):
    entries = link(
        [user("a"), assistant(call("c1", "read", {"path": "x"})), tool_result("c1", "read", "ok"), user("b")]
    )
    p = tmp_path / "s.jsonl"
    p.write_bytes(_lines(entries))
    scanned, _ = scan_session_file(str(p))
    try:
        _, f, _ = scanned.branch()
        assert f.entry(1)["id"] == "e2"
        with open(p, "r+b") as fh:  # same length, another id: an in-place rewrite
            data = fh.read()
            fh.seek(0)
            fh.write(data.replace(b'"id":"e2"', b'"id":"e9"'))
        f.lines.buf = b""  # drop the window read before the rewrite
        with pytest.raises(SourceChanged):
            f.entry(1)
    finally:
        scanned.fp.close()


def test_preview_reports_a_changed_source(tmp_path, monkeypatch):
    from fabric_lsp.engine.compaction import scan

    entries = link(
        [user("a"), assistant(call("c1", "read", {"path": "x"})), tool_result("c1", "read", "ok"), user("b")]
    )
    p = tmp_path / "s.jsonl"
    p.write_bytes(_lines(entries))

    def changed(self, i, stub=False):
        raise SourceChanged("test")

    monkeypatch.setattr(scan.ScanFacts, "entry", changed)
    with pytest.raises(PreviewError) as err:
        preview_compaction(str(p), keep_recent_tokens=1, context_window=0)
    assert err.value.code == "source_changed"


def test_facts_of_a_list_equal_facts_of_its_facts():
    b = link([user("g"), assistant(call("r", "read", {"path": "f"})), tool_result("r", "read", "y")])
    f = facts(b)
    assert facts(f) is f and len(f) == 3 and f.id(2) == "e3" and f.index("e2") == 1 and f.rindex("e2", 1) == -1


def test_preview_memory_does_not_grow_with_the_entries_decoded(tmp_path):
    """Tracemalloc peak of a preview of a generated 4 MB small-entry session, against the
    file size: the decoded entries are not kept. Measured: 0.98x (4.46x when every entry
    dict was kept); the bound leaves a wide margin both ways."""
    import importlib.util
    import sys
    from pathlib import Path

    name = "fabric_bench_corpus"  # bench/corpus.py is a script: load it by path (as tests/engine/corpus)
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[3] / "bench" / "corpus.py")
        assert spec is not None and spec.loader is not None
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    p = sys.modules[name].generate_tiny_session(
        tmp_path / "tiny.jsonl", target_bytes=4_000_000, seed="t", cwd="/home/user/projects/orbit"
    )
    size = p.stat().st_size
    preview_compaction(str(p), keep_recent_tokens=200)  # imports and caches outside the measurement
    tracemalloc.start()
    try:
        res = preview_compaction(str(p), keep_recent_tokens=200)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res["outcome"] == "compacted"
    assert peak < 2.5 * size, (peak, size)


@PROPS
@given(tree_file())
def test_run_walk_equals_the_node_walk(data):
    scanned = scan_session_bytes(data)
    n = len(scanned.nodes)
    if n == 0 or scanned.nodes.ids.has_duplicates():
        return
    for start in {0, n // 2, n - 1}:
        assert scanned._walk_runs(start) == scanned._walk(start)


def test_far_parents_switch_the_walk_to_one_map():
    """A branch that zigzags across the file (each parent far from its child) makes the
    near searches costly; the walk then maps every cell once. Same branch either way."""
    n = 3000
    order = [x for k in range(n // 2) for x in (k, n - 1 - k)]  # 0, n-1, 1, n-2, ...
    parent = {order[i + 1]: order[i] for i in range(n - 1)}  # walk: ... -> order[i+1] -> order[i]
    entries = [
        {
            "type": "custom",
            "customType": "s",
            "data": i,
            "id": f"{i:08x}",
            "parentId": f"{parent[i]:08x}" if i in parent else None,
        }
        for i in range(n)
    ]
    leaf = order[-1]
    data = _lines(entries)
    scanned = scan_session_bytes(data)
    runs, cycle = scanned._walk_runs(leaf)
    assert (runs, cycle) == scanned._walk(leaf) and not cycle
    assert sum(b - a for a, b in runs) == n
    used, f, err = scanned.branch(f"{leaf:08x}")
    loaded = load_session_bytes(data)
    assert [f.id(i) for i in range(len(f))] == [e["id"] for e in loaded.branch(f"{leaf:08x}")[1]]
