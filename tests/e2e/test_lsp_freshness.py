"""The warm index follows appends: watched-file events (VS Code registers a watcher) or
polling (Neovim 0.11 declares no dynamic registration) reach the engine."""

from __future__ import annotations

import asyncio
import json

import pytest
from fabric_e2e_harness import PROJECT_FOLDER, SPEC_WARNINGS_AS_ERRORS, make_agent_dir, rpc, server_env, start, stop
from lsprotocol import types

from fabric_lsp import protocol

pytestmark = [
    SPEC_WARNINGS_AS_ERRORS,
]

WORD = "zanzibarqux"


@pytest.mark.parametrize("editor", ["visual-studio-code", "neovim@v0.11"])
async def test_recall_sees_an_appended_entry(tmp_path, editor):
    agent = make_agent_dir(tmp_path)
    path = agent / "sessions" / PROJECT_FOLDER / "01-print-default-tools.jsonl"
    client = await start(agent, editor, env=server_env(agent, FABRIC_LSP_POLL_INTERVAL="0.1"))
    try:
        query = {"query": WORD, "scope": "project"}
        assert (await rpc(client, protocol.RECALL, query))["totalMatches"] == 0  # index is warm now
        lines = path.read_text(encoding="utf-8").splitlines()
        leaf = json.loads(lines[-1])["id"]
        entry = {
            "type": "message",
            "id": "f0e1d2c3",
            "parentId": leaf,
            "timestamp": "2026-11-30T03:00:00.000Z",
            "message": {
                "role": "user",
                "content": [{"type": "text", "text": f"what about {WORD}?"}],
                "timestamp": 1796007600000,
            },
        }
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, separators=(",", ":")) + "\n")
        if editor == "visual-studio-code":
            client.workspace_did_change_watched_files(
                types.DidChangeWatchedFilesParams(
                    changes=[types.FileEvent(uri=path.as_uri(), type=types.FileChangeType.Changed)]
                )
            )
        else:
            await asyncio.sleep(0.3)  # at least two polls
        result = await rpc(client, protocol.RECALL, query)
        assert result["totalMatches"] == 1
        seg = result["items"][0]["segment"]
        hit = next(e for e in seg["entries"] if e["matched"])
        assert hit["entryId"] == "f0e1d2c3" and hit["line"] == len(lines)
        assert f"pi-entry:{seg['sessionId']}/f0e1d2c3" in result["text"]
    finally:
        await stop(client)
