"""Fabric execution-trace children and branch-summary fact children (v1 and v2)."""

from __future__ import annotations

import copy
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from memory_kit import assistant, engine, header, tool_result, ts, user, write_session

from fabric_lsp.engine.jsstr import js_stringify
from fabric_lsp.engine.memory.entry_text import _OPERATION_JSON_BOUND, Normalizer

CWD = "/home/user/fab"

TRACE = {
    "kind": "pi-fabric.execution",
    "version": 1,
    "outcome": "failed",
    "phases": ["Inspect", "Verify"],
    "operations": [
        {
            "type": "call",
            "sequence": 0,
            "ref": "pi.read",
            "provider": "pi",
            "action": "read",
            "args": {"path": "docs/a.md"},
            "outcome": "succeeded",
        },
        {
            "type": "call",
            "sequence": 1,
            "ref": "pi.write",
            "provider": "pi",
            "action": "write",
            "args": {"path": "docs/new.md"},
            "outcome": "succeeded",
            "result": {"created": True},
        },
        {
            "type": "call",
            "sequence": 2,
            "ref": "pi.bash",
            "provider": "pi",
            "action": "bash",
            "args": {"command": "pnpm test"},
            "outcome": "failed",
            "failureStage": "invoke",
            "error": "Call failed during invoke: exit 1",
        },
        {"type": "call", "sequence": 3, "ref": "mcp.github.search", "args": {}, "outcome": "succeeded"},
    ],
    "counts": {"droppedValues": 0, "truncatedValues": 0, "redactedValues": 0, "droppedOperations": 0},
    "error": "Execution failed",
}


def _facts_envelope(version: int, facts: list) -> dict:
    return {
        "kind": "pi-fabric.branch-summary",
        "version": version,
        "source": {"firstEntryId": "u1", "lastEntryId": "r1", "entryCount": 3, "oldLeafId": "r1"},
        "facts": facts,
        "omittedFacts": 0,
        "sections": ["[Session Goal]"],
        "request": {"text": "", "sourceBytes": 0, "truncated": False},
    }


FACTS = [
    {"kind": "user", "entryId": "u1", "subordinal": "user", "address": "u1/user", "text": "rare goal zebra"},
    {"kind": "phase", "entryId": "r1", "subordinal": "0", "address": "r1/0", "phase": "Inspect"},
    {
        "kind": "operation",
        "entryId": "r1",
        "subordinal": "1",
        "address": "r1/1",
        "ref": "pi.edit",
        "provider": "pi",
        "action": "edit",
        "tool": "edit",
        "args": {"path": "src/z.ts"},
        "outcome": "failed",
        "error": "no match",
    },
    {
        "kind": "customMessage",
        "entryId": "c1",
        "subordinal": "custom-message",
        "address": "c1/custom-message",
        "customType": "note",
        "text": "kept note",
        "display": True,
    },
]
RUN_FACT = {
    "kind": "fabricRun",
    "entryId": "a2",
    "subordinal": "call:k1",
    "address": "a2/call:k1",
    "name": "Audit",
    "description": "check all",
    "outcome": "succeeded",
}


def _rows(details_version: int = 2, facts=None, extra=()):
    facts = FACTS + ([RUN_FACT] if details_version == 2 else []) if facts is None else facts
    return [
        header("fab1", CWD),
        user("u1", None, "run the fabric audit", 1),
        assistant("a1", "u1", [{"type": "toolCall", "id": "k1", "name": "fabric_exec", "arguments": {"code": "x"}}], 2),
        tool_result(
            "r1", "a1", "k1", "fabric_exec", "outer prose poison", 3, details={"success": False, "trace": TRACE}
        ),
        {
            "type": "branch_summary",
            "id": "bs1",
            "parentId": "r1",
            "timestamp": ts(4),
            "fromId": "u1",
            "summary": "prose never indexed",
            "details": _facts_envelope(details_version, facts),
        },
        *extra,
    ]


def test_trace_children_follow_their_carrier(tmp_path: Path):
    agent = tmp_path / "agent"
    path = write_session(agent, CWD, "f.jsonl", _rows())
    eng = engine(agent)
    out = eng.expand({"session": str(path), "entryRange": {"first": 0, "last": 7}})
    got = [
        (e["index"], e["entryId"], e["role"], e.get("toolName"), e.get("operationAddress"), e["isError"])
        for e in out["expanded"]
    ]
    assert got[:7] == [
        (0, "u1", "user", None, None, False),
        (1, "a1", "assistant", "fabric_exec", None, False),
        (2, "r1", "toolResult", "fabric_exec", None, False),
        (3, "r1/0", "fabricOperation", "read", "r1/0", False),
        (4, "r1/1", "fabricOperation", "write", "r1/1", False),
        (5, "r1/2", "fabricOperation", "bash", "r1/2", True),
        (6, "r1/3", "fabricOperation", "github.search", "r1/3", False),
    ]
    texts = {e["index"]: e["text"] for e in out["expanded"]}
    assert texts[3] == (
        'Fabric operation pi.read\n{"address":"r1/0","parentEntryId":"r1","sequence":0,"tool":"read",'
        '"ref":"pi.read","provider":"pi","action":"read","args":{"path":"docs/a.md"},"outcome":"succeeded"}'
    )
    assert '"result":{"created":true}' in texts[4]
    assert '"provider":"mcp","action":"github.search"' in texts[6]
    assert all(e["line"] == 3 for e in out["expanded"][2:7])
    # Expand by operation address, and recall finds operation args but not prose poison.
    one = eng.expand({"session": str(path), "operationAddresses": ["r1/2"]})
    assert [e["index"] for e in one["expanded"]] == [5]
    hit = eng.recall({"query": "pnpm", "scope": "project"}, cwd=CWD)
    exact = hit["items"][0]["segment"]["exactMatches"]
    assert {"index": 5, "entryId": "r1/2", "operationAddress": "r1/2"} in exact


def test_tool_output_privacy_drops_operation_results(tmp_path: Path):
    agent = tmp_path / "agent"
    write_session(agent, CWD, "f.jsonl", _rows())
    eng = engine(agent, index_tool_output=False)
    out = eng.recall({"scope": "project"}, cwd=CWD)
    texts = [e["text"] for it in out["items"] for e in it["segment"]["entries"]]
    assert "toolResult(fabric_exec)" in texts  # prefix only, no body
    assert any('"resultOmitted":true' in t for t in texts)
    assert eng.recall({"query": "poison", "scope": "project"}, cwd=CWD)["items"] == []


def test_branch_facts_v2_v1_and_dedupe(tmp_path: Path):
    agent = tmp_path / "agent"
    nested = {
        "type": "branch_summary",
        "id": "bs2",
        "parentId": "bs1",
        "timestamp": ts(5),
        "fromId": "bs1",
        "summary": "again",
        "details": _facts_envelope(2, copy.deepcopy(FACTS)),
    }
    path = write_session(agent, CWD, "f.jsonl", _rows(extra=[nested]))
    eng = engine(agent)
    out = eng.expand({"session": str(path), "entryRange": {"first": 7, "last": 13}})
    got = [(e["entryId"], e["role"], e.get("operationAddress"), e["text"]) for e in out["expanded"]]
    assert got[0] == ("bs1", "branchSummary", None, "")
    assert got[1] == ("u1/user", "branchUser", None, "rare goal zebra")
    assert got[2] == ("r1/0", "fabricPhase", None, "Fabric phase Inspect")
    assert got[3][0:3] == ("r1/1", "fabricOperation", "r1/1") and got[3][3].startswith(
        "Fabric branch operation pi.edit\n"
    )
    assert got[4] == ("c1/custom-message", "branchCustomMessage", None, "[note] kept note")
    assert got[5] == ("a2/call:k1", "fabricRun", "a2/call:k1", "Fabric run Audit — check all → succeeded")
    assert got[6] == ("bs2", "branchSummary", None, "")  # nested duplicate facts are skipped
    assert len(out["expanded"]) == 7
    # Fact addresses collide with trace ops (r1/0, r1/1): index coverage says so.
    rec = eng.recall({"query": "zebra", "scope": "project"}, cwd=CWD)
    assert rec["items"] and "duplicate_operation_address" in rec["coverage"]["reasons"]
    assert "duplicate_entry_id" in rec["coverage"]["reasons"]
    # v1 envelopes read too; a v1 envelope with a fabricRun fact is invalid.
    path1 = write_session(agent, "/v1", "g.jsonl", _rows(details_version=1))
    out1 = eng.expand({"session": str(path1), "entryIds": ["u1/user"]})
    assert out1["expanded"][0]["text"] == "rare goal zebra"
    bad = write_session(agent, "/v1bad", "h.jsonl", _rows(details_version=1, facts=FACTS + [RUN_FACT]))
    assert eng.expand({"session": str(bad), "entryIds": ["u1/user"]})["error"]["code"] == "address_not_found"


def test_duplicate_fact_address_rejects_the_envelope(tmp_path: Path):
    agent = tmp_path / "agent"
    dup = FACTS[2:3] + [dict(FACTS[2])]
    write_session(agent, CWD, "f.jsonl", _rows(facts=dup))
    out = engine(agent).recall({"scope": "project", "query": "zebra"}, cwd=CWD)
    assert {"duplicate_branch_fact_address", "duplicate_operation_address"} <= set(out["coverage"]["reasons"])


def test_malformed_trace_gives_no_children(tmp_path: Path):
    agent = tmp_path / "agent"
    bad = copy.deepcopy(TRACE)
    bad["operations"][1]["sequence"] = 0  # not strictly increasing
    rows = _rows()
    rows[3] = tool_result("r1", "a1", "k1", "fabric_exec", "outer", 3, details={"success": False, "trace": bad})
    path = write_session(agent, CWD, "f.jsonl", rows)
    out = engine(agent).expand({"session": str(path), "operationAddresses": ["r1/0"]})
    assert out["error"]["code"] == "address_not_found"


def test_trace_and_fact_records_fit_the_result_structs_exactly(tmp_path: Path):
    """Expand's structural detail (operation, parentEntryId, branchFact, carrier ids, ...)
    and recall's exact matches are declared by protocol.py: the Struct every face encodes
    keeps each key, its order and its value type."""
    from fabric_lsp import protocol
    from tests.test_wire_results import round_trip

    agent = tmp_path / "agent"
    path = write_session(agent, CWD, "f.jsonl", _rows())
    eng = engine(agent)
    count = eng.sessions({"scope": "project"}, cwd=CWD)["sessions"][0]["entryCount"]
    out = eng.expand({"session": str(path), "entryRange": {"first": 0, "last": count - 1}})
    keys = {k for e in out["expanded"] for k in e}
    assert {"operation", "parentEntryId", "branchFact", "factAddress", "carrierEntryId", "filesTouched"} <= keys
    assert round_trip(out, protocol.ExpandResult) == out
    hit = eng.recall({"query": "pnpm", "scope": "project"}, cwd=CWD)
    assert round_trip(hit, protocol.RecallResult) == hit


@given(filler=st.sampled_from(["a", "é", "€", "😀"]), over=st.integers(-3, 3))
def test_an_operation_keeps_its_result_up_to_the_json_bound_in_utf8_bytes(filler, over):
    """An operation's result is kept while the operation's JSON.stringify is at most
    _OPERATION_JSON_BOUND UTF-8 bytes (characters of 1 to 4 bytes), else replaced by
    `resultOmitted`; the JSON returned is the operation's as it ends up."""
    norm = Normalizer("f.jsonl", "s", max_entry_chars=None, index_thinking=False, index_tool_output=True)
    base = {"address": "r1/0", "tool": "read", "args": {}, "outcome": "succeeded"}
    empty = len(js_stringify({**base, "result": ""}).encode())
    width = len(filler.encode())
    count = (_OPERATION_JSON_BOUND - empty) // width + over
    op = dict(base)
    json = norm._bounded_operation(op, True, filler * count)
    size = empty + width * count
    if size <= _OPERATION_JSON_BOUND:
        assert op["result"] == filler * count and "resultOmitted" not in op
    else:
        assert "result" not in op and op["resultOmitted"] is True
    assert json == js_stringify(op)
