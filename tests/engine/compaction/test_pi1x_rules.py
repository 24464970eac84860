"""Pi 1.x's rules (issue 31): on sessions Pi 1.6.0 wrote, the preview gives Pi's own
outcome and `tokensBefore`, the Fabric engine reads the projected context, overflow
recovery keeps the user's question verbatim, and old-format sessions are untouched.

Pi's answers come from real Pi 1.6.0: recorded in tests/fixtures/pi160/expected.json by
tests/fixtures/pi160/record_answers.py (no Pi needed to compare), and asked live on
random sessions by the `realpi` test at the end (Pi 1.x installed by
scripts/deps/realpi.sh into .tools/pi160, or `$FABRIC_PI1X_PKG`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.compaction import pi1x, pigate
from fabric_lsp.engine.compaction.api import PreviewError, compaction_run, preview_compaction
from fabric_lsp.engine.compaction.cut import compute_cut
from fabric_lsp.engine.compaction.facts import NOMSG
from fabric_lsp.engine.compaction.hook import compaction_hook
from fabric_lsp.engine.jsstr import js_stringify
from fabric_lsp.engine.session import (
    SessionTree,
    estimate_projected_context_tokens,
    projected_messages,
    read_session,
)
from tests.support.examples import profile_examples

ROOT = Path(__file__).resolve().parents[3]
PI160 = ROOT / "tests" / "fixtures" / "pi160"
REAL_SESSIONS = ROOT / "tests" / "fixtures" / "real-sessions"
EXPECTED = json.loads((PI160 / "expected.json").read_text(encoding="utf-8"))
NODE = ROOT / ".tools" / "node22" / "node_modules" / ".bin" / "node"
ORACLE = Path(__file__).resolve().parent / "pi1x_oracle.mjs"
NOTHING = "Pi would keep everything: Nothing to compact (session too small)"


def branch_of(path: Path, leaf: str | None = None) -> list[dict]:
    tree = SessionTree.from_records(read_session(path).records)
    return [r.raw for r in tree.branch(leaf).entries]


def test_the_recorded_answers_are_pi_1_6_0s_for_every_fixture():
    assert EXPECTED["piVersion"] == "1.6.0"
    assert sorted(EXPECTED["sessions"]) == sorted(p.name for p in PI160.glob("*.jsonl"))


@pytest.mark.parametrize("name", sorted(EXPECTED["sessions"]))
def test_gate_and_tokens_before_equal_pi_1_6_0_on_every_leaf(name):
    path = PI160 / name
    tree = SessionTree.from_records(read_session(path).records)
    rows = EXPECTED["sessions"][name]
    assert rows
    for n, row in enumerate(rows):
        branch = [r.raw for r in tree.branch(row["leafId"]).entries]
        keep = row["keepRecentTokens"]
        assert estimate_projected_context_tokens(branch) == row["tokensBefore"], row
        assert pi1x.pi_tokens_before(branch) == row["tokensBefore"], row
        assert [m["role"] for m in projected_messages(branch)] == row["contextRoles"], row
        ours = pi1x.prepare_compaction(branch, keep)
        pi = row["prepared"]
        if pi is None:
            assert not ours["ok"], (row, ours)
        else:
            assert ours["ok"], (row, ours)
            assert pi["tokensBefore"] == row["tokensBefore"]
            for key in ("firstKeptEntryId", "isSplitTurn", "messagesToSummarize", "turnPrefixMessages"):
                assert ours[key] == pi[key], (row, key, ours)
        if n % 3:
            continue
        # the preview reads the file with the streaming scanner: same gate, same tokensBefore
        res = preview_compaction(str(path), leaf_id=row["leafId"], keep_recent_tokens=keep, context_window=0)
        assert res["piRules"] == "1.x"
        assert res["tokensBefore"] == row["tokensBefore"], row
        if pi is None:
            assert res["outcome"] == "skipped", (row, res)
            assert res["reason"] in (NOTHING, "Pi would keep everything: Already compacted"), res
        else:
            assert not res.get("reason", "").startswith("Pi would keep everything"), (row, res)


def test_nothing_to_compact_on_a_fresh_1_6_0_session_is_pis_answer_not_a_cancel(tmp_path):
    """Finding 3: Pi 1.6.0 says "Nothing to compact" for one exchange (its persisted
    system message is prompt state, not something to summarize)."""
    path = PI160 / "lab-one.jsonl"
    (row,) = [
        r for r in EXPECTED["sessions"]["lab-one.jsonl"] if r["leafId"] == "12380bd0" and r["keepRecentTokens"] == 20000
    ]
    assert row["prepared"] is None
    res = preview_compaction(str(path))
    assert (res["outcome"], res["reason"], res["tokensBefore"]) == ("skipped", NOTHING, row["tokensBefore"])
    # Pi 0.80.6's rules (what the engine used before) would summarize the system message
    old = preview_compaction(str(path), settings={"piRules": "0.80"})
    assert old["outcome"] == "cancelled" and "piRules" not in old
    # the CLI says it, with Pi's reason, and exits 1 (skipped)
    out = subprocess.run(
        [sys.executable, "-m", "fabric_lsp", "preview", str(path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 1, out
    assert "Nothing to compact (session too small)" in out.stdout + out.stderr


def test_an_outside_commit_on_a_1_6_0_session_clears_quietly_with_pis_reason(tmp_path):
    """`fabric-lsp compact` from outside Pi: Pi's "Nothing to compact", nothing appended."""
    from fabric_lsp.engine.intents.commit import NOTHING_TO_COMPACT, attempt_commit, default_compute
    from fabric_lsp.engine.intents.controller import QUIET_MESSAGES, Failed
    from fabric_lsp.engine.intents.store import IntentStore

    path = tmp_path / "s.jsonl"
    shutil.copyfile(PI160 / "lab-one.jsonl", path)
    os.utime(path, (1, 1))
    before = path.read_bytes()
    out = attempt_commit(
        str(path),
        {"requestedBy": "user"},
        "i1",
        store=IntentStore(tmp_path / "state"),
        compute=default_compute(),
        quiet_interval_s=0,
    )
    assert isinstance(out, Failed) and out.message == NOTHING_TO_COMPACT and out.message in QUIET_MESSAGES, out
    assert path.read_bytes() == before
    # what it was under Pi 0.80.6's rules: a recorded failure
    old = attempt_commit(
        str(path),
        {"requestedBy": "user"},
        "i2",
        store=IntentStore(tmp_path / "state"),
        compute=default_compute({"settings": {"piRules": "0.80"}}),
        quiet_interval_s=0,
    )
    assert isinstance(old, Failed) and old.message.startswith("Compaction cancelled: "), old


def test_a_bad_pi_rules_setting_is_a_clear_error():
    with pytest.raises(PreviewError) as err:
        preview_compaction(str(PI160 / "lab-one.jsonl"), settings={"piRules": "2.0"})
    assert err.value.code == "invalid_params" and "piRules" in err.value.message


# ------------------------------------------------------------------ overflow recovery


def truncated(src: Path, tmp_path: Path, last_id: str) -> Path:
    """The file up to the entry `last_id`: the state Pi's overflow recovery hands over."""
    out = []
    for line in src.read_text(encoding="utf-8").splitlines(True):
        out.append(line)
        if json.loads(line).get("id") == last_id:
            break
    path = tmp_path / src.name
    path.write_text("".join(out), encoding="utf-8")
    return path


OVERFLOWS = [
    # (file, its last entry before Pi's recovery compaction, the question, the hidden attempt)
    (PI160 / "lab-overflow400.jsonl", "91ff0224", "1099fd90", "1f0e8574"),
    (PI160 / "retries-and-overflow.jsonl", "c1a31415", "f2a437d7", "69ada4ba"),
]


@pytest.mark.parametrize("src,edit,question,attempt", OVERFLOWS, ids=lambda v: getattr(v, "name", v))
@pytest.mark.parametrize("keep", [1, 40, 300])
@pytest.mark.parametrize("window", [0, 128000])
def test_overflow_recovery_keeps_the_question_verbatim(tmp_path, src, edit, question, attempt, keep, window):
    path = truncated(src, tmp_path, edit)
    branch = branch_of(path)
    ids = [e["id"] for e in branch]
    tokens_before = pi1x.pi_tokens_before(branch)  # what Pi hands to session_before_compact
    res, hook = compaction_run(
        str(path), reason="overflow", keep_recent_tokens=keep, context_window=window, tokens_before=tokens_before
    )
    if res["outcome"] == "skipped":  # Pi itself keeps everything: no hook runs
        assert not pi1x.prepare_compaction(branch, keep)["ok"]
        return
    assert res["outcome"] == "compacted", res
    kept = res["firstKeptEntryId"]
    assert kept and kept != attempt
    assert ids.index(kept) <= ids.index(question), (kept, question)
    # the retried request (Pi 1.6.0's projection after the append) holds the question verbatim
    entry = {
        "type": "compaction",
        "id": "ffff0000",
        "parentId": ids[-1],
        "timestamp": "2026-12-05T00:00:00.000Z",
        "summary": res["summary"],
        "firstKeptEntryId": kept,
        "tokensBefore": tokens_before,
    }
    after = projected_messages(branch + [entry])
    q = next(e for e in branch if e["id"] == question)["message"]
    assert q in after


def test_overflow_on_a_0_80_6_session_keeps_the_question_too(tmp_path):
    """Pi 0.80.6 leaves the failed attempt in the file (it drops it in memory only)."""
    src = PI160 / "lab-overflow400.jsonl"
    # the same conversation without Pi 1.x's system message and edit: a 0.80.6-shaped file
    rows = [json.loads(line) for line in src.read_text().splitlines()]
    keep_rows, prev = [], None
    for r in rows[:10]:
        if r.get("type") == "context_edit" or (r.get("type") == "message" and r["message"]["role"] == "system"):
            continue
        if r.get("type") != "session":
            r["parentId"] = prev
            prev = r["id"]
        keep_rows.append(r)
    path = tmp_path / "old.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in keep_rows))
    res, _ = compaction_run(str(path), reason="overflow", keep_recent_tokens=5, context_window=128000)
    assert "piRules" not in res and res["outcome"] == "compacted", res
    assert res["firstKeptEntryId"] == "1099fd90"
    # the reference's cut, without the rule: no summary at all (so no recovery), or one without the question
    from fabric_lsp.engine.compaction.hook import compile_fabric_summary

    branch = branch_of(path)
    budget = {
        "contextWindow": min(int(res["tokensBefore"] * 0.9), 128000),
        "targetContextRatio": 0.65,
        "reserveTokens": 16384,
        "keepRecentTokens": 5,
    }
    ref = compile_fabric_summary(branch, res["tokensBefore"], None, dict(budget), keep_question=False)
    assert ref.get("cancel") or ref["firstKeptEntryId"] in ("", "1f0e8574"), ref
    ours = compile_fabric_summary(branch, res["tokensBefore"], None, dict(budget), keep_question=True)
    assert ours["firstKeptEntryId"] == "1099fd90" and ours["summary"] == res["summary"]


def test_the_bridge_compute_action_keeps_the_question(tmp_path):
    """What the Pi extension runs at session_before_compact (fabric-lsp pi compute)."""
    path = truncated(PI160 / "lab-overflow400.jsonl", tmp_path, "91ff0224")
    payload = {
        "session": str(path),
        "reason": "overflow",
        "tokensBefore": 1636,
        "cwd": str(tmp_path),
        "settings": {"keepRecentTokens": 40, "reserveTokens": 2000},
        "model": {"provider": "fakeai", "id": "fake-coder", "contextWindow": 128000},
    }
    env = dict(os.environ, PI_CODING_AGENT_DIR=str(tmp_path / "agent"), HOME=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-m", "fabric_lsp", "pi", "compute"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert answer["action"] == "compaction", answer
    assert answer["compaction"]["firstKeptEntryId"] == "1099fd90"


# ---------------------------------------------------------------- the engine's view


def test_the_summary_reads_a_replaced_entry_with_its_replacement():
    path = PI160 / "replacement.jsonl"
    res = preview_compaction(str(path), keep_recent_tokens=10, context_window=0)
    assert res["outcome"] == "compacted" and res["piRules"] == "1.x"
    assert "→ ok: [notes.txt output trimmed by the replace-ext fixture]" in res["summary"]
    assert "note line 1" not in res["summary"]
    old = preview_compaction(str(path), keep_recent_tokens=10, context_window=0, settings={"piRules": "0.80"})
    assert "→ ok: note line 1" in old["summary"]


def test_a_hidden_attempt_is_never_summarized_or_kept():
    path = PI160 / "retries-and-overflow.jsonl"
    for leaf in ("7457331b", "d1c542c3"):  # after the 503 retry's hidden attempt
        branch = branch_of(path, leaf)
        f = pi1x.FabricView(branch)
        pos = [e["id"] for e in branch].index("95a4ef17")
        assert f.kinds[pos][1] is NOMSG and f.tokens[pos] == 0 and pos not in f.usage  # hidden: no context message
        cut = compute_cut(f)
        assert all(it.id != "95a4ef17" for it in cut["summarized"])
        assert cut["firstKeptEntryId"] != "95a4ef17"


def test_scanned_preview_equals_the_hook_on_raw_entries_for_every_leaf():
    """The streaming scanner (pass 1 + pass 2 with the projection) and the hook on the
    session package's raw dicts compute the same bytes under Pi 1.x's rules."""
    for path in sorted(PI160.glob("*.jsonl")):
        ids = [r.id for r in read_session(path).records if r.valid]
        for leaf in ids[3:]:
            for window, keep in ((0, 10), (200000, 60)):
                res = preview_compaction(str(path), leaf_id=leaf, context_window=window, keep_recent_tokens=keep)
                branch = branch_of(path, leaf)
                assert res["tokensBefore"] == estimate_projected_context_tokens(branch)
                if res["outcome"] == "skipped":
                    continue
                h = compaction_hook(
                    branch,
                    tokens_before=res["tokensBefore"],
                    model_key=pigate.model_key(branch),
                    context_window=window or None,
                    rules="1.x",
                    pi_settings={"reserveTokens": 16384, "keepRecentTokens": keep},
                )
                if h["result"] == "compaction":
                    assert res["summary"] == h["compaction"]["summary"], (path.name, leaf)
                    assert res["firstKeptEntryId"] == h["compaction"]["firstKeptEntryId"]
                    assert js_stringify(res["details"]) == js_stringify(h["compaction"]["details"])
                else:
                    assert res["outcome"] != "compacted"


# ------------------------------------------------------------------ old format


@pytest.mark.parametrize("path", sorted(REAL_SESSIONS.glob("*.jsonl")), ids=lambda p: p.name[:2])
def test_old_format_sessions_use_0_80_6_rules_byte_for_byte(path):
    ids = [r.id for r in read_session(path).records if r.valid]
    for leaf in ids[:: max(1, len(ids) // 6)]:
        for reason in ("manual", "overflow"):
            auto = preview_compaction(str(path), leaf_id=leaf, keep_recent_tokens=300, include_qa=True)
            forced = preview_compaction(
                str(path), leaf_id=leaf, keep_recent_tokens=300, include_qa=True, settings={"piRules": "0.80"}
            )
            assert "piRules" not in auto
            assert msgspec.json.encode(auto) == msgspec.json.encode(forced), (path.name, leaf, reason)


# ------------------------------------------------------------ live Pi 1.x oracle


def pi1x_package() -> Path:
    env = os.environ.get("FABRIC_PI1X_PKG")
    pkg = Path(env) if env else ROOT / ".tools" / "pi160" / "node_modules" / "@earendil-works" / "pi-coding-agent"
    missing = [str(p) for p in (NODE, pkg / "dist" / "core" / "compaction" / "compaction.js") if not p.exists()]
    if missing:
        pytest.fail(
            "real Pi 1.x is not installed (missing " + ", ".join(missing) + "): run scripts/deps/realpi.sh "
            "(it installs Pi 1.6.0 into .tools/pi160), or point $FABRIC_PI1X_PKG at a Pi 1.x package dir"
        )
    return pkg


texts = st.sampled_from(["", "hi", "x" * 300, "日本語 🚀" * 20, "a\nb", "y" * 3000])


def _tool(name: str, size: int) -> dict:
    return {
        "name": name,
        "description": "d" * size,
        "parameters": {"type": "object", "properties": {"p": {"type": "string"}}, "1": 2},
    }


@st.composite
def pi1x_session(draw):
    """A linear session of what Pi 1.x writes: system messages (full and deltas), context
    edits (hiding and replacing, also of entries Pi would refuse), compactions with and
    without checkpoints (kept ranges, "", their own id), usage entries."""
    entries: list[dict] = []
    for i in range(draw(st.integers(1, 30))):
        ids = [e["id"] for e in entries]
        kind = draw(
            st.sampled_from(
                [
                    "user",
                    "assistant",
                    "assistant",
                    "result",
                    "system",
                    "delta",
                    "hide",
                    "replace",
                    "compaction",
                    "custom_message",
                    "branch_summary",
                    "usage",
                    "label",
                    "bash",
                    "error",
                ]
            )
        )
        if kind == "user":
            e = {
                "type": "message",
                "message": {"role": "user", "content": [{"type": "text", "text": draw(texts)}], "timestamp": 0},
            }
        elif kind in ("assistant", "error"):
            e = {
                "type": "message",
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": draw(texts)},
                        {"type": "toolCall", "id": f"c{i}", "name": "read", "arguments": {"path": draw(texts)}},
                    ],
                    "stopReason": "error" if kind == "error" else draw(st.sampled_from(["stop", "toolUse"])),
                    "usage": {
                        "input": 0,
                        "output": 0,
                        "cacheRead": 0,
                        "cacheWrite": 0,
                        "totalTokens": draw(st.sampled_from([0, 500, 50000])),
                    },
                    "timestamp": 0,
                },
            }
        elif kind == "result":
            e = {
                "type": "message",
                "message": {
                    "role": "toolResult",
                    "toolCallId": f"c{max(0, i - 1)}",
                    "toolName": "read",
                    "content": [{"type": "text", "text": draw(texts)}],
                    "isError": draw(st.booleans()),
                    "timestamp": 0,
                },
            }
        elif kind == "system":
            e = {
                "type": "message",
                "message": {
                    "role": "system",
                    "content": draw(st.sampled_from(["", "prompt"])),
                    "sections": {"a": draw(texts), "b": "bb"},
                    "timestamp": draw(st.sampled_from([1, 2])),
                    "toolsAdded": [_tool("read", 50), _tool("bash", 1)],
                },
            }
        elif kind == "delta":
            e = {
                "type": "message",
                "message": {
                    "role": "system",
                    "content": draw(st.sampled_from(["", "more"])),
                    "sections": {"a": None, "c": draw(texts)},
                    "timestamp": 3,
                    "toolsRemoved": [{"name": "bash"}],
                    "toolsAdded": [_tool("edit", 9)],
                },
            }
        elif kind in ("hide", "replace"):
            target = draw(st.sampled_from(ids + ["nope"])) if ids else "nope"
            repl = (
                None
                if kind == "hide"
                else {"content": draw(st.sampled_from(["short", "z" * 900, [{"type": "text", "text": "rr"}]]))}
            )
            e = {"type": "context_edit", "targetId": target, "replacement": repl}
        elif kind == "compaction":
            e = {
                "type": "compaction",
                "summary": draw(texts),
                "firstKeptEntryId": draw(st.sampled_from(["", f"e{i}", *ids[-4:]])),
                "tokensBefore": 1,
            }
            if draw(st.booleans()):
                e["systemMessage"] = {
                    "role": "system",
                    "content": "",
                    "sections": {"a": "x" * draw(st.sampled_from([10, 400]))},
                    "toolsAdded": [_tool("read", 5)],
                    "timestamp": 5,
                }
        elif kind == "custom_message":
            e = {"type": "custom_message", "customType": "t", "content": draw(texts), "display": draw(st.booleans())}
        elif kind == "branch_summary":
            e = {"type": "branch_summary", "fromId": "root", "summary": draw(texts)}
        elif kind == "usage":
            e = {
                "type": "usage",
                "kind": "cache_warm",
                "provider": "p",
                "model": "m",
                "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2},
            }
        elif kind == "label":
            e = {"type": "label", "targetId": "e0", "label": "l"}
        else:
            e = {
                "type": "message",
                "message": {
                    "role": "bashExecution",
                    "command": "ls",
                    "output": draw(texts),
                    "exitCode": 0,
                    "cancelled": False,
                    "truncated": False,
                    "timestamp": 0,
                },
            }
        entries.append(
            {
                "type": e.pop("type"),
                "id": f"e{i}",
                "parentId": f"e{i - 1}" if i else None,
                "timestamp": f"2025-01-01T00:00:{i % 60:02d}.000Z",
                **e,
            }
        )
    return entries


@pytest.mark.realpi
@settings(
    max_examples=profile_examples(4),
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
@given(st.lists(pi1x_session(), min_size=25, max_size=25))
def test_gate_and_tokens_before_equal_live_pi_1x_on_random_sessions(tmp_path, sessions):
    pkg = pi1x_package()
    requests, paths = [], []
    for n, entries in enumerate(sessions):
        path = tmp_path / f"r{n}.jsonl"
        header = {
            "type": "session",
            "version": 3,
            "id": f"s{n}",
            "timestamp": "2025-01-01T00:00:00.000Z",
            "cwd": str(tmp_path),
        }
        path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in [header, *entries]), encoding="utf-8")
        paths.append(path)
        for leaf in [e["id"] for e in entries][-8:]:
            for keep in (20000, 500, 50, 1):
                requests.append({"file": str(path), "leafId": leaf, "keepRecentTokens": keep})
    run = subprocess.run(
        [str(NODE), str(ORACLE), str(pkg)],
        input="".join(json.dumps(r) + "\n" for r in requests),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    answers = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    assert len(answers) == len(requests)
    assert answers[0]["piVersion"].startswith("1.")
    for req, pi in zip(requests, answers):
        assert "error" not in pi, (req, pi)
        branch = branch_of(Path(req["file"]), req["leafId"])
        assert [e["id"] for e in branch] == pi["pathIds"]
        assert pi1x.pi_tokens_before(branch) == pi["tokensBefore"] == estimate_projected_context_tokens(branch), req
        assert [m["role"] for m in projected_messages(branch)] == pi["contextRoles"], req
        ours = pi1x.prepare_compaction(branch, req["keepRecentTokens"])
        prep = pi["prepared"]
        if prep is None:
            assert not ours["ok"], (req, ours)
        else:
            assert ours["ok"], (req, ours, prep)
            for key in ("firstKeptEntryId", "isSplitTurn", "messagesToSummarize", "turnPrefixMessages"):
                assert ours[key] == prep[key], (req, key, ours, prep)
