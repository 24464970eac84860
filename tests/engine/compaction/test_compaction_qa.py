"""Reconstruction QA probes and mutation tests (reference-tests.md §B)."""

from __future__ import annotations

from compaction_builders import assistant, call, link, text, tool_result, user

from fabric_lsp.engine.compaction.hook import compile_fabric_summary
from fabric_lsp.engine.compaction.qa import generate_probes, qa_report


def qa_session() -> list[dict]:
    es = [
        user("Certify the compaction reconstruction.\nKeep every address."),  # e1
        assistant(call("c1", "edit", {"path": "docs/compaction.md", "edits": []})),  # e2
        tool_result("c1", "edit", "Successfully replaced 1 block(s)"),  # e3
        assistant(call("c2", "read", {"path": "src/missing.ts"})),  # e4
        tool_result("c2", "read", "ENOENT: no such file or directory, access 'src/missing.ts'", True),  # e5
        user("Now certify it"),  # e6
        assistant(call("c3", "write", {"path": "notes/plan.md", "content": "x"})),  # e7
        tool_result("c3", "write", "ok"),  # e8
        user("Run the certifier"),  # e9
        assistant(text("running")),  # e10
        user("Go"),  # e11
        assistant(text("going")),  # e12
        user("Certify with fabric"),  # e13
        assistant(call("f1", "fabric_exec", {"code": "x", "display": {"name": "Certify reconstruction QA"}})),  # e14
        tool_result("f1", "fabric_exec", "done"),  # e15
    ]
    for i in range(25):
        es += [user(f"Follow-up question {i}"), assistant(text(f"answer {i}"))]
    es += [user("final")]
    return link(es, prefix="qa-e")


def compiled():
    r = compile_fabric_summary(qa_session(), 1000)
    probes = generate_probes(r["events"], len(r["events"]))
    return r["summary"], probes


def ids(probes, prefix):
    return [p for p in probes if p["id"].startswith(prefix)]


def test_probes_pass_on_real_engine_output():
    summary, probes = compiled()
    answers = {p["answer"] for p in probes}
    assert "Certify the compaction reconstruction.\nKeep every address." in answers
    assert "compaction.md" in answers
    assert "read src/missing.ts: ENOENT: no such file or directory, access 'src/missing.ts'" in answers
    assert "Certify reconstruction QA → succeeded" in answers
    assert "[entry qa-e14]" in answers
    assert ids(probes, "earlier-turn-address:") and ids(probes, "footer-recall")
    assert not [p for p in probes if "commit" in p["id"]]
    assert qa_report(summary, probes) == {
        "score": 1,
        "contentScore": 1,
        "addressScore": 1,
        "failures": [],
        "probes": len(probes),
    }


def drop_block(summary: str, header: str) -> str:
    return "\n\n".join(b for b in summary.split("\n\n") if not b.startswith(header))


def failed(summary: str, probes) -> set[str]:
    return {f["id"].split(":")[0] for f in qa_report(summary, probes)["failures"]}


def test_dropping_outstanding_fails_the_error_probe():
    summary, probes = compiled()
    assert "unresolved-error" in failed(drop_block(summary, "[Outstanding Context]"), probes)


def test_removing_a_modified_file_fails_its_probe():
    summary, probes = compiled()
    mutated = summary.replace("compaction.md", "")
    assert "modified-file" in failed(mutated, probes)


def test_removing_run_intent_or_address_fails_run_probes():
    summary, probes = compiled()
    assert "last-fabric-run" in failed(summary.replace("Certify reconstruction QA", "X"), probes)
    assert "last-fabric-run-address" in failed(summary.replace("[entry qa-e14]", ""), probes)


def test_dropping_footer_fails_recall_probe():
    summary, probes = compiled()
    mutated = summary.replace("memory.recall", "")
    report = qa_report(mutated, probes)
    assert [f["id"] for f in report["failures"]] == ["footer-recall"]
    assert report["addressScore"] < 1 and report["contentScore"] == 1
    assert report["failures"][0]["reason"] == 'summary does not contain expected answer "memory.recall"'


def test_truncated_earlier_turns_fail_turn_probes():
    summary, probes = compiled()
    fails = failed(drop_block(summary, "[Earlier Turns]"), probes)
    assert {"earlier-turn-count", "earlier-turn-address"} <= fails


def test_bounded_omissions_are_scored_by_range():
    es = [user("Big goal")]
    for i in range(48):
        es += [
            user(f"Scope change {i}"),
            assistant(call(f"e{i}", "edit", {"path": f"src/file{i}.ts", "edits": []})),
            tool_result(f"e{i}", "edit", "ok"),
        ]
    es.append(user("final"))
    r = compile_fabric_summary(link(es), 1000)
    s = r["summary"]
    assert "… omitted 24 file addresses" in s
    assert "… omitted 16 earlier turns" in s
    probes = generate_probes(r["events"], len(r["events"]))
    assert ids(probes, "modified-file-omission:") and ids(probes, "earlier-turn-omission:")
    assert qa_report(s, probes)["failures"] == []


def test_probes_are_deterministic_and_cut_index_is_clamped():
    s1, p1 = compiled()
    s2, p2 = compiled()
    assert p1 == p2 and qa_report(s1, p1) == qa_report(s2, p2)
    r = compile_fabric_summary(qa_session(), 1000)
    assert generate_probes(r["events"], float("nan")) == [p for p in generate_probes([], 0)]
    assert generate_probes(r["events"], 10**9) == generate_probes(r["events"], len(r["events"]))
    assert [p["id"] for p in generate_probes([], 0)] == ["footer-recall"]
