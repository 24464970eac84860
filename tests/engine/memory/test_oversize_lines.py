"""Lines over the line limit (`source.MAX_LINE_BYTES`, 64 MiB): read like every other
line (the branch through them stays whole), decoded only up to a cut, and named in
coverage as `max_line_bytes` (issue 30, finding 4).

The limit is lowered here (monkeypatched) so the rules run on small files; the real
64 MiB limit is exercised through the server in tests/e2e/test_lsp_oversize_lines.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from memory_kit import assistant, engine, header, tool_result, user, write_session

from fabric_lsp.engine.memory import source, state_build
from fabric_lsp.engine.memory.api import MemoryConfig
from fabric_lsp.engine.memory.append import try_append
from fabric_lsp.engine.memory.expand import ExpandConfig
from fabric_lsp.engine.memory.json_line import cut_json, cut_note
from fabric_lsp.engine.memory.source import decode_json_line, lineage_from_lines, scan_source, stat_key
from fabric_lsp.engine.memory.state_build import build_state, digest_from_hot
from fabric_lsp.engine.session.reader import MAX_JSON_DEPTH
from tests.support.examples import profile_examples

EXAMPLES = int(os.environ.get("FABRIC_FUZZ_EXAMPLES") or profile_examples(300))
SMALL_LIMIT = 6000  # the lowered line limit: every line longer than this is "oversize"


def same(a: Any, b: Any) -> bool:
    """Equal values of equal JSON types (True is not 1, 1 is not 1.0, key order counts)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


# ------------------------------------------------------------------ JSON line strategies

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
)
values = st.recursive(
    scalars, lambda c: st.lists(c, max_size=5) | st.dictionaries(st.text(max_size=8), c, max_size=5), max_leaves=20
)
big_text = st.builds(lambda unit, n: unit * n, st.text(min_size=1, max_size=12), st.integers(0, 900))


@st.composite
def entry_objects(draw: Any) -> dict:
    """Pi-shaped entries whose texts may be long, with members in any order."""
    text = draw(big_text)
    members: dict[str, Any] = {
        "type": draw(st.sampled_from(["message", "custom_message", "custom", "compaction"])),
        "id": draw(st.text(min_size=1, max_size=10)),
        "parentId": draw(st.none() | st.text(max_size=10)),
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {
            "role": draw(st.sampled_from(["user", "assistant", "toolResult"])),
            "toolName": "bash",
            "content": [{"type": "text", "text": text}] + draw(st.lists(values, max_size=3)),
            "details": draw(values),
            "isError": draw(st.booleans()),
        },
        "extra": draw(st.lists(big_text, max_size=3)),
    }
    keys = draw(st.permutations(list(members)))
    return {k: members[k] for k in keys}


def dump(value: Any, ascii_only: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":")).encode("utf-8", "surrogatepass")


NASTY = [
    b"\\",
    b'"',
    b"\xff",
    b"\xed\xa0\x80",
    b"\x01",
    b"[",
    b"]",
    b"{",
    b"}",
    b",",
    b":",
    b"\\ud800",
    b"\\udc00",
    b"\\ud83d\\ude00",
    b"\\\\",
    b"1e999",
    b"NaN",
    b" ",
    b"\n",
]


@st.composite
def json_lines(draw: Any) -> bytes:
    """Serialized JSON (any value, lone surrogates escaped), often mutated: invalid
    bytes, broken escapes, lone surrogate escapes, truncation, nesting about the depth
    cap, numbers out of range."""
    value = draw(values | entry_objects())
    line = dump(value, draw(st.booleans()))
    if draw(st.integers(0, 4)) == 0:
        depth = draw(st.integers(MAX_JSON_DEPTH - 2, MAX_JSON_DEPTH + 2))
        line = b"[" * depth + line + b"]" * depth
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(line)))
        kind = draw(st.integers(0, 2))
        if kind == 0:
            line = line[:at] + draw(st.sampled_from(NASTY)) + line[at:]
        elif kind == 1:
            line = line[:at] + line[at + draw(st.integers(1, 4)) :]
        else:
            line = line[:at]
    return line


# ------------------------------------------------------------------ the cut decoder


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_lines())
@example(b'{"a":"\\ud800","id":"x"}')
@example(b'{"\\udc00":1,"b":"\\\\ud800"}')
@example(b'{"a":"\xff\xfe","b":["\\ud83d\\ude00"]}')
@example(b'{"a":"\xc2\\ud800\x80"}')
@example(b"[" + b"1" * 5000 + b"]")
@example(b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH)
@example(b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1))
@example(b'["[[[[' + b"[" * 600 + b'"]')
def test_cut_json_agrees_with_the_full_decode_on_lines_that_fit(line: bytes):
    """A line no longer than the cut's budget is decoded whole, exactly as every other
    line: same verdict (parsed or not, the depth cap included), same value."""
    want = decode_json_line(line)
    got = cut_json(line, budget=len(line), limit=1)
    assert got[0] is want[0], (line, got, want)
    assert same(got[1], want[1]), (line, got, want)


def is_cut(cut: Any, full: Any, note: str) -> bool:
    """`cut` is `full` with strings cut to a prefix (+ `note`) and members dropped."""
    if isinstance(full, str) and isinstance(cut, str):
        return cut == full or (cut.endswith(note) and full.startswith(cut[: -len(note)]))
    if type(cut) is not type(full):
        return False
    if isinstance(full, dict):
        keys = [k for k in full if k in cut]
        return list(cut) == keys and all(is_cut(cut[k], full[k], note) for k in keys)
    if isinstance(full, list):
        at = 0
        for item in cut:  # an ordered subsequence (cut items may differ from their originals)
            while at < len(full) and not is_cut(item, full[at], note):
                at += 1
            if at == len(full):
                return False
            at += 1
        return True
    return same(cut, full)


def string_chars(value: Any, note: str) -> int:
    if isinstance(value, str):
        return len(value) - (len(note) if value.endswith(note) else 0)
    if isinstance(value, dict):
        return sum(string_chars(v, note) for v in value.values())
    if isinstance(value, list):
        return sum(string_chars(v, note) for v in value)
    return 0


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entry_objects(), st.booleans(), st.data())
def test_a_cut_entry_keeps_its_envelope_and_prefixes_of_its_texts(entry: dict, ascii_only: bool, data: Any):
    line = dump(entry, ascii_only)
    budget = data.draw(st.integers(0, len(line)))
    ok, full = decode_json_line(line)
    assert ok
    parsed, value = cut_json(line, budget=budget, limit=7)
    assert parsed is True and isinstance(value, dict)
    note = cut_note(len(line), 7)
    assert is_cut(value, full, note)
    for key in ("type", "id", "parentId"):  # the lineage never depends on the budget
        assert same(value[key], full[key])
    # what is decoded stays within the budget (plus the envelope, read whatever it costs)
    assert string_chars(value, note) <= budget + 3 * 4096
    if budget >= len(line):
        assert same(value, full)


def test_a_cut_text_is_a_clean_prefix_and_says_where_the_rest_is():
    text = 'é€😀\\"x' * 50_000
    line = dump(
        {
            "type": "message",
            "id": "big",
            "parentId": "p",
            "message": {
                "role": "toolResult",
                "toolName": "bash",
                "content": [{"type": "text", "text": text}],
                "isError": True,
            },
        },
        False,
    )
    for budget in range(1000, 1040):  # every cut point, mid UTF-8 sequence and mid escape included
        ok, value = cut_json(line, budget=budget, limit=SMALL_LIMIT)
        cut = value["message"]["content"][0]["text"]
        note = cut_note(len(line), SMALL_LIMIT)
        assert ok and cut.endswith(note) and text.startswith(cut[: -len(note)]) and len(cut) > len(note) + 300
        assert value["message"]["isError"] is True and value["message"]["role"] == "toolResult"
    assert f"{len(line):,} bytes" in note and f"{SMALL_LIMIT:,} bytes" in note
    assert "64 MiB" in cut_note(70 << 20, 64 << 20)


def test_an_oversize_line_is_checked_whole():
    """Everything after the cut is still checked: a line Pi would not parse is no entry."""
    good = dump({"type": "custom", "id": "x", "parentId": None, "data": "a" * 50_000}, True)
    assert cut_json(good, budget=100, limit=1)[0] is True
    for bad in (
        good[:-1],
        good[:-3] + b"\x01" + good[-3:],
        good[:40_000] + b"\\x" + good[40_000:],
        good[:-1] + b',"n":NaN}',
        good + b"x",
    ):
        assert cut_json(bad, budget=100, limit=1) == (False, None), bad[-20:]
    deep = (
        b'{"type":"custom","id":"x","parentId":null,"d":' + b"[" * 600 + b'"' + b"z" * 50_000 + b'"' + b"]" * 600 + b"}"
    )
    assert cut_json(deep, budget=100, limit=1) == (False, None)
    # a lone surrogate escape far after the cut is JSON (JSON.parse reads it)
    lone = good[:-2] + b'\\ud800"}'
    ok, value = cut_json(lone, budget=100, limit=1)
    assert ok and value["id"] == "x" and value["data"].endswith(cut_note(len(lone), 1))


# ------------------------------------------------------------------ the line scan


def rows_with_big_lines(sizes: list[int]) -> list[dict]:
    rows: list[dict] = [header("s1", "/w"), user("u1", None, "start here", 1)]
    parent = "u1"
    for k, size in enumerate(sizes):
        call = f"c{k}"
        rows.append(
            assistant(
                f"a{k}",
                parent,
                [{"type": "toolCall", "id": call, "name": "bash", "arguments": {"command": "cat log"}}],
                2,
            )
        )
        rows.append(
            tool_result(
                f"r{k}",
                f"a{k}",
                call,
                "bash",
                "logline " * (size // 8) + f"TAIL{k}",
                3,
                details={"path": "/tmp/log", "blob": "z" * (size // 2)},
            )
        )
        parent = f"r{k}"
    rows.append(assistant("z1", parent, [{"type": "text", "text": "after the big lines"}], 4))
    rows.append(user("z2", "z1", "last words", 5))
    return rows


def columns(scan: source.SourceScan) -> tuple:
    lines = scan.lines
    return (
        list(lines.ordinal),
        list(lines.line),
        list(lines.offset),
        list(lines.length),
        list(lines.type),
        list(lines.id),
        list(lines.parent),
        bytes(lines.node),
        scan.header_id,
        scan.next_ordinal,
        scan.end_offset,
    )


@settings(max_examples=max(20, EXAMPLES // 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 30_000), min_size=1, max_size=4), st.sampled_from([None, "keep"]))
def test_the_scan_reads_oversize_lines_as_the_lines_they_are(sizes: list[int], keep: Any):
    """With a low limit, the scan's lineage columns are those of the full decode; the
    long lines (and only they) are listed as oversize."""
    data = b"".join(dump(r, False) + b"\n" for r in rows_with_big_lines(sizes))
    full = scan_source(data, keep={} if keep else None)
    saved = source.MAX_LINE_BYTES
    source.MAX_LINE_BYTES = SMALL_LIMIT
    try:
        kept: dict[int, Any] = {}
        low = scan_source(data, keep=kept if keep else None)
    finally:
        source.MAX_LINE_BYTES = saved
    assert columns(low) == columns(full)
    long_lines = [n for n, ln in enumerate(data.split(b"\n")[:-1]) if len(ln) > SMALL_LIMIT]
    assert list(low.lines.oversize) == long_lines and list(full.lines.oversize) == []
    if keep:  # the cut values are kept for the records, like every other content line
        assert all(isinstance(kept[ln.ordinal], dict) for ln in low.lines if ln.type == "message")
    lineage = lineage_from_lines(low.lines, "active")[0]
    assert lineage.ids[0] == "u1" and lineage.ids[-2:] == ["z1", "z2"] and len(lineage.ids) == 3 + 2 * len(sizes)
    assert source.oversize_reasons(low) == (["max_line_bytes"] if long_lines else [])


# ------------------------------------------------------------------ builds, recall, expand


@pytest.fixture
def low_limit(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(source, "MAX_LINE_BYTES", SMALL_LIMIT)
    return SMALL_LIMIT


def big_session(agent: Path, size: int = 40_000) -> Path:
    return write_session(agent, "/w", "2025-01-01T00-00-00-000Z_s1.jsonl", rows_with_big_lines([size]))


@pytest.mark.parametrize("tier", ["hot", "cold"])
@pytest.mark.parametrize("branches", ["active", "all"])
def test_a_build_keeps_the_branch_whole_and_names_the_cut(
    tmp_path: Path, low_limit: int, tier: str, branches: str, monkeypatch: pytest.MonkeyPatch
):
    path = big_session(tmp_path / "agent")
    cfg = MemoryConfig(max_entry_chars=1_000_000)
    state = build_state(str(path), branches, tier, cfg, ref_id="s1", ref_cwd="/w")
    assert "max_line_bytes" in state.coverage["reasons"] and state.coverage["complete"] is False
    if branches == "active":
        assert state.lineage.ids == ["u1", "a0", "r0", "z1", "z2"]
    if tier == "hot":
        assert [e["entryId"] for e in state.entries] == ["u1", "a0", "r0", "z1", "z2"]
        text = state.entries[2]["text"]
        line = path.read_bytes().split(b"\n")[3]
        assert text.startswith("toolResult(bash): logline logline") and text.endswith(cut_note(len(line), low_limit))
        assert len(text) < low_limit + 1000
        cold = digest_from_hot(state, cfg)  # a hot state leaving the tier keeps the reason
        assert cold is not None and "max_line_bytes" in cold.coverage["reasons"]
    # the streaming build (a file over the single-pass bound) says the same
    monkeypatch.setattr(state_build, "SINGLE_PASS_MAX_BYTES", 0)
    streamed = build_state(str(path), branches, tier, cfg, ref_id="s1", ref_cwd="/w")
    assert streamed.coverage == state.coverage and streamed.lineage.fingerprint == state.lineage.fingerprint


def test_an_appended_oversize_line_is_named_and_extends_the_branch(tmp_path: Path, low_limit: int):
    agent = tmp_path / "agent"
    rows = rows_with_big_lines([])
    path = write_session(agent, "/w", "2025-01-01T00-00-00-000Z_s1.jsonl", rows)
    cfg = MemoryConfig()
    state = build_state(str(path), "active", "hot", cfg, ref_id="s1", ref_cwd="/w")
    assert "max_line_bytes" not in state.coverage["reasons"]
    more = [tool_result("r9", "z2", "c9", "bash", "tail " * 5000 + "APPENDEND", 6), user("z3", "r9", "after it", 7)]
    with open(path, "ab") as fh:
        fh.write(b"".join(dump(r, False) + b"\n" for r in more))
    key = stat_key(str(path))
    assert key is not None and try_append(state, key, cfg)
    assert state.lineage.ids[-2:] == ["r9", "z3"]
    assert "max_line_bytes" in state.coverage["reasons"]


def test_recall_and_expand_through_the_engine(tmp_path: Path, low_limit: int):
    agent = tmp_path / "agent"
    path = big_session(agent)
    eng = engine(agent, index_dir=str(tmp_path / "index"), max_entry_chars=1_000_000)
    out = eng.recall({"query": "after", "scope": f"session:{path}"})
    assert out["authoritative"] is False and "max_line_bytes" in out["coverage"]["reasons"]
    none = eng.recall({"query": "zzqnowhere", "scope": f"session:{path}"})
    assert none["authoritative"] is False and none["text"].startswith('No indexed matches for "zzqnowhere"')
    assert "max_line_bytes" in none["text"]
    browse = eng.recall({"scope": f"session:{path}", "pageSize": 100})
    assert [e["entryId"] for item in browse["items"] for e in item["segment"]["entries"]] == [
        "u1",
        "a0",
        "r0",
        "z1",
        "z2",
    ]
    got = eng.expand({"session": str(path), "entryIds": ["a0", "r0", "z1"]})
    by_id = {e["entryId"]: e for e in got["expanded"]}
    assert by_id["z1"]["text"] == "after the big lines" and by_id["a0"]["text"] == 'Tool: bash({"command":"cat log"})'
    assert by_id["r0"]["text"].endswith("the rest is in the file]") and "TAIL0" not in by_id["r0"]["text"]
    assert by_id["r0"]["line"] == 3
    # decoded whole (the real limit), the file has the same entries, and the cut text is
    # a prefix of the whole one
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(source, "MAX_LINE_BYTES", 64 << 20)
        whole = build_state(str(path), "active", "hot", ExpandConfig(MemoryConfig()), ref_id="s1", ref_cwd="/w")
    assert [e["entryId"] for e in whole.entries] == ["u1", "a0", "r0", "z1", "z2"]
    note = cut_note(len(path.read_bytes().split(b"\n")[3]), low_limit)
    assert whole.entries[2]["text"].endswith("TAIL0")
    assert whole.entries[2]["text"].startswith(by_id["r0"]["text"][: -len(note)])
