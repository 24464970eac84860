"""The digest's worked examples (§14), byte for byte."""

from __future__ import annotations

import json

from compaction_examples import example1, example2, example3, long_single_turn

from fabric_lsp.engine.compaction.hook import compaction_hook, compile_fabric_summary, tree_hook
from fabric_lsp.engine.compaction.instructions import encode_compaction_request
from tests.engine.compaction.conftest import FIXTURES


def test_example1_summary_bytes_and_details():
    r = compile_fabric_summary(example1(), 1000)
    assert r["firstKeptEntryId"] == "e9"
    assert r["summary"] == (FIXTURES / "example1.summary.txt").read_text(encoding="utf-8")
    d = r["details"]
    assert d["sections"] == ["[Session Goal]", "[Files And Changes]", "[Outstanding Context]", "[Current Status]"]
    assert d["counts"] == {
        "branchEntries": 10,
        "cumulativeSourceEntries": 8,
        "sourceEvents": 9,
        "liveCutEntries": 8,
        "priorFabricV1": 0,
        "priorFabricV2": 0,
    }
    assert d["omittedCounts"] == {
        "goal": 0,
        "files": 0,
        "activity": 0,
        "outstanding": 0,
        "earlierTurns": 0,
        "transcript": 0,
        "preserve": 0,
        "thinking": 1,
    }
    assert d["instructionPolicy"]["mode"] == "none"
    assert d["stableAddresses"]["firstKeptEntryId"] == "e9"
    assert "budget" not in d
    assert list(d) == [
        "compactor",
        "version",
        "sections",
        "coverage",
        "counts",
        "omittedCounts",
        "instructionPolicy",
        "stableAddresses",
        "timestamp",
    ]


def test_example2_summary_policy_and_branch_facts():
    ci = encode_compaction_request("  Keep   the release\nchecklist ", ["tag v1.2.3", "  "])
    r = compile_fabric_summary(example2(), 1000, ci)
    expected = (FIXTURES / "example2.summary.txt").read_text(encoding="utf-8")
    assert r["firstKeptEntryId"] == "e5"
    assert r["summary"] == expected
    assert r["details"]["instructionPolicy"] == {
        "mode": "typed-v1",
        "canonicalized": True,
        "sourceBytes": 36,
        "truncated": False,
        "preserveCount": 2,
        "omittedPreserveCount": 0,
    }
    t = tree_hook(example2()[:4], custom_instructions="keep it", old_leaf_id="e4")
    assert t["result"] == "summary"
    branch_summary = t["summary"]["summary"]
    body = expected.replace(
        "[Compaction Request]\nKeep the release checklist\n- tag v1.2.3 [preserve:0]",
        "[Compaction Request]\nkeep it",
    ).replace(
        "[compacted 2025-03-01T10:00:04.000Z; cumulative source entries e1 → e4]",
        "[branch summarized 2025-03-01T10:00:04.000Z; structural source entries e1 → e4]",
    )
    assert branch_summary == body
    det = t["summary"]["details"]
    assert [(f["kind"], f["address"]) for f in det["facts"]] == [
        ("user", "e1/user"),
        ("fabricRun", "e2/call:f1"),
        ("phase", "e3/phase:0"),
        ("phase", "e3/phase:1"),
        ("operation", "e3/0"),
        ("operation", "e3/1"),
        ("operation", "e3/2"),
        ("operation", "e3/3"),
        ("customMessage", "e4/custom-message"),
    ]
    run = det["facts"][1]
    assert (run["name"], run["description"], run["outcome"]) == ("Audit release", "Check files and run tests", "failed")
    assert det["facts"][5]["result"] == {"created": True}
    assert det["facts"][6]["error"] == "Call failed during invoke: exit 1"
    assert det["facts"][8]["details"] == {"id": "a1", "status": "completed"}
    assert det["omittedFacts"] == 0
    assert det["request"] == {"text": "keep it", "sourceBytes": 7, "truncated": False}
    assert det["source"] == {"firstEntryId": "e1", "lastEntryId": "e4", "entryCount": 4, "oldLeafId": "e4"}


def test_example3_sampling_excerpts():
    r = compile_fabric_summary(example3(), 1000)
    s = r["summary"]
    assert r["firstKeptEntryId"] == "e91"
    lines = s.split("\n")
    goal = lines[: lines.index("")]
    assert goal[:3] == ["[Session Goal]", "Goal line", "- Scope 0 [entry e4]"]
    assert "… omitted 5 user scope changes; source entries e40 → e52" in goal
    assert goal[goal.index("… omitted 5 user scope changes; source entries e40 → e52") + 1] == "- Scope 17 [entry e55]"
    assert goal[-1] == "- Scope 28 [entry e88]"
    assert "[Files And Changes]\n(under repo/src/gen/)\nWritten:\n  /file-0.ts [entry e2]\n" in s
    assert (
        "  /file-11.ts [entry e35]\n  … omitted 6 file addresses; source entries e38 → e53\n  /file-18.ts [entry e56]\n"
        in s
    )
    assert (
        '  /file-29.ts [entry e89]\n\n[Earlier Turns]\n"Goal line" | write:1 [entry e1]\n"Scope 0" | write:1 [entry e4]\n'
        in s
    )
    earlier = s.split("[Earlier Turns]\n")[1].split("\n\n")[0].split("\n")
    assert len(earlier) == 29 and earlier[-1] == '"Scope 27" | write:1 [entry e85]'
    assert "[Current Status]\nLast request: Scope 28\nLast change: write /repo/src/gen/file-29.ts\n\n---\n" in s
    assert "---\n… omitted 50 transcript events; source entries e1 → e50\n(#51) → ok: ok\n(#52) user: Scope 16\n" in s
    assert "(#90) → ok: ok\n\n---\n" in s
    assert r["details"]["omittedCounts"] == {
        "goal": 5,
        "files": 6,
        "activity": 0,
        "outstanding": 0,
        "earlierTurns": 0,
        "transcript": 50,
        "preserve": 0,
        "thinking": 0,
    }


def test_example4_continuity_numbers():
    branch, tokens_before = long_single_turn()
    r = compaction_hook(
        branch,
        tokens_before=tokens_before,
        context_window=100000,
        pi_settings={"reserveTokens": 10000, "keepRecentTokens": 20000},
        config={"targetContextRatio": 0.65},
    )
    assert r["result"] == "compaction"
    b = r["compaction"]["details"]["budget"]
    assert b["continuityTargetTokens"] == 45470
    assert b["targetContextTokens"] == 45470
    assert b["occupancyCeilingTokens"] == 65000
    assert b["safeCeilingTokens"] == 81000
    assert b["reductionCeilingTokens"] == int(0.95 * tokens_before)
    assert b["bindingConstraint"] == "continuity"
    assert b["rawTailTokenBudget"] == 20000
    assert abs(b["tokenScale"] - 1.4) < 1e-9
    assert 6000 <= b["fixedOverheadTokens"] < 6001
    assert b["projectedTokensAfter"] <= b["targetContextTokens"]
    assert b["retainedRawTokens"] <= b["rawTailTokenBudget"]
    assert "Inspect the repository and keep the goal" in r["compaction"]["summary"]
    # budget key order is the documented one
    assert list(b) == [
        "strategy",
        "contextWindow",
        "targetContextRatio",
        "targetContextTokens",
        "reserveTokens",
        "keepRecentTokens",
        "rawTokensBefore",
        "tokenScale",
        "fixedOverheadTokens",
        "retainedRawTokens",
        "continuityTargetTokens",
        "occupancyCeilingTokens",
        "safeCeilingTokens",
        "reductionCeilingTokens",
        "rawTailTokenBudget",
        "bindingConstraint",
        "projectedTokensAfter",
    ]


def test_examples_are_deterministic():
    for build in (example1, example2, example3):
        a = compile_fabric_summary(build(), 1000)
        b = compile_fabric_summary(build(), 1000)
        assert a["summary"].encode() == b["summary"].encode()
        assert json.dumps(a["details"]) == json.dumps(b["details"])
