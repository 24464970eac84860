"""Pi 1.x asked live (issue 31): its per-model budgets (`compaction.modelOverrides`) resolve
as real Pi 1.6.0 resolves them, and its gate and `tokensBefore` agree with the engine's Pi
1.x rules on the real 0.80.6 sessions and on generated ones (the 0.80.6 oracle is
test_compaction_pi_oracle.py; random 1.x sessions are in test_pi1x_rules.py).

Needs Pi 1.x (scripts/deps/realpi.sh installs 1.6.0 into .tools/pi160, or
`$FABRIC_PI1X_PKG`): a missing Pi fails, never skips.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fabric_lsp.config import load_config
from fabric_lsp.engine.compaction import pi1x
from fabric_lsp.engine.compaction.api import preview_compaction
from fabric_lsp.engine.compaction.options import CompactionOverrides, resolve_compaction_options
from fabric_lsp.engine.session import read_session
from tests.engine.compaction.test_pi1x_rules import (
    EXPECTED,
    NODE,
    ORACLE,
    PI160,
    REAL_SESSIONS,
    branch_of,
    pi1x_package,
)

pytestmark = pytest.mark.realpi

ROOT = Path(__file__).resolve().parents[3]
SESSION = "replacement.jsonl"
MODEL = "fakeai/fake-coder"  # the model of every pi160 fixture (its model_change and assistants)
KEPT_AWAY = "Pi would keep everything: "


def ask_pi(requests: list[dict]) -> list[dict]:
    run = subprocess.run(
        [str(NODE), str(ORACLE), str(pi1x_package())],
        input="".join(json.dumps(r) + "\n" for r in requests),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    answers = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    assert len(answers) == len(requests), run.stderr
    return answers


def leaves_kept_by_default_but_cut_at(keep: int) -> list[str]:
    """Leaves of SESSION where Pi 1.6.0 says "Nothing to compact" at the default 20000
    and cuts at `keep` (recorded in expected.json)."""
    by: dict[str, dict[int, object]] = {}
    for row in EXPECTED["sessions"][SESSION]:
        by.setdefault(row["leafId"], {})[row["keepRecentTokens"]] = row["prepared"]
    return [leaf for leaf, p in by.items() if p[20000] is None and p[keep] is not None]


def agent_with(tmp_path: Path, pi_settings: dict) -> tuple[Path, Path]:
    agent = tmp_path / "agent"
    sessions = agent / "sessions" / "--proj--"
    sessions.mkdir(parents=True)
    (agent / "settings.json").write_text(json.dumps(pi_settings), encoding="utf-8")
    path = sessions / SESSION
    shutil.copyfile(PI160 / SESSION, path)
    return agent, path


def our_preview(
    agent: Path, path: Path, leaf: str, overrides: CompactionOverrides | None = None
) -> tuple[dict, tuple[str, ...]]:
    cfg = load_config(env={"PI_CODING_AGENT_DIR": str(agent), "HOME": str(agent.parent)})
    options = resolve_compaction_options(cfg.compaction_settings(), overrides).kwargs()
    return preview_compaction(path, leaf_id=leaf, **options), cfg.warnings


@pytest.mark.parametrize("override_for, expect_cut", [(MODEL, True), ("other/model", False)])
def test_a_model_override_applies_to_the_sessions_model_as_in_pi_1_6_0(tmp_path, override_for, expect_cut):
    leaves = leaves_kept_by_default_but_cut_at(60)
    assert leaves, "the fixture has leaves where the budget decides"
    agent, path = agent_with(tmp_path, {"compaction": {"modelOverrides": {override_for: {"keepRecentTokens": 60}}}})
    answers = ask_pi(
        [
            {"file": str(path), "leafId": leaf, "keepRecentTokens": 0, "agentDir": str(agent), "cwd": str(tmp_path)}
            for leaf in leaves
        ]
    )
    for leaf, pi in zip(leaves, answers):
        assert "error" not in pi, pi
        assert pi["model"] == MODEL
        assert pi["settings"]["keepRecentTokens"] == (60 if expect_cut else 20000)
        assert (pi["prepared"] is not None) == expect_cut
        ours, warnings = our_preview(agent, path, leaf)
        assert not warnings
        assert ours["piRules"] == "1.x"
        assert ours.get("reason", "").startswith(KEPT_AWAY) != expect_cut, (leaf, ours.get("reason"))
        if expect_cut:
            branch = branch_of(path, leaf)
            assert (
                pi1x.prepare_compaction(branch, pi["settings"]["keepRecentTokens"])["firstKeptEntryId"]
                == pi["prepared"]["firstKeptEntryId"]
            )


def test_each_field_falls_back_on_its_own_and_a_request_value_wins(tmp_path):
    leaf = leaves_kept_by_default_but_cut_at(60)[-1]
    agent, path = agent_with(
        tmp_path, {"compaction": {"keepRecentTokens": 60, "modelOverrides": {MODEL: {"reserveTokens": 1000}}}}
    )
    (pi,) = ask_pi(
        [{"file": str(path), "leafId": leaf, "keepRecentTokens": 0, "agentDir": str(agent), "cwd": str(tmp_path)}]
    )
    assert pi["settings"] == {"enabled": True, "reserveTokens": 1000, "keepRecentTokens": 60}
    ours, _ = our_preview(agent, path, leaf)
    assert not ours.get("reason", "").startswith(KEPT_AWAY)  # the ordinary 60 stays: the override sets only reserve
    # A request (the live Pi bridge, a CLI flag) names its budget: the override gives way.
    agent2, path2 = agent_with(tmp_path / "b", {"compaction": {"modelOverrides": {MODEL: {"keepRecentTokens": 60}}}})
    asked, _ = our_preview(agent2, path2, leaf, CompactionOverrides(keep_recent_tokens=20000))
    assert asked["reason"].startswith(KEPT_AWAY)


def test_old_format_sessions_ignore_model_overrides_as_pi_0_80_6_does(tmp_path):
    """Pi 0.80.6 has no per-model budgets: a session it wrote keeps the ordinary value."""
    src = sorted(REAL_SESSIONS.glob("*.jsonl"))[0]
    agent = tmp_path / "agent"
    (agent / "sessions" / "--p--").mkdir(parents=True)
    path = agent / "sessions" / "--p--" / src.name
    shutil.copyfile(src, path)
    branch = branch_of(path)
    from fabric_lsp.engine.compaction.pigate import model_key

    key = model_key(branch)
    assert key is not None
    (agent / "settings.json").write_text(json.dumps({"compaction": {"modelOverrides": {key: {"keepRecentTokens": 1}}}}))
    cfg = load_config(env={"PI_CODING_AGENT_DIR": str(agent), "HOME": str(tmp_path)})
    with_override = preview_compaction(path, **resolve_compaction_options(cfg.compaction_settings()).kwargs())
    (agent / "settings.json").write_text("{}")
    cfg = load_config(env={"PI_CODING_AGENT_DIR": str(agent), "HOME": str(tmp_path)})
    without = preview_compaction(path, **resolve_compaction_options(cfg.compaction_settings()).kwargs())
    assert "piRules" not in with_override
    assert with_override == without


@pytest.mark.parametrize(
    "bad, named",
    [
        ({MODEL: 5}, f'modelOverrides["{MODEL}"] must be an object'),
        (
            {MODEL: {"keepRecentTokens": -1}},
            f'modelOverrides["{MODEL}"].keepRecentTokens must be a non-negative integer, not -1',
        ),
        ({MODEL: {"keepRecentTokens": 2.5}}, "not 2.5"),
        ([1], "must be an object keyed by"),
    ],
)
def test_an_invalid_override_is_named_and_left_out_where_pi_refuses(tmp_path, bad, named):
    leaf = leaves_kept_by_default_but_cut_at(60)[-1]
    agent, path = agent_with(tmp_path, {"compaction": {"modelOverrides": bad}})
    ours, warnings = our_preview(agent, path, leaf)
    assert any(named in w for w in warnings), warnings
    assert ours["reason"].startswith(KEPT_AWAY)  # the default budget, as if the entry were not there
    if isinstance(bad, dict):
        (pi,) = ask_pi(
            [{"file": str(path), "leafId": leaf, "keepRecentTokens": 0, "agentDir": str(agent), "cwd": str(tmp_path)}]
        )
        assert "Invalid compaction.modelOverrides" in pi.get("error", ""), pi  # Pi itself refuses to compact


def _compare(path: Path, answers: list[dict], requests: list[dict]) -> int:
    checked = 0
    for req, pi in zip(requests, answers):
        assert "error" not in pi, (req, pi)
        branch = branch_of(path, req["leafId"])
        assert [e["id"] for e in branch] == pi["pathIds"]
        assert pi1x.pi_tokens_before(branch) == pi["tokensBefore"], req
        ours = pi1x.prepare_compaction(branch, req["keepRecentTokens"])
        prep = pi["prepared"]
        assert ours["ok"] == (prep is not None), (req, ours, prep)
        if prep is not None:
            for key in ("firstKeptEntryId", "isSplitTurn", "messagesToSummarize", "turnPrefixMessages"):
                assert ours[key] == prep[key], (req, key, ours, prep)
        checked += 1
    return checked


def test_pi_1x_rules_equal_live_pi_1x_on_every_leaf_of_the_real_0_80_6_sessions(tmp_path):
    """Pi 1.6.0 opens the files 0.80.6 wrote: the engine's 1.x rules answer as it does."""
    total = 0
    for src in sorted(REAL_SESSIONS.glob("*.jsonl")):
        path = tmp_path / src.name
        shutil.copyfile(src, path)
        ids = [r.id for r in read_session(path).records if r.valid]
        requests = [
            {"file": str(path), "leafId": leaf, "keepRecentTokens": k} for leaf in ids for k in (20000, 2000, 300, 1)
        ]
        total += _compare(path, ask_pi(requests), requests)
    assert total > 800


def test_pi_1x_rules_equal_live_pi_1x_on_generated_sessions(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    from corpus import generate_session

    total = 0
    for seed in range(3):
        path = generate_session(
            tmp_path / f"g{seed}.jsonl",
            target_bytes=120_000 + 60_000 * seed,
            seed=f"oracle1x-{seed}",
            cwd="/home/user/projects/orbit",
        )
        ids = [r.id for r in read_session(path).records if r.valid]
        leaves = ids[-10:] + ids[len(ids) // 2 : len(ids) // 2 + 5]
        requests = [
            {"file": str(path), "leafId": leaf, "keepRecentTokens": k} for leaf in leaves for k in (20000, 2000, 300, 1)
        ]
        total += _compare(path, ask_pi(requests), requests)
    assert total > 150
