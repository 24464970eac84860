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


def test_team_members_from_the_engine_the_server_and_the_cli(two_members_pushed: Any, tmp_path: Path) -> None:
    """`fabric/teamMembers` (the editors' `team:<member>` lists) and `fabric-lsp team
    members --json` give the same bytes: each member with its machines, pushed sessions,
    entries and last push, by name; checked against the sessions `team status` lists."""
    import sys

    from fabric_lsp import protocol
    from fabric_lsp.commands.demo import StdioLspClient
    from fabric_lsp.engine.team.settings import machine_name

    cluster, engines = two_members_pushed
    alice_team = engines[0][0]
    expected = [
        (m, len(rows), sum(r["entryCount"] for r in rows))
        for m in ("alice@test", "bob@test")
        for rows in [alice_team.status(m)]
    ]
    assert all(n > 0 for _m, n, _e in expected)
    engine_answer = protocol.to_wire(alice_team.members())
    got = [(m["member"], m["sessions"], m["entries"]) for m in engine_answer["members"]]
    assert got == expected, (got, expected)
    assert all(m["machines"] == [machine_name()] and m["lastPushedAt"] for m in engine_answer["members"])
    assert "error" not in engine_answer

    # a reader's machine: bob's role may read every member's rows
    reader = tmp_path / "reader" / "agent"
    reader.mkdir(parents=True)
    _fabric_json(reader, {"url": cluster.member_url("bob"), "member": "bob@test"})
    cli = _cli("team", "members", "--json", agent=reader)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout) == engine_answer
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["PI_CODING_AGENT_DIR"] = str(reader)
    client = StdioLspClient([sys.executable, "-m", "fabric_lsp"], env=env)
    try:
        client.request("initialize", {"processId": os.getpid(), "rootUri": None, "capabilities": {}})
        client.notify("initialized", {})
        served = client.request(protocol.TEAM_MEMBERS, {})
        assert client.request(protocol.TEAM_MEMBERS, None) == served  # no params is the same
    finally:
        client.close()
    assert json.dumps(served) == json.dumps(json.loads(cli.stdout))  # same keys, same order
    text = _cli("team", "members", agent=reader)
    assert text.returncode == 0 and text.stdout.splitlines()[0].startswith("alice@test  ")
    assert f"on {machine_name()}" in text.stdout

    # not configured: a clear answer, no exception; exit 2 on the command line
    bare = tmp_path / "bare" / "agent"
    bare.mkdir(parents=True)
    res = _cli("team", "members", "--json", agent=bare)
    answer = json.loads(res.stdout)
    assert res.returncode == 2 and answer["members"] == [] and answer["error"]["code"] == "team_not_configured"
    res = _cli("team", "members", agent=bare)
    assert res.returncode == 2 and "team_not_configured" in res.stderr and "team.url" in res.stderr


def test_team_members_when_the_database_is_down(agent: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _fabric_json(agent, {"url": f"postgresql://alice:secret@127.0.0.1:{port}/fabric"})
    res = _cli("team", "members", "--json", agent=agent)
    answer = json.loads(res.stdout)
    assert res.returncode == 1 and answer["error"]["code"] == "team_unavailable" and "secret" not in res.stdout
