"""The one Fabric payload layer: both engines read execution traces, legacy audits and
branch-summary envelopes through `engine/fabric_payloads.py`, so what the compaction
preview lists is exactly what recall indexes and expand finds by operation address."""

from __future__ import annotations

import ast
import copy
import json
from pathlib import Path

import pytest

from fabric_lsp.engine import fabric_payloads
from fabric_lsp.engine.compaction.api import preview_compaction
from fabric_lsp.engine.compaction.normalize import normalize
from fabric_lsp.engine.fabric_payloads import (
    MISSING,
    operation_identity,
    read_branch_details,
    read_execution_trace,
)
from fabric_lsp.engine.memory.api import MemoryConfig
from fabric_lsp.engine.memory.entry_text import Normalizer
from fabric_lsp.engine.session.discovery import encode_cwd
from tests.support.wire import WireMemoryEngine

REPO = Path(__file__).resolve().parents[2]
ENGINE = REPO / "fabric_lsp" / "engine"
CWD = "/home/user/deep"
COUNTS = {"droppedValues": 0, "truncatedValues": 0, "redactedValues": 0, "droppedOperations": 0}


def _nest(levels: int) -> dict:
    """An `args` object whose deepest value sits `levels` containers down (args = 1)."""
    v: object = "leaf"
    for _ in range(levels - 1):
        v = {"k": v}
    return {"q": f"deep{levels}", "filter": v}


def _trace(levels: tuple[int, ...]) -> dict:
    ops = [
        {
            "type": "call",
            "sequence": seq,
            "ref": "mcp.github.search",
            "args": _nest(n),
            "outcome": "failed",
            "error": f"boom{n}",
        }
        for seq, n in enumerate(levels)
    ]
    return {
        "kind": "pi-fabric.execution",
        "version": 1,
        "outcome": "failed",
        "phases": ["Deep"],
        "operations": ops,
        "counts": dict(COUNTS),
    }


def _ts(s: int) -> str:
    return f"2025-01-01T00:00:{s:02d}.000Z"


def _rows(details: dict) -> list[dict]:
    return [
        {"type": "session", "version": 3, "id": "deep1", "timestamp": _ts(0), "cwd": CWD},
        {
            "type": "message",
            "id": "u1",
            "parentId": None,
            "timestamp": _ts(1),
            "message": {"role": "user", "content": "go deep", "timestamp": 1},
        },
        {
            "type": "message",
            "id": "a1",
            "parentId": "u1",
            "timestamp": _ts(2),
            "message": {
                "role": "assistant",
                "timestamp": 1,
                "content": [
                    {
                        "type": "toolCall",
                        "id": "k1",
                        "name": "fabric_exec",
                        "arguments": {"code": "x", "display": {"name": "Deep run"}},
                    }
                ],
            },
        },
        {
            "type": "message",
            "id": "r1",
            "parentId": "a1",
            "timestamp": _ts(3),
            "message": {
                "role": "toolResult",
                "toolCallId": "k1",
                "toolName": "fabric_exec",
                "isError": False,
                "content": [{"type": "text", "text": "done"}],
                "details": details,
                "timestamp": 1,
            },
        },
        {
            "type": "message",
            "id": "u2",
            "parentId": "r1",
            "timestamp": _ts(4),
            "message": {"role": "user", "content": "next", "timestamp": 1},
        },
    ]


def _write(tmp_path: Path, rows: list[dict]) -> tuple[Path, Path]:
    agent = tmp_path / "agent"
    folder = agent / "sessions" / encode_cwd(CWD)
    folder.mkdir(parents=True)
    path = folder / "2025-01-01T00-00-00-000Z_deep1.jsonl"
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows), encoding="utf-8")
    return agent, path


@pytest.mark.parametrize("levels", [(11, 12, 13), (14,)])
def test_deeply_nested_trace_is_listed_by_preview_and_expanded_by_address(tmp_path, levels):
    agent, path = _write(tmp_path, _rows({"trace": _trace(levels)}))
    preview = preview_compaction(path, keep_recent_tokens=1, context_window=0)
    assert preview["outcome"] == "compacted"
    addresses = [f"r1/{i}" for i in range(len(levels))]
    for address, n in zip(addresses, levels):
        assert f"- mcp.github.search → failed [entry {address}]" in preview["summary"]
        assert f"- mcp.github.search: boom{n} [entry {address}]" in preview["summary"]

    eng = WireMemoryEngine(MemoryConfig(), agent_dir=str(agent))
    out = eng.expand({"session": str(path), "operationAddresses": addresses})
    assert "error" not in out, out
    got = {e["operationAddress"]: e for e in out["expanded"]}
    assert sorted(got) == addresses
    for address, n in zip(addresses, levels):
        assert got[address]["operation"]["args"] == _nest(n)
        assert got[address]["role"] == "fabricOperation" and got[address]["isError"] is True
    # recall indexes the same children
    hits = eng.recall({"query": "deep" + str(levels[-1]), "scope": f"session:{path}"}, cwd=CWD)
    matches = [m for it in hits["items"] for m in it["segment"]["exactMatches"]]
    assert [m["operationAddress"] for m in matches] == [addresses[-1]]


def test_a_trace_nested_too_deep_is_absent_for_both_engines(tmp_path):
    agent, path = _write(tmp_path, _rows({"trace": _trace((13, 15))}))
    preview = preview_compaction(path, keep_recent_tokens=1, context_window=0)
    assert "r1/0" not in preview["summary"] and "r1/1" not in preview["summary"]
    eng = WireMemoryEngine(MemoryConfig(), agent_dir=str(agent))
    out = eng.expand({"session": str(path), "operationAddresses": ["r1/0"]})
    assert out["error"]["code"] == "address_not_found"


def _events(details: dict) -> list[dict]:
    return [ev for ev in normalize(_rows(details)[1:]) if ev["type"] == "fabricOperation"]


def _records(details: dict) -> list[dict]:
    norm = Normalizer("/x.jsonl", "deep1", max_entry_chars=None, index_thinking=False, index_tool_output=True)
    out = []
    for i, row in enumerate(_rows(details)[1:], 1):
        out.extend(r for r in norm.feed(row, i) if r["role"] == "fabricOperation")
    return out


def test_legacy_audits_are_read_by_compaction_only():
    """The one place the reference's engines differ: memory ignores `details.audits`."""
    details = {"audits": [{"ref": "pi.read", "args": {"path": "a.md"}, "success": True}]}
    assert read_execution_trace(details, legacy_audits=True)["source"] == "legacy"
    assert read_execution_trace(details, legacy_audits=False) is None
    assert [ev["address"] for ev in _events(details)] == ["r1/0"]
    assert _records(details) == []
    # a `trace` key never falls back to the audits, for either engine
    bad = {"trace": {"kind": "pi-fabric.execution"}, **details}
    assert read_execution_trace(bad, legacy_audits=True) is None and _events(bad) == [] and _records(bad) == []


def test_both_engines_agree_on_trace_validity_and_identity():
    base = _trace((3,))
    cases = []
    for mutate in (
        lambda t: None,
        lambda t: t.update(extra=1),
        lambda t: t["counts"].pop("droppedValues"),
        lambda t: t["operations"][0].update(sequence=-1),
        lambda t: t["operations"][0].update(args={"x": float("inf")}),
        lambda t: t["operations"][0].update(result=_nest(15)),
        lambda t: t["operations"][0].update(result=_nest(14)),
        lambda t: t["operations"][0].update(args={"big": "x" * 524288}),
        lambda t: t["operations"][0].update(args={"big": "x" * 523900}),
        lambda t: t["operations"][0].update(provider="pi", ref="pi"),
        lambda t: t["operations"][0].update(provider="pi", ref="pi.read"),
        lambda t: t["operations"][0].update(ref="mcp.github.search", provider="x"),
    ):
        t = copy.deepcopy(base)
        mutate(t)
        cases.append(t)
    for t in cases:
        events = _events({"trace": t})
        records = _records({"trace": t})
        assert [e["address"] for e in events] == [r["operationAddress"] for r in records]
        assert [e["tool"] for e in events] == [r["toolName"] for r in records]


def test_operation_identity_is_the_spec_rule():
    assert operation_identity("mcp.github.search", None, None) == ("mcp", "github.search", "github.search")
    assert operation_identity("pi.read", None, None) == ("pi", "read", "read")
    assert operation_identity("agents", None, None) == (None, None, "agents")
    assert operation_identity(".x", None, None) == (None, None, ".x")
    assert operation_identity("x.", None, None) == (None, None, "x.")
    assert operation_identity("a.b", "p", None) == ("p", "b", "b")
    # provider `pi` without an action has no tool (JS: undefined), in both engines
    assert operation_identity("pi", "pi", None) == ("pi", None, None)
    assert operation_identity("pi.", None, None) == (None, None, "pi.")


def test_pi_operation_without_action_renders_as_javascript_does():
    t = _trace((2,))
    t["operations"][0].update(ref="pi", provider="pi")
    ev = _events({"trace": t})[0]
    assert ev["tool"] is None and "action" not in ev
    rec = _records({"trace": t})[0]
    assert rec["toolName"] is None


def test_trace_operations_carry_missing_result_and_none_error():
    t = _trace((2,))
    t["operations"][0].pop("error")
    op = read_execution_trace({"trace": t}, legacy_audits=False)["operations"][0]
    assert op["result"] is MISSING and op["error"] is None
    t["operations"][0]["result"] = None
    assert read_execution_trace({"trace": t}, legacy_audits=False)["operations"][0]["result"] is None


def _envelope(version: int = 2, **over) -> dict:
    env = {
        "kind": "pi-fabric.branch-summary",
        "version": version,
        "source": {"firstEntryId": "u1", "lastEntryId": "r1", "entryCount": 3, "oldLeafId": None},
        "facts": [{"kind": "user", "entryId": "u1", "subordinal": "user", "address": "u1/user", "text": "hi"}],
        "omittedFacts": 0,
        "sections": [],
        "request": {"text": "", "sourceBytes": 0, "truncated": False},
    }
    env.update(over)
    return env


def test_one_branch_envelope_reader_with_one_shape():
    from fabric_lsp.engine.compaction import normalize

    assert normalize.read_branch_details is read_branch_details  # the compaction side reads with the same one
    env = _envelope()
    assert read_branch_details(env) is env
    assert read_branch_details(_envelope(1))["version"] == 1
    run = {
        "kind": "fabricRun",
        "entryId": "a",
        "subordinal": "call:k",
        "address": "a/call:k",
        "name": "N",
        "outcome": "succeeded",
    }
    assert read_branch_details(_envelope(1, facts=[run])) is None
    assert read_branch_details(_envelope(2, facts=[run])) is not None
    # JS whitespace decides a blank run name (\x1c is whitespace to Python, not to JS)
    assert read_branch_details(_envelope(2, facts=[dict(run, name="\u2028 ")])) is None
    assert read_branch_details(_envelope(2, facts=[dict(run, name="\x1c")])) is not None
    assert read_branch_details(_envelope(request={"text": ""})) is None


def test_memory_reads_branch_facts_through_the_same_reader():
    env = _envelope()
    norm = Normalizer("/x.jsonl", "s", max_entry_chars=None, index_thinking=False, index_tool_output=True)
    carrier = {
        "type": "branch_summary",
        "id": "bs",
        "parentId": None,
        "timestamp": _ts(1),
        "fromId": "u1",
        "summary": "",
        "details": env,
    }
    recs = norm.feed(carrier, 1)
    assert [r["role"] for r in recs] == ["branchSummary", "branchUser"]
    norm2 = Normalizer("/x.jsonl", "s", max_entry_chars=None, index_thinking=False, index_tool_output=True)
    assert [r["role"] for r in norm2.feed(dict(carrier, details=_envelope(request={"text": ""})), 1)] == [
        "branchSummary"
    ]


# --------------------------------------------------------------- one rule, one place


def _defs(name: str) -> list[str]:
    found = []
    for path in (REPO / "fabric_lsp").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                found.append(str(path.relative_to(REPO)))
    return found


@pytest.mark.parametrize(
    "name, home",
    [
        ("has_unpaired_surrogate", "fabric_lsp/engine/jsstr.py"),
        ("js_stringify", "fabric_lsp/engine/jsstr.py"),
        ("content_text", "fabric_lsp/engine/session/content.py"),
        ("read_execution_trace", "fabric_lsp/engine/fabric_payloads.py"),
        ("read_branch_details", "fabric_lsp/engine/fabric_payloads.py"),
        ("operation_identity", "fabric_lsp/engine/fabric_payloads.py"),
        ("valid_trace_v1", "fabric_lsp/engine/fabric_payloads.py"),
        ("read_header", "fabric_lsp/engine/session/reader.py"),
        ("resolve_session", "fabric_lsp/engine/session/discovery.py"),
    ],
)
def test_each_rule_is_defined_once(name, home):
    assert _defs(name) == [home]


def test_duplicates_are_gone():
    for gone in ("memory/fabric_details.py", "memory/jsvalues.py"):
        assert not (ENGINE / gone).exists()
    for name in (
        "_text_parts",
        "_text_of_parts",
        "split_ref",
        "_op_identity",
        "_valid_trace_v1",
        "js_stringify_bytes_len",
    ):
        assert _defs(name) == [], name
    assert fabric_payloads.read_execution_trace.__module__ == "fabric_lsp.engine.fabric_payloads"
