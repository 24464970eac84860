"""The team faces end to end: `fabric-lsp team migrate|push|status` and `fabric-lsp
recall --scope team` as subprocesses, settings from the user-level fabric.json only."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any
from typing import Any as Cluster  # (the cluster fixture's type: tests/team/conftest.py)

import psycopg
import pytest

from fabric_lsp.commands.examples import write_examples
from fabric_lsp.config import load_config
from fabric_lsp.engine.team.schema import SCHEMA
from tests.support.cli import run_cli


def _cli(*args: str, agent: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["PI_CODING_AGENT_DIR"] = str(agent)
    work = cwd or agent.parent / "work"  # a workspace that does not hold the agent dir
    work.mkdir(exist_ok=True)
    return run_cli(*args, env=env, cwd=work)


def _fabric_json(agent: Path, team: dict[str, Any]) -> None:
    (agent / "fabric.json").write_text(json.dumps({"memory": {"hotSessions": 10000}, "team": team}))


@pytest.fixture
def agent(team_db: Cluster, tmp_path: Path) -> Path:
    with psycopg.connect(team_db.url(), autocommit=True) as conn:
        conn.execute(
            f"TRUNCATE {SCHEMA}.postings, {SCHEMA}.entries, {SCHEMA}.segments, {SCHEMA}.file_ops, "
            f"{SCHEMA}.sessions, {SCHEMA}.pushes, {SCHEMA}.members"
        )
    a = tmp_path / "agent"
    write_examples(a)
    return a


def test_cli_push_status_and_team_recall(team_db: Cluster, agent: Path) -> None:
    # migrate again as the owner: idempotent
    res = _cli("team", "migrate", "--url", team_db.url(), agent=agent)
    assert res.returncode == 0, res.stderr
    assert "version 1" in res.stdout
    # nothing opted in: nothing pushed
    _fabric_json(agent, {"url": team_db.member_url("alice"), "member": "alice@cli"})
    res = _cli("team", "push", "--json", agent=agent)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["sessions"] == [] and "team.projects is empty" in res.stderr
    _fabric_json(agent, {"url": team_db.member_url("alice"), "member": "alice@cli", "projects": ["/home/user/*"]})
    res = _cli("team", "push", "--dry-run", agent=agent)
    assert res.returncode == 0 and res.stdout.count("would push (new)") == 7, res.stdout + res.stderr
    res = _cli("team", "push", "--json", agent=agent)
    assert json.loads(res.stdout)["counts"] == {"new": 7}
    res = _cli("team", "push", "--json", agent=agent)
    assert json.loads(res.stdout)["counts"] == {"unchanged": 7}
    res = _cli("team", "status", "--json", agent=agent)
    rows = json.loads(res.stdout)
    assert len(rows) == 7 and {r["member"] for r in rows} == {"alice@cli"} and all(r["sessionId"] for r in rows)
    for q in ("test", "auth login", "the migration"):
        team = _cli("recall", q, "--scope", "team", "--json", "--page-size", "6", agent=agent)
        local = _cli("recall", q, "--scope", "global", "--json", "--page-size", "6", agent=agent)
        assert team.returncode == 0 and local.returncode == 0, team.stderr + local.stderr
        t, loc = json.loads(team.stdout), json.loads(local.stdout)
        assert bool(t["items"]) == (q != "auth login")  # (no example mentions it)
        assert all(i["segment"]["member"] == "alice@cli" for i in t["items"])
        for item in t["items"]:
            del item["segment"]["member"], item["segment"]["machine"]
        del t["scope"], loc["scope"]
        assert t == loc
    # expand a team item: the stored records, and where the source is
    seg = json.loads(_cli("recall", "test", "--scope", "team", "--json", agent=agent).stdout)["items"][0]["segment"]
    from fabric_lsp import protocol
    from fabric_lsp.engine_owner import Engines

    cfg = load_config(workspace_root=agent.parent / "work", init_options={"agentDir": str(agent)})
    engines = Engines(lambda: cfg)
    try:
        p = protocol.decode_params(
            protocol.EXPAND,
            {"session": seg["sessionFile"], "member": "alice@cli", "indices": [seg["entryRange"]["first"]]},
        )
        out = protocol.to_wire(engines.expand(p, None))
    finally:
        engines.close()
    assert "error" not in out, out
    assert out["sourceHash"] == seg["sourceHash"] and out["member"] == "alice@cli"
    assert "member's machine" in out["note"] and out["expanded"][0]["index"] == seg["entryRange"]["first"]


def test_cli_database_down(agent: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _fabric_json(agent, {"url": f"postgresql://alice:secret@127.0.0.1:{port}/fabric", "projects": ["/*"]})
    res = _cli("recall", "test", "--scope", "team", agent=agent)
    assert res.returncode != 0 and "team_unavailable" in res.stderr and "secret" not in res.stderr
    res = _cli("team", "push", agent=agent)
    assert res.returncode == 1 and "team_unavailable" in res.stderr
    res = _cli("recall", "test", "--scope", "global", agent=agent)
    assert res.returncode == 0 and "matches across" in res.stdout


def test_team_settings_are_user_level_only(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    project = tmp_path / "proj"
    (project / ".pi").mkdir(parents=True)
    (project / ".pi" / "fabric.json").write_text(
        json.dumps({"team": {"url": "postgresql://evil/db", "projects": ["/*"]}})
    )
    cfg = load_config(workspace_root=project, init_options={"agentDir": str(agent), "trusted": True})
    assert cfg.team is None
    assert any("`team`" in w and "user-level" in w for w in cfg.warnings)
    (agent / "fabric.json").write_text(json.dumps({"team": {"url": "postgresql://team/db", "projects": ["/x/*"]}}))
    cfg = load_config(workspace_root=project, init_options={"agentDir": str(agent), "trusted": True})
    assert cfg.team == {"url": "postgresql://team/db", "projects": ["/x/*"]}
    (agent / "fabric.json").write_text(json.dumps({"team": {"projects": "/x/*"}}))
    cfg = load_config(workspace_root=project, init_options={"agentDir": str(agent)})
    assert cfg.team is None and any("team.projects: must be a list" in w for w in cfg.warnings)
