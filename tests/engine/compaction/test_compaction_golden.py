"""Golden tests for section edges, bounds and quirks the digest calls out (§4, §5, §10)."""

from __future__ import annotations

from compaction_builders import assistant, bash_exec, call, custom_message, link, text, tool_result, user

from fabric_lsp.engine.compaction.bounds import utf8_bytes
from fabric_lsp.engine.compaction.hook import compile_fabric_summary
from fabric_lsp.engine.compaction.normalize import normalize
from fabric_lsp.engine.compaction.operations import collect_operations
from fabric_lsp.engine.compaction.projections import common_root, project_files, summarize_args
from fabric_lsp.engine.compaction.render import bounded_block, render_summary, sampled_lines


def section(summary: str, header: str) -> list[str]:
    for block in summary.split("\n\n"):
        if block.startswith(header + "\n"):
            return block.split("\n")[1:]
    return []


def files_of(paths_by_tool):
    es = [user("g")]
    for i, (tool, path) in enumerate(paths_by_tool):
        es += [assistant(call(f"c{i}", tool, {"path": path})), tool_result(f"c{i}", tool, "ok")]
    es.append(user("end"))
    lines, _ = project_files(collect_operations(normalize(link(es))))
    return lines


def test_common_root_quirks():
    assert common_root(["src/a.ts"]) == "src/a.ts/"
    assert common_root(["/repo/src/a.ts", "/repo/src/b.ts"]) == "repo/src/"
    assert common_root(["a\\b\\c.ts", "a\\b\\d.ts"]) == "a/b/"
    assert common_root(["x/a", "y/b"]) == ""
    assert common_root(["src//a", "src/b"]) == "src/"


def test_files_root_stripping_is_first_occurrence_anywhere():
    assert files_of([("write", "/repo/src/a.ts"), ("write", "/repo/src/b.ts")]) == [
        "(under repo/src/)",
        "Written:",
        "  /a.ts [entry e2]",
        "  /b.ts [entry e4]",
    ]
    # backslash roots never strip
    assert files_of([("edit", "a\\b\\c.ts"), ("edit", "a\\b\\d.ts")]) == [
        "(under a/b/)",
        "Modified:",
        "  a\\b\\c.ts [entry e2]",
        "  a\\b\\d.ts [entry e4]",
    ]
    # no shared root: no (under) line; read hidden once modified; first occurrence wins
    assert files_of([("read", "x/a"), ("edit", "x/a"), ("read", "y/b"), ("grep", "y/b"), ("ls", "z")]) == [
        "Modified:",
        "  x/a [entry e4]",
        "Read:",
        "  y/b [entry e6]",
        "  z [entry e10]",
    ]


def test_path_of_nullish_and_type_rules():
    # path ?? file ?? dir: a numeric path blocks the fallback to file
    es = [
        user("g"),
        assistant(call("a", "read", {"path": 5, "file": "f.ts"})),
        tool_result("a", "read", "ok"),
        assistant(call("b", "read", {"path": None, "file": "g.ts"})),
        tool_result("b", "read", "ok"),
        assistant(call("c", "read", {"path": "   "})),
        tool_result("c", "read", "ok"),
        user("end"),
    ]
    lines, _ = project_files(collect_operations(normalize(link(es))))
    assert lines == ["(under g.ts/)", "Read:", "  g.ts [entry e4]"]


def test_summarize_args_rules():
    assert summarize_args("fabric_exec", {"code": "x"}) == "structured execution"
    assert summarize_args("bash", {"cmd": "ls -la\nrm"}) == "ls -la"
    assert summarize_args("grep", {"regex": "a+b"}) == "a+b"
    assert summarize_args("find", {"query": "nope", "x": 1}) == "query=nope x=1"
    assert summarize_args("custom", {"a": [1, None, "x"], "b": {"c": 1}, "c": 3}) == "a=1,,x b=[object Object]"
    assert summarize_args("custom", {"2": "two", "1": "one", "z": "zed"}) == "1=one 2=two"
    assert summarize_args("t", {"v": "y" * 100}) == "v=" + "y" * 39 + "…"
    assert summarize_args("t", {}) == ""


def test_outstanding_subjects_and_resolution_by_key():
    es = [
        user("g"),
        assistant(call("a", "mcp.search", {"q": 1})),
        tool_result("a", "mcp.search", "", True),
        assistant(call("b", "mcp.search", {"q": 2})),
        tool_result("b", "mcp.search", "ok"),
        assistant(call("c", "bash", {"command": "make\nall"})),
        tool_result("c", "bash", "boom\nmore", True),
        assistant(call("d", "bash", {"command": "make\nall"})),
        tool_result("d", "bash", "ok"),
        user("end"),
    ]
    s = compile_fabric_summary(link(es), 1000)["summary"]
    assert section(s, "[Outstanding Context]") == [
        "- mcp.search: failed [entry e2]",
        "- bash: make: boom [RESOLVED] [entry e7]",  # bash: the result entry itself
    ]


def test_earlier_turns_counts_bash_twice_and_custom_contexts():
    es = [
        user("first"),
        assistant(call("b", "bash", {"command": "ls"})),
        tool_result("b", "bash", "x"),
        custom_message("note", "ctx body", True, {"k": 1}),
        assistant(call("r", "read", {"path": "a"})),
        tool_result("r", "read", "ok"),
        user("second (still open when summarized)"),
        assistant(text("t")),
        user("kept turn"),
    ]
    s = compile_fabric_summary(link(es), 1000)["summary"]
    assert section(s, "[Earlier Turns]") == [
        '"first" | bash:2 [entry e1]',
        'custom "note" (visible): "ctx body" details={"k":1} | read:1 [entry e4]',
    ]


def test_status_last_change_reports_failed_edit_and_blank_note_is_skipped():
    es = [
        user("go"),
        assistant(text("Working on it"), call("e", "edit", {"path": "src/x.ts"})),
        tool_result("e", "edit", "nope", True),
        assistant(text("   ")),
        user("next"),
    ]
    s = compile_fabric_summary(link(es), 1000)["summary"]
    assert section(s, "[Current Status]") == ["Last request: go", "Last change: edit src/x.ts"]


def test_request_block_goes_first_without_a_goal_but_details_list_it_second():
    es = [custom_message("t", "only custom context", True), assistant(text("a")), custom_message("t", "later", True)]
    r = compile_fabric_summary(link(es), 1000, "keep this")
    assert r["summary"].startswith("[Compaction Request]\nkeep this\n\n")
    # the renderer puts the request first, details.sections splice it at index 1
    assert r["details"]["sections"] == ["[Current Status]", "[Compaction Request]"]
    assert r["summary"].index("[Compaction Request]") < r["summary"].index("[Current Status]")


def test_transcript_window_and_completed_runs_hidden():
    es = [user("u")]
    for i in range(30):
        es += [assistant(call(f"c{i}", "read", {"path": f"f{i}"})), tool_result(f"c{i}", "read", f"line {i}\nmore")]
    es.append(user("end"))
    s = compile_fabric_summary(link(es), 1000)["summary"]
    tr = s.split("\n\n---\n")[1].split("\n\n")[0].split("\n")
    assert tr[0] == "… omitted 21 transcript events; source entries e1 → e21"
    assert len(tr) == 41 and tr[-1] == "(#61) → ok: line 29"


def test_bounded_block_trims_middle_lines_without_ranges():
    lines = [f"line {i:03d} " + "x" * 60 for i in range(200)]
    block = bounded_block("[H]", lines, 2048)
    assert utf8_bytes(block) <= 2048
    out = block.split("\n")
    assert out[0] == "[H]" and out[1].startswith("line 000")
    marker = [x for x in out if x.startswith("… omitted ")]
    assert len(marker) == 1 and marker[0].endswith(" rendered lines")
    assert out[-1].startswith("line 199")
    assert sampled_lines(["a", "b", "c"], 2) == ["a", "… omitted 1 rendered lines", "c"]
    assert sampled_lines(["a", "b", "c"], 0) == ["… omitted 3 rendered lines"]
    assert bounded_block("[Header]", ["x"], 5) == "[H…"
    long = bounded_block("[H]", ["é" * 600], 4096)
    assert utf8_bytes(long.split("\n")[1]) <= 1024 and long.endswith("…")


def test_render_footer_fallbacks_and_global_guard():
    s = render_summary({"goal": ["g"]}, first_entry_id=None, last_entry_id=None, last_timestamp=None)
    assert "[compacted (unknown time); cumulative source entries (no entries)]" in s
    s = render_summary({"goal": ["g"]}, first_entry_id="a", last_entry_id="", last_timestamp="t", summary_kind="branch")
    assert "[branch summarized t; structural source entries a → (end)]" in s
    big = {
        k: [("z" * 1000) for _ in range(200)]
        for k in ("goal", "files", "activity", "outstanding", "earlierTurns", "status", "transcript")
    }
    s = render_summary(big, first_entry_id="a", last_entry_id="b", last_timestamp="t", request_lines=["r" * 5000])
    assert utf8_bytes(s) <= 32768 and s.endswith("\n")


def test_bash_execution_exit_codes():
    es = [
        user("u"),
        bash_exec("ok", 0, "fine"),
        bash_exec("bad", 2, "err out"),
        bash_exec("none", None, "x"),
        bash_exec("empty", 1, ""),
        user("v"),
    ]
    s = compile_fabric_summary(link(es), 1000)["summary"]
    assert section(s, "[Outstanding Context]") == [
        "- bash: bad: err out [entry e3]",
        "- bash: empty: failed [entry e5]",
    ]
    assert "(#4) bash(none) → ok" in s


def test_trace_operations_keep_sequence_order_and_reject_unordered_arrays():
    import copy

    from compaction_examples import EXAMPLE_TRACE

    def ops(trace):
        b = link(
            [
                user("u"),
                assistant(call("f", "fabric_exec", {"code": "x"})),
                tool_result("f", "fabric_exec", "p", False, {"trace": trace}),
                user("v"),
            ]
        )
        return [e["address"] for e in normalize(b) if e["type"] == "fabricOperation"]

    parallel = copy.deepcopy(EXAMPLE_TRACE)
    parallel["operations"] = [
        dict(parallel["operations"][0], sequence=0, args={"path": "a"}),
        dict(parallel["operations"][0], sequence=1, args={"path": "b"}),
    ]
    assert ops(parallel) == ["e3/0", "e3/1"]
    unordered = copy.deepcopy(parallel)
    unordered["operations"].reverse()
    assert ops(unordered) == []
    gap = copy.deepcopy(parallel)
    gap["operations"][1]["sequence"] = 7
    assert ops(gap) == ["e3/0", "e3/7"]
