"""The `recall`, `expand` and `sessions` subcommands (in-process through cli.main)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from memory_kit import DEMO_MTIME, demo_rows, write_session

from fabric_lsp.cli import main

CWD = "/home/user/demo"


@pytest.fixture()
def agent(tmp_path: Path) -> Path:
    agent = tmp_path / "agent"
    write_session(agent, CWD, "2025-01-01_s1.jsonl", demo_rows(), DEMO_MTIME)
    return agent


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_recall_text_and_json(agent, capsys):
    code, out, _ = _run(capsys, "recall", "auth login", "--scope", "project", "--cwd", CWD, "--agent-dir", str(agent))
    assert code == 0 and out.startswith('5 matches across 2 segments for "auth login":')
    code, out, _ = _run(
        capsys, "recall", "auth login", "--scope", "project", "--cwd", CWD, "--agent-dir", str(agent), "--json"
    )
    result = json.loads(out)
    assert code == 0 and result["totalMatches"] == 5 and result["items"][0]["kind"] == "segment"
    assert set(result) == {
        "scope",
        "branches",
        "query",
        "queryMode",
        "page",
        "pageSize",
        "totalItems",
        "totalMatches",
        "hasNext",
        "authoritative",
        "coverage",
        "items",
        "text",
    }


def test_recall_invalid_scope_exits_2(agent, capsys):
    code, _, err = _run(capsys, "recall", "x", "--scope", "everywhere", "--agent-dir", str(agent))
    assert code == 2 and "scope" in err


def test_expand_and_errors(agent, capsys):
    code, out, _ = _run(capsys, "expand", "s1", "--indices", "1", "--agent-dir", str(agent), "--json")
    result = json.loads(out)
    assert code == 0 and result["expanded"][0]["text"].startswith("hmm private")
    code, out, _ = _run(capsys, "expand", "s1", "--range", "0:1", "--agent-dir", str(agent))
    assert code == 0 and "#0 [user] u1 (line 2)" in out and "#1 [assistant read] a1 (line 3)" in out
    code, out, err = _run(capsys, "expand", "s1", "--indices", "9", "--agent-dir", str(agent))
    assert code == 1 and "index_out_of_bounds" in err
    code, out, _ = _run(capsys, "expand", "zz", "--entry-ids", "u1", "--agent-dir", str(agent), "--json")
    assert code == 2 and json.loads(out)["error"]["code"] == "session_not_found"  # docs/cli.md: names nothing


def test_sessions(agent, capsys):
    code, out, _ = _run(capsys, "sessions", "--cwd", CWD, "--agent-dir", str(agent), "--json")
    result = json.loads(out)
    assert code == 0 and result["totalItems"] == 1
    row = result["sessions"][0]
    assert row["sessionId"] == "s1" and row["entryCount"] == 5 and row["tier"] == "hot" and row["leafId"] == "cm1"
    assert row["uri"].startswith("file://") and row["lastTs"] == 1735689607000
    code, out, _ = _run(capsys, "sessions", "--cwd", CWD, "--agent-dir", str(agent))
    assert code == 0 and out.startswith("s1  hot")


def test_results_fit_the_wire_contract(agent, capsys):
    """Every result shape converts into the protocol's result Structs."""
    import msgspec
    from memory_kit import engine

    from fabric_lsp import protocol

    eng = engine(agent)
    path = str(next(agent.glob("sessions/*/*.jsonl")))
    for params in (
        {"query": "auth login", "scope": "project"},
        {"scope": "project"},
        {"query": "auth", "scope": f"session:{path}", "entryRange": {"first": 0, "last": 2}},
        {"query": "x", "scope": "session:nope"},
    ):
        msgspec.convert(eng.recall(params, cwd=CWD), protocol.RecallResult)
    cold = engine(agent, hot_sessions=0).recall({"query": "auth", "scope": "project"}, cwd=CWD)
    assert cold["items"][0]["kind"] == "pointer"
    msgspec.convert(cold, protocol.RecallResult)
    msgspec.convert(eng.expand({"session": path, "entryRange": {"first": 0, "last": 4}}), protocol.ExpandResult)
    for params in (
        {"session": "nope", "indices": [0]},
        {"session": path, "indices": [99]},
        {"session": path, "entryIds": ["zz"]},
    ):
        msgspec.convert(eng.expand(params), protocol.ExpandErrorResult)
    msgspec.convert(eng.sessions({"scope": "global"}), protocol.SessionsResult)
