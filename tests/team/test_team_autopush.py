"""`team.autoPush`: a real server (stdio) with the user-level setting on pushes the
opted-in sessions once everything is indexed, and again after a session grows (only the
new entries); a database that refuses says so once and the server stays up. No sleeps: the
tests wait for the server's `fabric/activity` event `request: "fabric/teamPush"`."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from lsprotocol import types

sys.path.append(str(Path(__file__).resolve().parents[1] / "e2e"))

from fabric_e2e_harness import rpc, server_env, start, stop  # noqa: E402
from team_kit import append_rows, entry_row, last_entry_id  # noqa: E402

from fabric_lsp import protocol  # noqa: E402
from fabric_lsp.commands.examples import write_examples  # noqa: E402
from fabric_lsp.engine.team.schema import SCHEMA  # noqa: E402

pytestmark = [pytest.mark.asyncio(loop_scope="function")]
PUSH = "fabric/teamPush"


def _pushes(client: Any) -> list[dict]:
    return [a for a in client.activity if a.get("request") == PUSH and a.get("type") == "metrics"]


async def _wait(pred, timeout: float = 120.0) -> bool:
    """Yield to the event loop until the notifications recorded by the client satisfy `pred`."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def _clean(db: Any) -> None:
    with psycopg.connect(db.url(), autocommit=True) as conn:
        conn.execute(
            f"TRUNCATE {SCHEMA}.postings, {SCHEMA}.entries, {SCHEMA}.segments, {SCHEMA}.file_ops, "
            f"{SCHEMA}.sessions, {SCHEMA}.pushes, {SCHEMA}.members"
        )


def _rows(db: Any, member: str) -> dict[str, int]:
    with psycopg.connect(db.url(), autocommit=True) as conn:
        return dict(
            conn.execute(
                f"SELECT session_file, entry_count FROM {SCHEMA}.sessions WHERE member = %s", (member,)
            ).fetchall()
        )


def _agent(tmp_path: Path, team: dict[str, Any]) -> Path:
    agent = tmp_path / "agent"
    write_examples(agent)
    (agent / "fabric.json").write_text(json.dumps({"memory": {"hotSessions": 10000}, "team": team}))
    return agent


async def test_auto_push_after_indexing_and_after_a_session_grows(team_db: Any, tmp_path: Path) -> None:
    _clean(team_db)
    agent = _agent(
        tmp_path,
        {"url": team_db.member_url("alice"), "member": "alice@auto", "projects": ["/home/user/*"], "autoPush": True},
    )
    client = await start(agent, "visual-studio-code", env=server_env(agent, FABRIC_LSP_BACKGROUND_INDEX="1"))
    try:
        assert await _wait(lambda: _pushes(client)), ("no autoPush reported", client.activity[-5:])
        first = _pushes(client)[0]
        assert first["complete"] and first["member"] == "alice@auto" and first["counts"] == {"new": 7}, first
        pushed = _rows(team_db, "alice@auto")
        assert len(pushed) == 7
        # the team answer equals the local one for the pushed sessions
        team = await rpc(client, protocol.RECALL, {"query": "test", "scope": "team"})
        assert team["items"] and all(it["segment"]["member"] == "alice@auto" for it in team["items"])
        # a session grows: the watcher tells the server, the indexer re-indexes it, the
        # push sends only the two new entries
        grown = sorted(pushed)[0]
        before = pushed[grown]
        parent = last_entry_id(Path(grown))
        append_rows(
            Path(grown),
            [
                entry_row("auto0001", parent, "user", "the quokka autopush note", 50),
                entry_row("auto0002", "auto0001", "assistant", "noted the quokka", 51),
            ],
        )
        client.workspace_did_change_watched_files(
            types.DidChangeWatchedFilesParams(
                changes=[types.FileEvent(uri=Path(grown).as_uri(), type=types.FileChangeType.Changed)]
            )
        )
        assert await _wait(lambda: len(_pushes(client)) >= 2 and _pushes(client)[-1]["entriesSent"] > 0), _pushes(
            client
        )
        second = _pushes(client)[-1]
        assert second["counts"] == {"append": 1, "unchanged": 6}, second
        assert second["entriesSent"] == _rows(team_db, "alice@auto")[grown] - before > 0
        found = await rpc(client, protocol.RECALL, {"query": "quokka autopush", "scope": "team"})
        top = found["items"][0]["segment"]
        assert top["sessionFile"] == grown and {"auto0001", "auto0002"} & {e["entryId"] for e in top["entries"]}, top
    finally:
        await stop(client)


async def test_auto_push_off_pushes_nothing_and_a_refusing_database_is_said_once(team_db: Any, tmp_path: Path) -> None:
    _clean(team_db)
    off = _agent(
        tmp_path / "off", {"url": team_db.member_url("alice"), "member": "alice@off", "projects": ["/home/user/*"]}
    )
    client = await start(off, "visual-studio-code", env=server_env(off, FABRIC_LSP_BACKGROUND_INDEX="1"))
    try:
        done = await rpc(client, protocol.RECALL, {"query": "test", "scope": "global"})
        assert done["items"]
        assert await _wait(
            lambda: any(a.get("request") == "fabric/backgroundIndex" and a.get("complete") for a in client.activity)
        )
        assert not _pushes(client) and _rows(team_db, "alice@off") == {}
    finally:
        await stop(client)
    # wrong password: one warning naming the failure, the server answers local recall
    bad = _agent(
        tmp_path / "bad",
        {
            "url": team_db.member_url("alice").replace("alice-pw", "wrong"),
            "member": "alice@bad",
            "projects": ["/home/user/*"],
            "autoPush": True,
        },
    )
    client = await start(bad, "visual-studio-code", env=server_env(bad, FABRIC_LSP_BACKGROUND_INDEX="1"))
    try:
        assert await _wait(lambda: any("team.autoPush could not push" in m.message for m in client.messages)), [
            m.message for m in client.messages
        ]
        warned = [m for m in client.messages if "team.autoPush could not push" in m.message]
        assert len(warned) == 1 and "local recall keeps working" in warned[0].message
        local = await rpc(client, protocol.RECALL, {"query": "test", "scope": "global"})
        cov = local["coverage"]
        assert local["items"] and cov["indexedSessions"] == cov["eligibleSessions"] == 7, cov
        assert not [r for r in cov["reasons"] if r.startswith("team")], cov
    finally:
        await stop(client)
