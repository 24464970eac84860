"""The memory digest's worked example (§14), exactly: records, lineage, BM25 scores,
rendered text, cold digest and pointer, expand, and the tokenizer examples."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from memory_kit import DEMO_MTIME, demo_rows, engine, write_session

from fabric_lsp.engine.memory import disk_cache
from fabric_lsp.engine.memory.search import bm25_located, render_text
from fabric_lsp.engine.memory.tokenize import plan_memory_query, tokenize_lexical

CWD = "/home/user/demo"
FP = "c64905470cb74bd720ccb215f48e807de6642ecad9871d255e903818369da267"

EXPECTED_TEXT = """5 matches across 2 segments for "auth login":

--- #3-#4 (2/2 match) ---
> #3 [bashExecution bash] bash$ pnpm test auth [exit 1]
1 failed
> #4 [custom] [note] Auth login retry

--- #0-#2 (3/3 match) ---
> #0 [user] Fix the auth login bug
> #1 [assistant read] Reading auth.
Tool: read({"path":"src/auth.ts"})
> #2 [toolResult read] toolResult(read): export const login = () => auth();"""


@pytest.fixture()
def demo(tmp_path: Path):
    agent = tmp_path / "agent"
    path = write_session(agent, CWD, "2025-01-01_s1.jsonl", demo_rows(), DEMO_MTIME)
    return agent, path


def test_active_records_and_lineage(demo):
    agent, path = demo
    eng = engine(agent)
    out = eng.recall({"scope": f"session:{path}"}, cwd=CWD)
    seg_entries = [e for it in out["items"] for e in it["segment"]["entries"]]
    assert [(e["index"], e["entryId"], e["role"], e["toolName"]) for e in seg_entries] == [
        (0, "u1", "user", None),
        (1, "a1", "assistant", "read"),
        (2, "r1", "toolResult", "read"),
        (3, "b1", "bashExecution", "bash"),
        (4, "cm1", "custom", None),
    ]
    texts = {e["index"]: e["text"] for e in seg_entries}
    assert texts[1] == 'Reading auth.\nTool: read({"path":"src/auth.ts"})'  # thinking excluded
    assert texts[2] == "toolResult(read): export const login = () => auth();"
    assert texts[3] == "bash$ pnpm test auth [exit 1]\n1 failed"
    assert texts[4] == "[note] Auth login retry"
    assert all(not e["isError"] for e in seg_entries)
    assert seg_entries[0]["timestamp"] == 1735689601000
    assert [e["line"] for e in seg_entries] == [1, 2, 3, 6, 7]
    seg = out["items"][0]["segment"]
    assert seg["lineageFingerprint"] == FP and seg["tier"] == "cold"  # hydrated segments say cold


def test_all_mode_includes_the_abandoned_sibling(demo):
    agent, path = demo
    out = engine(agent).recall({"scope": f"session:{path}", "branches": "all", "pageSize": 100}, cwd=CWD)
    entries = [e for it in out["items"] for e in it["segment"]["entries"]]
    assert [e["entryId"] for e in entries] == ["u1", "a1", "r1", "u2", "b1", "cm1"]
    assert (
        out["items"][0]["segment"]["lineageFingerprint"]
        == "151b50b5d43ace9ebb84edae27b7e5d257f0207df6f0142d4e80dfe72bcdc7e2"
    )
    active = engine(agent).recall({"query": "abandoned", "scope": "project"}, cwd=CWD)
    assert active["items"] == [] and active["text"] == 'No matches for "abandoned".'


def test_bm25_scores(demo):
    agent, path = demo
    eng = engine(agent)
    eng.recall({"scope": "project", "query": "x"}, cwd=CWD)
    state = next(iter(eng._states.values()))
    located, capped = bm25_located([state.hot_view()], ["auth", "login"])
    scores = {pos: round(s, 4) for pos, s in located[0].items()}
    assert scores == {4: 0.7323, 0: 0.6798, 2: 0.6344, 1: 0.1106, 3: 0.0778}
    assert not capped


def test_rendered_text_and_result(demo):
    agent, _ = demo
    out = engine(agent).recall({"query": "auth login", "scope": "project"}, cwd=CWD)
    assert out["totalItems"] == 2 and out["totalMatches"] == 5 and not out["hasNext"]
    assert out["authoritative"] is True
    assert out["coverage"] == {
        "complete": True,
        "indexedSessions": 1,
        "eligibleSessions": 1,
        "staleSessions": 0,
        "incompleteSessions": 0,
        "reasons": [],
    }
    segs = [it["segment"] for it in out["items"]]
    assert [s["entryRange"] for s in segs] == [{"first": 3, "last": 4}, {"first": 0, "last": 2}]
    assert round(segs[0]["score"], 4) == 0.7323 and round(segs[1]["score"], 4) == 0.6798
    assert segs[0]["exactMatches"] == [
        {"index": 3, "entryId": "b1", "operationAddress": None},
        {"index": 4, "entryId": "cm1", "operationAddress": None},
    ]
    # The digest text exactly, plus our entry reference at the end of each entry line.
    stripped = "\n".join(line.split(" pi-entry:")[0] for line in out["text"].split("\n"))
    assert stripped == EXPECTED_TEXT
    assert "> #4 [custom] [note] Auth login retry pi-entry:s1/cm1" in out["text"]
    assert "1 failed pi-entry:s1/b1" in out["text"]


def test_shard_cache_name_and_policy(demo):
    agent, path = demo
    eng = engine(agent)
    eng.recall({"query": "auth", "scope": "project"}, cwd=CWD)
    name = disk_cache.cache_name(str(path), "active", "shard")
    assert name.endswith("-2025-01-01_s1.jsonl.json")
    rec = json.loads((Path(eng.index_dir) / name).read_bytes())
    assert rec["policy"] == f"entry:2000;branches:active;lineage:{FP};thinking:false;tool-output:true"
    assert rec["cacheVersion"] == 5 and rec["kind"] == "shard" and rec["tier"] == "hot"
    assert rec["cacheBytes"] == (Path(eng.index_dir) / name).stat().st_size


def test_cold_digest_and_pointer(demo):
    agent, path = demo
    eng = engine(agent, hot_sessions=0)
    out = eng.recall({"query": "auth retry", "scope": "project"}, cwd=CWD)
    rec = json.loads((Path(eng.index_dir) / disk_cache.cache_name(str(path), "active", "digest")).read_bytes())
    assert rec["vocabulary"] == [
        "1",
        "auth",
        "bash",
        "bug",
        "const",
        "exit",
        "export",
        "failed",
        "fix",
        "login",
        "note",
        "path",
        "pnpm",
        "read",
        "reading",
        "retry",
        "src",
        "test",
        "the",
        "tool",
        "toolresult",
        "ts",
    ]
    assert rec["toolHistogram"] == {"bash": 1, "read": 2} and rec["errorCount"] == 0
    assert rec["addresses"][:2] == [
        [0, "u1", None, "user", None, 1735689601000],
        [1, "a1", None, "assistant", "read", 1735689602000],
    ]
    assert rec["indexCoverage"] == {"complete": True, "vocabularyBytes": 162, "reasons": []}
    assert out["totalMatches"] == 1 and out["totalItems"] == 1
    pointer = out["items"][0]["pointer"]
    assert out["items"][0]["kind"] == "pointer"
    assert math.isclose(pointer["score"], 2 * math.log(0.5 / 1.5 + 1)) and round(pointer["score"], 4) == 0.5754
    assert pointer["matchedTerms"] == ["auth", "retry"] and pointer["lineageFingerprint"] == FP
    assert pointer["sessionFile"] == str(path) and pointer["lastTs"] == 1735689607000
    assert out["text"] == (
        '1 matches across 0 segments and 1 cold session for "auth retry":\n\n'
        "> session s1 (cold, /home/user/demo, 2025-01-01T00:00:07.000Z, branches=active) has 2 matching lexical "
        f'terms — hydrate exact file {json.dumps(str(path))} with branches "active", expectedSourceHash '
        f'"{pointer["sourceHash"]}", and expectedLineageFingerprint "{FP}".'
    )
    # Hydrating the pointer gives exact matches without persisting a shard.
    hyd = eng.recall(
        {
            "query": "retry",
            "scope": f"session:{pointer['sessionFile']}",
            "expectedSourceHash": pointer["sourceHash"],
            "expectedLineageFingerprint": FP,
        },
        cwd=CWD,
    )
    assert hyd["items"][0]["segment"]["exactMatches"] == [{"index": 4, "entryId": "cm1", "operationAddress": None}]
    assert hyd["items"][0]["segment"]["tier"] == "cold"
    assert not (Path(eng.index_dir) / disk_cache.cache_name(str(path), "active", "shard")).exists()


def test_expand_examples(demo):
    agent, path = demo
    eng = engine(agent)
    out = eng.expand({"session": str(path), "indices": [1]})
    assert out["branches"] == "active" and out["lineageFingerprint"] == FP
    assert out["expanded"] == [
        {
            "index": 1,
            "entryId": "a1",
            "role": "assistant",
            "toolName": "read",
            "type": "message",
            "timestamp": 1735689602000,
            "isError": False,
            "text": 'hmm private\nReading auth.\nTool: read({"path":"src/auth.ts"})',
            "line": 2,
            "filesTouched": ["src/auth.ts"],
        }
    ]
    assert eng.expand({"session": str(path), "indices": [9]}) == {
        "error": {"code": "index_out_of_bounds", "message": "Entry index 9 is outside 0..4."}
    }
    assert eng.recall({"query": "zzznomatch", "scope": "project"}, cwd=CWD)["text"] == 'No matches for "zzznomatch".'


def test_tokenizer_examples():
    assert tokenize_lexical("Ｆｕｌｌ-width ＡＢＣ, Straße ǅ x_y ① ²3 e\u0301") == [
        "full",
        "width",
        "abc",
        "straße",
        "dž",
        "x_y",
        "1",
        "23",
        "é",
    ]
    assert plan_memory_query("src/foo.ts Foo foo") == {"kind": "terms", "terms": ["src", "foo", "ts"]}
    assert tokenize_lexical("CAFÉ café Ωmega雪 snake_case 42") == ["café", "café", "ωmega雪", "snake_case", "42"]
    assert plan_memory_query("   ") == {"kind": "browse"}
    assert plan_memory_query(" a+ ", "regex") == {"kind": "regex", "pattern": " a+ "}


def test_render_empty_cases():
    cov = {"complete": False, "indexedSessions": 0, "eligibleSessions": 1, "reasons": ["source_unavailable"]}
    kw = dict(total_matches=0, segment_count=0, query_reasons=[], query_complete=True)
    assert render_text([], query="q", total_items=3, index_coverage=None, **kw) == "No results on this page."
    assert render_text([], query=None, total_items=0, index_coverage=None, **kw) == "No entries in scope."
    assert render_text([], query="q", total_items=0, index_coverage=cov, **kw) == (
        'No indexed matches for "q"; coverage is incomplete (0/1 sessions indexed; reasons: source_unavailable).'
    )
    assert render_text(
        [],
        query="q",
        total_items=0,
        index_coverage=None,
        total_matches=0,
        segment_count=0,
        query_reasons=["regex_timeout"],
        query_complete=False,
    ) == ('No indexed matches for "q"; query coverage is incomplete (regex_timeout).')


def test_fixture_file_is_the_worked_example(tmp_path: Path):
    """tests/fixtures/memory/digest-example.jsonl is the §14 session (try it with the CLI)."""
    from memory_kit import REPO

    fixture = REPO / "tests" / "fixtures" / "memory" / "digest-example.jsonl"
    agent = tmp_path / "agent"
    built = write_session(agent, CWD, "2025-01-01_s1.jsonl", demo_rows(), DEMO_MTIME)
    assert fixture.read_bytes() == built.read_bytes()
