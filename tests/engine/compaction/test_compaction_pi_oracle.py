"""Pi's gate and tokensBefore against real Pi 0.80.6 (installed by scripts/deps/realpi.sh).

`pi_oracle.mjs` loads each session with Pi's own SessionManager and calls Pi's exported
`prepareCompaction` / `estimateContextTokens`; the preview must say "skipped" exactly when
Pi's preparation is undefined, cut where Pi cuts, and pass the `tokensBefore` Pi passes.
A missing Pi fails, never skips.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.compaction.api import preview_compaction
from fabric_lsp.engine.compaction.pigate import pi_tokens_before, prepare_compaction
from fabric_lsp.engine.session import SessionTree, read_session
from tests.engine.compaction.conftest import REAL_SESSIONS
from tests.support.examples import profile_examples

pytestmark = pytest.mark.realpi

ROOT = Path(__file__).resolve().parents[3]
NODE = ROOT / ".tools" / "node22" / "node_modules" / ".bin" / "node"
PI_PKG = ROOT / ".tools" / "pi" / "node_modules" / "@earendil-works" / "pi-coding-agent"
ORACLE = Path(__file__).resolve().parent / "pi_oracle.mjs"
KEEPS = (20000, 2000, 300, 100, 1)


@pytest.fixture(scope="module")
def pi_oracle():
    missing = [str(p) for p in (NODE, PI_PKG / "dist" / "index.js") if not p.exists()]
    if missing:
        pytest.fail("real Pi is not installed (missing " + ", ".join(missing) + "): run scripts/deps/realpi.sh")

    def ask(requests: list[dict]) -> list[dict]:
        data = "".join(json.dumps(r) + "\n" for r in requests)
        out = subprocess.run(
            [str(NODE), str(ORACLE), str(PI_PKG)], input=data, capture_output=True, text=True, timeout=600
        )
        assert out.returncode == 0, out.stderr
        answers = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
        assert len(answers) == len(requests), out.stderr
        return answers

    return ask


def compare(path: Path, answers: list[dict], requests: list[dict]) -> int:
    log = read_session(path)
    tree = SessionTree.from_records(log.records)
    checked = 0
    for n, (req, pi) in enumerate(zip(requests, answers)):
        if "error" in pi:
            continue
        branch = [r.raw for r in tree.branch(req.get("leafId")).entries]
        assert [e["id"] for e in branch] == pi["pathIds"]
        assert pi_tokens_before(branch) == pi["tokensBefore"], req
        ours = prepare_compaction(branch, req["keepRecentTokens"])
        prep = pi["prepared"]
        if prep is None:
            assert not ours["ok"], (req, ours)
        else:
            assert ours["ok"], (req, ours, prep)
            assert ours["firstKeptEntryId"] == prep["firstKeptEntryId"], (req, ours, prep)
            assert ours["messagesToSummarize"] == prep["messagesToSummarize"], (req, ours, prep)
            assert ours["turnPrefixMessages"] == prep["turnPrefixMessages"], (req, ours, prep)
            assert ours["isSplitTurn"] == prep["isSplitTurn"], (req, ours, prep)
            assert prep["tokensBefore"] == pi["tokensBefore"]
        checked += 1
        if n % 5:
            continue  # the full preview on a fifth of the requests keeps the run short
        res = preview_compaction(
            path, keep_recent_tokens=req["keepRecentTokens"], leaf_id=req.get("leafId"), context_window=0
        )
        assert (res["outcome"] == "skipped") == (prep is None or "Pi would keep everything" in res.get("reason", "")), (
            req,
            res.get("reason"),
        )
        if prep is None:
            assert res["reason"].startswith("Pi would keep everything: ")
        assert res["tokensBefore"] == pi["tokensBefore"]
    return checked


def test_gate_matches_pi_on_every_leaf_of_the_real_sessions(tmp_path, pi_oracle):
    total = 0
    for src in sorted(REAL_SESSIONS.glob("*.jsonl")):
        path = tmp_path / src.name
        shutil.copy(src, path)
        ids = [r.id for r in read_session(path).records if r.valid]
        requests = [
            {"file": str(path), "leafId": leaf, "keepRecentTokens": k, "reserveTokens": 16384}
            for leaf in ids
            for k in KEEPS
        ]
        total += compare(path, pi_oracle(requests), requests)
    assert total > 1000


def test_gate_matches_pi_on_generated_sessions_with_compactions(tmp_path, pi_oracle):
    sys.path.insert(0, str(ROOT / "bench"))
    from corpus import generate_session

    total = 0
    for seed in range(4):
        path = generate_session(
            tmp_path / f"g{seed}.jsonl",
            target_bytes=120_000 + 60_000 * seed,
            seed=f"oracle-{seed}",
            cwd="/home/user/projects/orbit",
        )
        ids = [r.id for r in read_session(path).records if r.valid]
        leaves = ids[-12:] + ids[len(ids) // 2 : len(ids) // 2 + 6]
        requests = [
            {"file": str(path), "leafId": leaf, "keepRecentTokens": k, "reserveTokens": 16384}
            for leaf in leaves
            for k in KEEPS
        ]
        total += compare(path, pi_oracle(requests), requests)
    assert total > 200


texts = st.one_of(st.text(max_size=40), st.sampled_from(["x" * 2000, "日本語 🚀" * 50, "", "a\nb"]))


@st.composite
def linear_session(draw):
    entries = []
    for i in range(draw(st.integers(1, 30))):
        kind = draw(
            st.sampled_from(
                [
                    "user",
                    "assistant",
                    "result",
                    "bash",
                    "custom_message",
                    "branch_summary",
                    "label",
                    "model_change",
                    "compaction",
                ]
            )
        )
        if kind == "user":
            e = {
                "type": "message",
                "message": {"role": "user", "content": [{"type": "text", "text": draw(texts)}], "timestamp": 0},
            }
        elif kind == "assistant":
            e = {
                "type": "message",
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": draw(texts)},
                        {"type": "toolCall", "id": f"c{i}", "name": "read", "arguments": {"path": draw(texts)}},
                    ],
                    "stopReason": draw(st.sampled_from(["stop", "toolUse", "error"])),
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
        elif kind == "bash":
            e = {
                "type": "message",
                "message": {
                    "role": "bashExecution",
                    "command": draw(texts),
                    "output": draw(texts),
                    "exitCode": 0,
                    "cancelled": False,
                    "truncated": False,
                    "timestamp": 0,
                },
            }
        elif kind == "custom_message":
            e = {"type": "custom_message", "customType": "t", "content": draw(texts), "display": draw(st.booleans())}
        elif kind == "branch_summary":
            e = {"type": "branch_summary", "fromId": "root", "summary": draw(texts)}
        elif kind == "label":
            e = {"type": "label", "targetId": "e0", "label": "l"}
        elif kind == "model_change":
            e = {"type": "model_change", "provider": "p", "modelId": "m"}
        else:
            e = {
                "type": "compaction",
                "summary": draw(texts),
                "firstKeptEntryId": draw(st.sampled_from(["", "e0", f"e{max(0, i - 2)}", f"e{i}"])),
                "tokensBefore": 1,
            }
        e.update(id=f"e{i}", parentId=f"e{i - 1}" if i else None, timestamp=f"2025-01-01T00:00:{i % 60:02d}.000Z")
        entries.append(e)
    return entries


# one node process per example; no shrinking (a failing batch is printed as found)
@settings(
    max_examples=profile_examples(5),
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
@given(st.lists(linear_session(), min_size=30, max_size=30))
def test_gate_matches_pi_on_random_linear_sessions(tmp_path, pi_oracle, sessions):
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
        path.write_bytes(b"".join(msgspec.json.encode(x) + b"\n" for x in [header, *entries]))
        paths.append(path)
        for k in (20000, 500, 50, 1):
            requests.append({"file": str(path), "keepRecentTokens": k, "reserveTokens": 16384})
    answers = pi_oracle(requests)
    for path in paths:
        mine = [(r, a) for r, a in zip(requests, answers) if r["file"] == str(path)]
        compare(path, [a for _, a in mine], [r for r, _ in mine])


def test_tree_entries_match_pi_collect_entries_for_branch_summary(tmp_path, pi_oracle):
    from fabric_lsp.engine.compaction.api import _tree_entries
    from fabric_lsp.engine.compaction.loader import load_session_bytes

    requests = []
    for src in sorted(REAL_SESSIONS.glob("*.jsonl")):
        path = tmp_path / src.name
        shutil.copy(src, path)
        ids = [r.id for r in read_session(path).records if r.valid]
        picks = ids[::3] + ids[-2:]
        requests += [{"file": str(path), "fromId": a, "targetId": b} for a in picks[::2] for b in picks]
    answers = pi_oracle(requests)
    loaded: dict = {}
    for req, pi in zip(requests, answers):
        if "error" in pi:
            continue
        log = loaded.setdefault(req["file"], load_session_bytes(Path(req["file"]).read_bytes()))
        entries, ancestor = _tree_entries(log, req["fromId"], req["targetId"])
        assert [e["id"] for e in entries] == pi["entries"], req
        assert ancestor == pi["commonAncestorId"], req
    assert len(requests) > 200
