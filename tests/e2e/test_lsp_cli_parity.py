"""One contract for every face: the CLI's `--json` output equals the server's result for
the same inputs, on an agent dir whose Pi `settings.json` and `fabric.json` change the
answers (keepRecentTokens, targetContextRatio, memory bounds)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_asyncio
from fabric_e2e_harness import (
    PROJECT_CWD,
    PROJECT_FOLDER,
    SPEC_WARNINGS_AS_ERRORS,
    make_agent_dir,
    rpc,
    server_env,
    start,
    stop,
)

from fabric_lsp import protocol
from tests.support.cli import cli_json

pytestmark = [SPEC_WARNINGS_AS_ERRORS, pytest.mark.asyncio(loop_scope="module")]

S01 = "01-print-default-tools.jsonl"


@pytest.fixture(scope="module")
def configured_agent(tmp_path_factory) -> Path:
    agent = make_agent_dir(tmp_path_factory.mktemp("parity"))
    (agent / "settings.json").write_text(json.dumps({"compaction": {"keepRecentTokens": 200, "reserveTokens": 4000}}))
    (agent / "fabric.json").write_text(
        json.dumps(
            {
                "compaction": {"targetContextRatio": 0.7, "contextWindow": 150000},
                "memory": {"maxEntryChars": 500, "hotSessions": 2},
            }
        )
    )
    return agent


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(configured_agent):
    c = await start(configured_agent, "visual-studio-code")
    yield c
    await stop(c)


def cli(agent: Path, *args: str) -> dict:
    return cli_json(*args, "--json", "--agent-dir", str(agent), "--cwd", PROJECT_CWD, env=server_env(agent))


def entry_ids(agent: Path) -> list[str]:
    path = agent / "sessions" / PROJECT_FOLDER / S01
    return [json.loads(line)["id"] for line in path.read_text().splitlines()[1:] if line.strip()]


async def test_preview_cli_equals_server(client, configured_agent):
    session = str(configured_agent / "sessions" / PROJECT_FOLDER / S01)
    server = await rpc(client, protocol.COMPACTION_PREVIEW, {"session": session, "includeQa": True})
    assert cli(configured_agent, "preview", session, "--qa") == server
    # the settings.json budget applies on both faces (keepRecentTokens 200 is not Pi's 20000)
    assert server["outcome"] != "skipped" or "keep everything" not in server.get("reason", "")
    narrow = await rpc(client, protocol.COMPACTION_PREVIEW, {"session": session, "keepRecentTokens": 20000})
    assert cli(configured_agent, "preview", session, "--keep-recent", "20000") == narrow
    assert narrow != server


async def test_branch_summary_cli_equals_server(client, configured_agent):
    session = str(configured_agent / "sessions" / PROJECT_FOLDER / S01)
    target = entry_ids(configured_agent)[0]
    server = await rpc(client, protocol.BRANCH_SUMMARY_PREVIEW, {"session": session, "targetId": target})
    assert cli(configured_agent, "branch-summary", session, "--to", target) == server
    assert cli(configured_agent, "tree", session, "--to", target) == server  # its first name


async def _background_index_done(client) -> None:
    """Parity holds for the same index state: wait for the server's background indexer
    to report every session indexed (its `fabric/activity` metrics event)."""
    import asyncio
    import time

    deadline = time.monotonic() + 120
    while not any(
        a.get("request") == "fabric/backgroundIndex"
        and a.get("type") == "metrics"
        and a["indexedSessions"] == a["eligibleSessions"]
        for a in client.activity
    ):
        assert time.monotonic() < deadline, "the background indexer never finished"
        await asyncio.sleep(0.02)


async def test_recall_expand_sessions_cli_equal_server(client, configured_agent):
    await _background_index_done(client)
    server = await rpc(client, protocol.RECALL, {"query": "file", "scope": "project", "pageSize": 50})
    assert cli(configured_agent, "recall", "file", "--scope", "project", "--page-size", "50") == server
    session = str(configured_agent / "sessions" / PROJECT_FOLDER / S01)
    ids = entry_ids(configured_agent)[:3]
    server = await rpc(client, protocol.EXPAND, {"session": session, "entryIds": ids})
    assert cli(configured_agent, "expand", session, "--entry-ids", ",".join(ids)) == server
    server = await rpc(client, protocol.SESSIONS, {"scope": "project"})
    assert cli(configured_agent, "sessions", "--scope", "project") == server


async def test_cli_rejects_what_the_protocol_rejects(client, configured_agent):
    out = subprocess.run(
        [sys.executable, "-m", "fabric_lsp", "recall", "x", "--page-size", "500", "--agent-dir", str(configured_agent)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "pageSize" in out.stderr and "100" in out.stderr, out.stderr
