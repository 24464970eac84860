"""Engine behaviour, one test per reference case family (reference-tests.md §A, §D)."""

from __future__ import annotations

import copy
import json

from compaction_builders import (
    assistant,
    bash_exec,
    call,
    compaction_entry,
    custom_message,
    link,
    plain_custom,
    text,
    thinking,
    tool_result,
    user,
)
from compaction_examples import EXAMPLE_TRACE, example1, example2, long_single_turn

from fabric_lsp.engine.compaction.bounds import utf8_bytes
from fabric_lsp.engine.compaction.cut import compute_cut
from fabric_lsp.engine.compaction.details import is_fabric_v1, is_fabric_v2
from fabric_lsp.engine.compaction.hook import compaction_hook, compile_fabric_summary, normalize_config, tree_hook
from fabric_lsp.engine.compaction.normalize import count_erased_thinking_blocks, normalize
from fabric_lsp.engine.fabric_payloads import read_branch_details
from fabric_lsp.engine.session.context import build_context_messages

BUDGET = {"contextWindow": 100000, "targetContextRatio": 0.65, "reserveTokens": 10000, "keepRecentTokens": 20000}


def compile_(branch, tb=1000, ci=None, budget=None):
    return compile_fabric_summary(branch, tb, ci, budget)


def append_compaction(branch: list[dict], res: dict, tb: int = 1000) -> list[dict]:
    n = len(branch) + 1
    e = compaction_entry(res["firstKeptEntryId"], res["summary"], res["details"], tb)
    e.update(id=f"c{n}", parentId=branch[-1]["id"], timestamp=f"2025-03-02T00:00:{n % 60:02d}.000Z")
    return branch + [e]


def extend(branch: list[dict], entries: list[dict], prefix: str) -> list[dict]:
    out = list(branch)
    for i, e in enumerate(entries):
        e = dict(e, id=f"{prefix}{i}", parentId=out[-1]["id"], timestamp=f"2025-03-03T00:00:{i % 60:02d}.000Z")
        out.append(e)
    return out


# ---------------------------------------------------------------- thinking erasure


def test_thinking_parts_emit_no_events_and_are_counted():
    b = link([user("goal"), assistant(thinking("secret plan"), text("visible"), thinking("more"))])
    evs = normalize(b)
    assert [e["type"] for e in evs] == ["user", "assistantText"]
    assert count_erased_thinking_blocks(b) == 2
    assert count_erased_thinking_blocks([]) == 0
    r = compile_(b + link([user("next")], start=3))
    assert "secret plan" not in r["summary"]
    assert r["details"]["omittedCounts"]["thinking"] == 2
    assert is_fabric_v2(r["details"])


def test_v2_validation_compatibility():
    d = compile_(example1())["details"]
    assert is_fabric_v2(d) and not is_fabric_v1(d)
    d2 = copy.deepcopy(d)
    del d2["omittedCounts"]["thinking"]
    assert is_fabric_v2(d2)
    d3 = copy.deepcopy(d)
    d3["budget"] = {
        "strategy": "adaptive",
        **{
            k: 1
            for k in (
                "contextWindow",
                "targetContextRatio",
                "targetContextTokens",
                "reserveTokens",
                "keepRecentTokens",
                "rawTokensBefore",
                "tokenScale",
                "fixedOverheadTokens",
                "retainedRawTokens",
                "projectedTokensAfter",
            )
        },
    }
    assert is_fabric_v2(d3)
    d3["budget"]["strategy"] = "continuity"
    assert not is_fabric_v2(d3)
    assert not is_fabric_v2({"compactor": "fabric", "version": 1})
    assert not is_fabric_v1({"compactor": "fabric", "version": 1})
    assert not is_fabric_v2(dict(d, version=3))
    assert not is_fabric_v2(dict(d, compactor="other"))
    v1 = {
        "compactor": "fabric",
        "version": 1,
        "sections": [],
        "summarizedEntryRange": {"first": "a", "last": "b"},
        "sourceEntryCount": 2,
        "firstKeptEntryId": "c",
        "timestamp": "t",
    }
    assert is_fabric_v1(v1) and not is_fabric_v2(v1)


# -------------------------------------------------------------------------- config


def test_config_normalization():
    assert normalize_config({}) == {
        "engine": "fabric",
        "targetContextRatio": 0.65,
        "thresholds": {},
        "tokenThresholds": {},
    }
    c = normalize_config({"compaction": {"engine": "pi", "targetContextRatio": 0.7}})
    assert (c["engine"], c["targetContextRatio"]) == ("pi", 0.7)
    assert normalize_config({"engine": "bogus", "targetContextRatio": 2})["targetContextRatio"] == 0.85
    assert normalize_config({"engine": "bogus"})["engine"] == "fabric"
    assert normalize_config({"targetContextRatio": 0.1})["targetContextRatio"] == 0.25
    assert normalize_config({"targetContextRatio": "x"})["targetContextRatio"] == 0.65
    assert normalize_config({"thresholds": {"a/b": 0.99, "nokey": 0.5, "c/d": "x", "e/f": 0.1}})["thresholds"] == {
        "a/b": 0.95,
        "e/f": 0.25,
    }
    t = normalize_config({"tokenThresholds": {"a/b": 5, "c/d": 1e12, "e/f": 150000.6, "bad": 3, "g/h": None}})[
        "tokenThresholds"
    ]
    assert t == {"a/b": 1000, "c/d": 100000000, "e/f": 150001}


def test_threshold_deferral():
    b = example1()
    kw = dict(tokens_before=70000, context_window=100000, model_key="openai/gpt-5")
    assert (
        compaction_hook(b, reason="threshold", config={"thresholds": {"openai/gpt-5": 0.8}}, **kw)["result"] == "cancel"
    )
    h = compaction_hook(b, reason="threshold", config={"thresholds": {"openai/gpt-5": 0.7}}, **kw)
    assert h["reason"] == "fabric: no deterministic summary fits the continuity context target"  # not deferred
    h = compaction_hook(
        b, reason="threshold", config={"thresholds": {"openai/gpt-5": 0.7}}, **dict(kw, context_window=None)
    )
    assert h["result"] == "compaction"
    assert (
        compaction_hook(b, reason="overflow", config={"thresholds": {"openai/gpt-5": 0.8}, "engine": "pi"}, **kw)[
            "result"
        ]
        == "passthrough"
    )
    # token thresholds win over ratios
    cfg = {"thresholds": {"openai/gpt-5": 0.25}, "tokenThresholds": {"openai/gpt-5": 150000}}
    assert compaction_hook(b, reason="threshold", config=cfg, **kw)["result"] == "cancel"
    kw2 = dict(kw, tokens_before=150000)
    assert compaction_hook(b, reason="threshold", config=dict(cfg, engine="pi"), **kw2)["result"] == "passthrough"
    assert compaction_hook(b, reason="manual", config=dict(cfg, engine="pi"), **kw)["result"] == "passthrough"


# -------------------------------------------------------------------- precedence


def test_precedence_and_empty_branches():
    assert compaction_hook(example1(), tokens_before=1000, custom_instructions="__pi_vcc__")["result"] == "passthrough"
    assert compaction_hook([], tokens_before=0)["result"] == "cancel"
    assert compaction_hook([], tokens_before=0, pi_vcc_overriding=True)["result"] == "passthrough"
    assert compaction_hook(example1(), tokens_before=1000, config={"engine": "pi"})["result"] == "passthrough"
    assert compaction_hook(example1(), tokens_before=1000)["result"] == "compaction"


# ---------------------------------------------------------------- custom messages


def test_custom_messages_structural_and_plain_custom_excluded():
    b = link(
        [
            user("goal"),
            custom_message("pi-fabric-actor", "actor fact A", True),
            custom_message(
                "pi-fabric-agent-complete",
                [{"type": "text", "text": "agent fact B"}, {"type": "image", "data": "x", "mimeType": "image/png"}],
                False,
            ),
            plain_custom("state", {"secret": "never shown"}),
            user("later"),
            assistant(text("ok")),
        ]
    )
    evs = normalize(b)
    cms = [e for e in evs if e["type"] == "customMessage"]
    assert [(e["customType"], e["text"], e["display"]) for e in cms] == [
        ("pi-fabric-actor", "actor fact A", True),
        ("pi-fabric-agent-complete", "agent fact B", False),
    ]
    r1, r2 = compile_(b), compile_(b)
    assert r1["summary"] == r2["summary"]
    s = r1["summary"]
    assert 'custom "pi-fabric-actor" (visible): "actor fact A"' in s
    assert 'custom "pi-fabric-agent-complete" (hidden): "agent fact B"' in s
    assert "never shown" not in s
    assert r1["details"]["counts"]["cumulativeSourceEntries"] == 3


def test_custom_message_boundary_inside_tool_pair_gives_compact_all():
    b = link(
        [
            user("u"),
            assistant(call("x", "read", {"path": "a"})),
            custom_message("t", "c", True),
            tool_result("x", "read", "ok"),
        ]
    )
    r = compile_(b)
    assert r["firstKeptEntryId"] == ""
    assert r["details"]["counts"]["liveCutEntries"] == 4


def test_malformed_custom_details_dropped_and_malformed_entries_ignored():
    cyc: dict = {"a": 1}
    deep: object = "x"
    for _ in range(20):
        deep = [deep]
    b = link(
        [
            user("u"),
            custom_message("t", "content kept", True, deep),
            custom_message(7, {"o": 1}, "yes"),
            custom_message("t2", "big details", True, {"k": "x" * 5000, "n": [1] * 300}),
            custom_message("t3", "nan", True, float("nan")),
            user("v"),
        ]
    )
    evs = [e for e in normalize(b) if e["type"] == "customMessage"]
    assert [e["text"] for e in evs] == ["content kept", "big details", "nan"]
    assert "details" not in evs[0] and "details" not in evs[2]
    d = evs[1]["details"]
    assert list(d) == ["k", "n"] and utf8_bytes(d["k"]) <= 1024 and len(d["n"]) == 64
    assert cyc


def test_custom_details_keys_sorted_and_bounded():
    b = link(
        [
            user("u"),
            custom_message(
                "t", "c", True, {"b": 1, "a": {"z": True, "y": None}, **{f"k{i:03d}": i for i in range(70)}}
            ),
            user("v"),
        ]
    )
    ev = [e for e in normalize(b) if e["type"] == "customMessage"][0]
    keys = list(ev["details"])
    assert keys == sorted(keys) and len(keys) == 64
    assert list(ev["details"]["a"]) == ["y", "z"]


# ----------------------------------------------------- determinism, section order


def test_section_order_and_single_turn():
    b = link([user("only"), assistant(text("reply"))])
    r = compile_(b)
    s = r["summary"]
    assert r["firstKeptEntryId"] == ""
    assert "[Files And Changes]" not in s and "[Outstanding Context]" not in s and "[Earlier Turns]" not in s
    assert s.index("[Session Goal]") < s.index("[Current Status]") < s.index("\n---\n")


def test_goal_lines_render_three_plus_ellipsis_and_later_requests():
    b = link(
        [
            user("one\ntwo\n\nthree\nfour"),
            assistant(text("a")),
            user("second request"),
            assistant(text("b")),
            user("final review"),
        ]
    )
    s = compile_(b)["summary"]
    assert "[Session Goal]\none\ntwo\nthree\n…\n- second request [entry e3]\n" in s
    assert "final review" not in s and "Last request: second request" in s


def test_no_commit_projection_from_shell_prose():
    b = link(
        [
            user("u"),
            bash_exec('git commit -m "x"', 0, "[main abc1234] x"),
            assistant(call("b1", "bash", {"command": "git commit -am y"})),
            tool_result("b1", "bash", "[main def5678] y"),
            user("v"),
        ]
    )
    r = compile_(b)
    assert "[Commits]" not in r["summary"] and "commits" not in r["details"]["omittedCounts"]


# ------------------------------------------------- cumulative truth and live cut


def test_cumulative_truth_across_compactions():
    b = link(
        [
            user("First goal"),
            assistant(call("a", "write", {"path": "a.ts"})),
            tool_result("a", "write", "ok"),
            user("Second"),
            assistant(text("x")),
            user("Third"),
        ]
    )
    r1 = compile_(b)
    assert r1["firstKeptEntryId"] == "e6"
    b2 = append_compaction(b, r1)
    b2 = extend(
        b2,
        [
            assistant(call("b", "edit", {"path": "b.ts"})),
            tool_result("b", "edit", "ok"),
            user("Fourth"),
            assistant(text("y")),
        ],
        "f",
    )
    r2 = compile_(b2)
    s = r2["summary"]
    for goal in ("First goal", "Second", "Third"):
        assert goal in s
    assert "Fourth" not in s.split("\n---\n")[0]
    assert "a.ts" in s and "b.ts" in s
    assert r2["firstKeptEntryId"] == "f2"
    assert r2["details"]["counts"]["priorFabricV2"] == 1
    assert "[compacted" in s and s.count("[Session Goal]") == 1


def test_many_compaction_cycles_keep_raw_truth_and_stay_bounded():
    b = link(
        [
            user("Original goal: keep PINNED_FACT"),
            custom_message("fact", "CUSTOM_FACT", True),
            assistant(call("w", "write", {"path": "a.ts"})),
            tool_result("w", "write", "ok"),
            assistant(call("r", "read", {"path": "never-existed.ts"})),
            tool_result("r", "read", "ENOENT: gone", True),
            user("next"),
        ]
    )
    sizes = []
    kept_prev = None
    for cycle in range(40):
        r = compile_(b)
        again = compile_(b)
        assert r["summary"] == again["summary"]
        s = r["summary"]
        assert "Original goal: keep PINNED_FACT" in s and "CUSTOM_FACT" in s and "a.ts" in s
        assert "never-existed.ts: ENOENT: gone" in s
        assert "POISON" not in s
        assert utf8_bytes(s) <= 32768
        assert r["firstKeptEntryId"] != kept_prev
        kept_prev = r["firstKeptEntryId"]
        sizes.append(utf8_bytes(s))
        b = append_compaction(b, r)
        b[-1]["summary"] = "POISON prior summary " + b[-1]["summary"]
        b = extend(
            b,
            [
                assistant(call(f"e{cycle}", "edit", {"path": f"f{cycle}.ts"})),
                tool_result(f"e{cycle}", "edit", "ok"),
                user(f"turn {cycle}"),
            ],
            f"k{cycle}_",
        )
    assert max(sizes[-10:]) - min(sizes[-10:]) < 512


def test_v1_marker_counted_and_prior_summary_not_read():
    v1 = {
        "compactor": "fabric",
        "version": 1,
        "sections": ["[Session Goal]"],
        "summarizedEntryRange": {"first": "e1", "last": "e2"},
        "sourceEntryCount": 2,
        "firstKeptEntryId": "e3",
        "timestamp": "t",
    }
    b = link(
        [
            user("raw goal"),
            assistant(text("a")),
            user("b"),
            compaction_entry("e3", "PRIOR SUMMARY POISON", v1),
            assistant(text("c")),
            user("d"),
        ]
    )
    r = compile_(b)
    assert r["details"]["counts"]["priorFabricV1"] == 1
    assert r["details"]["version"] == 2
    assert "raw goal" in r["summary"] and "POISON" not in r["summary"]


def test_orphan_prior_kept_boundary_recovers():
    b = link(
        [
            user("pre-marker goal"),
            assistant(text("a")),
            compaction_entry("missing-id", "POISON"),
            user("after"),
            assistant(text("b")),
            user("last"),
        ]
    )
    r = compile_(b)
    assert r["firstKeptEntryId"] == "e6"
    assert "pre-marker goal" in r["summary"] and "POISON" not in r["summary"]


# ---------------------------------------------------------- outstanding errors


def test_outstanding_state_machine():
    b = link(
        [
            user("u"),
            assistant(call("r1", "read", {"path": "src/x.ts"})),
            tool_result("r1", "read", "boom", True),
            assistant(call("e1", "edit", {"path": "src/x.ts"})),
            tool_result("e1", "edit", "ok"),
            bash_exec("make test", 2, "fail"),
            bash_exec("make test", 0, "pass"),
            assistant(call("e2", "edit", {"path": "src/y.ts"})),
            tool_result("e2", "edit", "Could not find the exact text", True),
            user("v"),
        ]
    )
    s = compile_(b)["summary"]
    out = s.split("[Outstanding Context]\n")[1].split("\n\n")[0].split("\n")
    assert out == [
        "- read src/x.ts: boom [entry e2]",
        "- edit src/y.ts: Could not find the exact text [entry e8]",
        "- bash: make test: fail [RESOLVED] [entry e6]",
    ]


# --------------------------------------------------------------- closure-safe cut


def test_cut_never_splits_pairs_and_in_flight_call_stays_kept():
    b = link(
        [
            user("a"),
            assistant(call("1", "read", {"path": "p"})),
            tool_result("1", "read", "ok"),
            user("b"),
            assistant(call("2", "read", {"path": "q"})),
        ]
    )
    r = compile_(b)
    assert r["firstKeptEntryId"] == "e4"
    # parallel delayed: a result after the next user keeps the pair together
    b = link(
        [
            user("a"),
            assistant(call("1", "read", {"path": "p"}), call("2", "read", {"path": "q"})),
            tool_result("1", "read", "ok"),
            user("b"),
            tool_result("2", "read", "late"),
            user("c"),
        ]
    )
    r = compile_(b)
    assert r["firstKeptEntryId"] == "e6"
    # the same with the delayed result as the last entry: the only boundary would split it
    b = link(
        [
            user("a"),
            assistant(call("1", "read", {"path": "p"}), call("2", "read", {"path": "q"})),
            tool_result("1", "read", "ok"),
            user("b"),
            tool_result("2", "read", "late"),
        ]
    )
    assert compile_(b)["firstKeptEntryId"] == ""
    # reversed pair: result before call, around the last user
    b = link([user("a"), tool_result("9", "read", "early"), user("b"), assistant(call("9", "read", {"path": "z"}))])
    assert compile_(b)["firstKeptEntryId"] == ""
    b = link(
        [
            user("a"),
            tool_result("9", "read", "early"),
            user("b"),
            assistant(call("9", "read", {"path": "z"})),
            user("c"),
        ]
    )
    assert compile_(b)["firstKeptEntryId"] == "e5"


def test_cut_edge_cases():
    assert compute_cut([]) == {"ok": False, "reason": "empty"}
    assert compile_([])["reason"] == "fabric: nothing to compact"
    only_marker = link([compaction_entry("", "s")])
    assert compute_cut(only_marker)["ok"] is False
    b = link([user("a"), assistant(text("b"))])
    c = compute_cut(b)
    assert c["firstKeptEntryId"] == "" and len(c["summarized"]) == 2


# --------------------------------------------------------------- continuity tail


def test_continuity_manual_at_larger_window_and_low_occupancy():
    branch, tb = long_single_turn()
    r = compile_(branch, tb, budget=dict(BUDGET, contextWindow=400000))
    b = r["details"]["budget"]
    assert b["bindingConstraint"] == "continuity"
    assert b["targetContextTokens"] < 0.95 * tb
    assert b["projectedTokensAfter"] <= b["targetContextTokens"]
    assert b["retainedRawTokens"] <= 20000
    ctx = build_context_messages(append_compaction(branch, r, tb))
    assert sum(1 for m in ctx if m["role"] == "compactionSummary") == 1


def test_continuity_selects_largest_legal_suffix():
    branch, tb = long_single_turn()
    r = compile_(branch, tb, budget=dict(BUDGET, keepRecentTokens=2500 - 0))
    b = r["details"]["budget"]
    assert b["rawTailTokenBudget"] <= 2500 + 0 or b["bindingConstraint"] != "continuity"
    # no earlier legal boundary also fits
    from fabric_lsp.engine.compaction.cut import Projection, Spans, live_items

    proj = Projection(branch)
    live = live_items(branch, 0, proj)
    spans = Spans(branch)
    idx = [i for i, it in enumerate(live) if it.id == r["firstKeptEntryId"]][0]
    suffix = lambda i: sum(it.tokens for it in live[i:])  # noqa: E731
    assert suffix(idx) == b["retainedRawTokens"] <= b["rawTailTokenBudget"]
    for j in range(1, idx):
        if live[j].cut_point and spans.safe(live[j].branch_index):
            assert suffix(j) > b["rawTailTokenBudget"]


def test_overflow_clamps_window_to_observed_failure():
    branch, tb = long_single_turn()
    h = compaction_hook(
        branch, tokens_before=tb, reason="overflow", context_window=400000, config={"targetContextRatio": 0.65}
    )
    b = h["compaction"]["details"]["budget"]
    assert b["contextWindow"] == int(tb * 0.9)
    assert b["projectedTokensAfter"] < tb
    h2 = compaction_hook(branch, tokens_before=tb, reason="threshold", context_window=400000)
    assert h2["compaction"]["details"]["budget"]["contextWindow"] == 400000
    h3 = compaction_hook(branch, tokens_before=tb, reason="overflow", context_window=None)
    assert h3["compaction"]["details"]["budget"]["contextWindow"] == int(tb * 0.9)


def test_cancel_when_even_compact_all_cannot_fit():
    branch, tb = long_single_turn()
    r = compile_(branch, 100, budget=BUDGET)
    assert r.get("cancel") and r["reason"] == "fabric: no deterministic summary fits the continuity context target"


def test_fixed_overhead_without_usage():
    b = link(
        [
            user("g"),
            *[
                x
                for i in range(30)
                for x in (assistant(call(f"r{i}", "read", {"path": f"f{i}"})), tool_result(f"r{i}", "read", "y" * 4000))
            ],
        ]
    )
    from fabric_lsp.engine.compaction.cut import Projection

    raw = Projection(b).context_tokens(len(b))
    r = compile_(b, raw + 40000, budget=BUDGET)
    bud = r["details"]["budget"]
    assert bud["fixedOverheadTokens"] == 40000 and bud["tokenScale"] == 1
    assert bud["projectedTokensAfter"] <= 65000


def test_reserve_ceiling_and_prior_marker_never_live():
    branch, tb = long_single_turn()
    r = compile_(branch, tb, budget=dict(BUDGET, reserveTokens=30000, keepRecentTokens=100000, targetContextRatio=0.85))
    assert r["details"]["budget"]["safeCeilingTokens"] == 63000
    b2 = append_compaction(branch, r, tb)
    b2 = extend(b2, [user("after marker"), assistant(text("z"))], "m")
    r2 = compile_(b2, tb, budget=BUDGET)
    if not r2.get("cancel"):
        kept_idx = [e["id"] for e in b2].index(r2["firstKeptEntryId"]) if r2["firstKeptEntryId"] else len(b2)
        assert kept_idx > len(branch)


def test_missing_usage_is_no_checkpoint():
    branch, tb = long_single_turn()
    for e in branch:
        m = e.get("message", {})
        if m.get("role") == "assistant":
            m.pop("usage", None)
    r = compile_(branch, tb, budget=BUDGET)
    assert "budget" in r["details"]
    assert r["details"]["budget"]["tokenScale"] == 1


# ------------------------------------------------------------ trace and branches


def test_trace_run_pairing_and_degradation():
    r = compile_(example2())
    evs = r["events"]
    run = [e for e in evs if e["type"] == "fabricRun"][0]
    assert (run["entryId"], run["sourceEntryId"], run["address"], run["source"]) == ("e2", "e3", "e2/call:f1", "trace")
    s = r["summary"]
    assert 'fabric_exec "Audit release" → failed [entry e2]' in s
    assert "Check files and run tests" not in s.split("\n---\n")[1]


def test_trace_outcome_display_repair_and_mismatch():
    def run_for(display, cid_call="f1", cid_result="f1", outcome="timed_out"):
        t = copy.deepcopy(EXAMPLE_TRACE)
        t["outcome"] = outcome
        b = link(
            [
                user("u"),
                assistant(call(cid_call, "fabric_exec", {"code": "x", "display": display})),
                tool_result(cid_result, "fabric_exec", "prose", False, {"trace": t}),
                user("v"),
            ]
        )
        return [e for e in normalize(b) if e["type"] == "fabricRun"]

    assert run_for({"name": "N"})[0]["outcome"] == "timed_out"
    assert run_for({"description": "only"}) == []
    assert run_for({"name": "N"}, cid_result="other") == []
    assert run_for("  Plain name  ")[0]["name"] == "Plain name"
    assert run_for('{"name":"From JSON","description":"d"}')[0]["description"] == "d"
    assert run_for('{"nope":1}')[0]["name"] == '{"nope":1}'
    assert run_for("   ") == []


def test_multibyte_intent_bounds():
    b = link(
        [
            user("u"),
            assistant(
                call("mb", "fabric_exec", {"code": "x", "display": {"name": "名" * 400, "description": "説" * 800}})
            ),
            tool_result("mb", "fabric_exec", "ok", False),
            user("v"),
        ]
    )
    b[1]["id"] = "mb1"
    b[2]["parentId"] = "mb1"
    run = [e for e in normalize(b) if e["type"] == "fabricRun"][0]
    assert utf8_bytes(run["name"]) <= 256 and utf8_bytes(run["description"]) <= 1024
    s = compile_(b)["summary"]
    line = [ln for ln in s.split("\n") if ln.startswith("- 名")][0]
    assert utf8_bytes(line) <= 1024 and line.endswith("→ succeeded [entry mb1]")


def test_legacy_audits_and_no_fallback_from_bad_traces():
    audits = {"audits": [{"ref": "pi.read", "args": {"path": "a"}, "success": True}]}

    def ops(details):
        b = link(
            [
                user("u"),
                assistant(call("f", "fabric_exec", {"code": "x"})),
                tool_result("f", "fabric_exec", "p", False, details),
            ]
        )
        return [e for e in normalize(b) if e["type"] == "fabricOperation"]

    got = ops(audits)
    assert len(got) == 1 and got[0]["source"] == "legacy" and got[0]["tool"] == "read"
    bad = copy.deepcopy(EXAMPLE_TRACE)
    bad["version"] = 2
    assert ops({"trace": bad, **audits}) == []
    assert ops({"audits": [{"ref": "x", "args": {}, "success": "yes"}]}) == []
    assert ops({"trace": dict(EXAMPLE_TRACE, extra=1)}) == []


def test_no_facts_from_prose_without_trace():
    b = link(
        [
            user("u"),
            assistant(call("f", "fabric_exec", {"code": "await pi.write({path:'fake.ts'})"})),
            tool_result("f", "fabric_exec", "wrote src/fake.ts; error: boom", False),
            user("v"),
        ]
    )
    s = compile_(b)["summary"]
    assert "fake.ts" not in s.split("\n---\n")[0]
    assert "[Fabric Activity]" not in s


def test_tree_hook_modes_and_branch_details_reader():
    b = example2()[:4]
    t = tree_hook(b, custom_instructions="__pi_vcc__ keep this opaque", old_leaf_id="e3")
    assert "__pi_vcc__ keep this opaque" in t["summary"]["summary"]
    det = t["summary"]["details"]
    assert read_branch_details(det) is det and det["source"]["oldLeafId"] == "e3"
    assert tree_hook(b, user_wants_summary=False)["result"] == "passthrough"
    assert tree_hook(b, replace_instructions=True)["result"] == "passthrough"
    bad = tree_hook(b, custom_instructions='__pi_fabric_compact_request_v1__:{"version":1,"x":1}')
    assert bad["result"] == "cancel" and "notification" in bad
    # v1 copy without run facts reads as v1; v2 is never read as v1
    v1 = copy.deepcopy(det)
    v1["version"] = 1
    v1["facts"] = [f for f in v1["facts"] if f["kind"] != "fabricRun"]
    assert read_branch_details(v1)["version"] == 1
    v1bad = copy.deepcopy(det)
    v1bad["version"] = 1
    assert read_branch_details(v1bad) is None
    long = copy.deepcopy(det)
    long["facts"][1]["name"] = "x" * 257
    assert read_branch_details(long) is None


def test_nested_branch_facts_and_no_sibling_contamination():
    t = tree_hook(example2()[:4], old_leaf_id="e4")
    bs = {"type": "branch_summary", "fromId": "root", "summary": "PROSE POISON", "details": t["summary"]["details"]}
    active = link([user("main goal"), bs, user("continue"), assistant(text("ok")), user("more")], prefix="m")
    r = compile_(active)
    s = r["summary"]
    assert "new.md" in s and "agents.run" in s and "Audit release" in s and "[entry e2/call:f1]" in s
    assert "PROSE POISON" not in s
    assert "Agent reviewer finished" in s
    # nested compile re-emits facts
    t2 = tree_hook(active[:3], old_leaf_id="m3")
    kinds = [f["kind"] for f in t2["summary"]["details"]["facts"]]
    assert "fabricRun" in kinds and "customMessage" in kinds
    sibling = link([user("sibling only"), assistant(text("x")), user("y")], prefix="s")
    assert "new.md" not in compile_(sibling)["summary"]


def test_malformed_branch_custom_details_invalidate_envelope():
    t = tree_hook(example2()[:4], old_leaf_id="e4")
    det = copy.deepcopy(t["summary"]["details"])
    deep: object = 1
    for _ in range(20):
        deep = [deep]
    det["facts"][-1]["details"] = deep
    bs = {"type": "branch_summary", "fromId": "root", "summary": "s", "details": det}
    evs = normalize(link([bs, user("later")]))
    assert [e["type"] for e in evs] == ["user"]


def test_branch_facts_bounded_under_large_traces():
    entries = [user("u")]
    for i in range(300):
        tr = copy.deepcopy(EXAMPLE_TRACE)
        tr["operations"][1]["result"] = {"created": True, "blob": "z" * 400}
        entries += [
            assistant(call(f"f{i}", "fabric_exec", {"code": "x", "display": {"name": f"run {i}"}})),
            tool_result(f"f{i}", "fabric_exec", "p", False, {"trace": tr}),
        ]
    b = link(entries)
    t1 = tree_hook(b, old_leaf_id=b[-1]["id"])
    t2 = tree_hook(b, old_leaf_id=b[-1]["id"])
    det = t1["summary"]["details"]
    assert json.dumps(det) == json.dumps(t2["summary"]["details"])
    assert len(det["facts"]) <= 256 and det["omittedFacts"] > 0
    from fabric_lsp.engine.jsstr import js_stringify

    assert utf8_bytes(js_stringify(det)) <= 131072
    assert utf8_bytes(t1["summary"]["summary"]) <= 32768
