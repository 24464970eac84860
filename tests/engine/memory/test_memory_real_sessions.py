"""The real Pi fixtures index, recall, browse, list and expand; lineage agrees with the
session model's active branch."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from memory_kit import REAL_SESSIONS, engine

from fabric_lsp.engine.session import SessionTree, read_session
from fabric_lsp.engine.session.discovery import encode_cwd

CWD = "/home/user/proj"
FIXTURES = sorted(REAL_SESSIONS.glob("*.jsonl"))


@pytest.fixture()
def agent(tmp_path: Path) -> Path:
    agent = tmp_path / "agent"
    folder = agent / "sessions" / encode_cwd(CWD)
    folder.mkdir(parents=True)
    for f in FIXTURES:
        shutil.copy(f, folder / f.name)
    return agent


def test_fixtures_exist():
    assert len(FIXTURES) == 6


@pytest.mark.parametrize("hot", [50, 0])
def test_recall_and_sessions_over_real_fixtures(agent, hot):
    eng = engine(agent, hot_sessions=hot)
    listing = eng.sessions({"scope": "project"}, cwd=CWD)
    assert listing["totalItems"] == 6 and listing["coverage"]["indexedSessions"] == 6
    assert all(row["entryCount"] > 0 and row["cwd"] == CWD for row in listing["sessions"])
    assert {row["tier"] for row in listing["sessions"]} == ({"hot"} if hot else {"cold"})
    out = eng.recall({"query": "calc tests", "scope": "project"}, cwd=CWD)
    assert out["totalMatches"] > 0
    browse = eng.recall({"scope": "project", "pageSize": 100}, cwd=CWD)
    assert browse["totalItems"] > 0 and browse["text"].split("\n")[0].endswith("most recent entries:")
    counts = {row["sessionFile"]: row["entryCount"] for row in listing["sessions"]}
    eng.close()
    other = engine(agent, hot_sessions=50 - hot)
    again = {row["sessionFile"]: row["entryCount"] for row in other.sessions({"scope": "project"}, cwd=CWD)["sessions"]}
    assert again == counts  # hot shards and cold digests count the same records


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name[:2])
def test_expand_points_at_the_right_lines(agent, fixture):
    path = agent / "sessions" / encode_cwd(CWD) / fixture.name
    eng = engine(agent)
    meta = eng.expand({"session": str(path), "indices": []})
    assert meta["expanded"] == []
    lines = path.read_text(encoding="utf-8").split("\n")
    for branches in ("active", "all"):
        listing = eng.recall({"scope": f"session:{path}", "branches": branches, "pageSize": 100}, cwd=CWD)
        n = max((e["index"] for it in listing["items"] for e in it["segment"]["entries"]), default=-1) + 1
        assert n > 0
        out = eng.expand({"session": str(path), "branches": branches, "entryRange": {"first": 0, "last": n - 1}})
        assert [e["index"] for e in out["expanded"]] == list(range(n))
        for item in out["expanded"]:
            raw = json.loads(lines[item["line"]])
            if item["type"] in ("fabric_operation", "fabric_branch_fact"):
                continue
            assert raw["id"] == item["entryId"] and raw["type"] == item["type"]
    # Active lineage equals the session model's active branch.
    log = read_session(path)
    branch = SessionTree.from_records(log.records).branch()
    active = eng.expand({"session": str(path), "entryRange": {"first": 0, "last": 0}})
    from fabric_lsp.engine.memory.source import lineage_fingerprint

    assert active["lineageFingerprint"] == lineage_fingerprint("active", branch.leaf_id, branch.ids)
    # Expand re-reads full text: thinking is included even though indexing excludes it.
    raw_thinking = [
        p["thinking"]
        for line in lines
        if line.strip()
        for p in (json.loads(line).get("message") or {}).get("content", [])
        if isinstance(p, dict) and p.get("type") == "thinking"
    ]
    if raw_thinking:
        texts = " ".join(
            e["text"]
            for e in eng.expand({"session": str(path), "branches": "all", "entryRange": {"first": 0, "last": n - 1}})[
                "expanded"
            ]
        )
        assert raw_thinking[0] in texts
