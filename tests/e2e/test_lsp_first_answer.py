"""Complete first answers (issue 36) against the real server with its background indexer on:
within the reference's per-call budgets, the first recall, session list, file history and
CodeLens right after `initialized` equal the answers once the indexer has finished; beyond
the budgets the first answer says `indexing_in_progress` and a later one is complete.

No sleeps stand in for events: the tests wait for the indexer's own end event."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fabric_e2e_harness import PROJECT_CWD, SPEC_WARNINGS_AS_ERRORS, make_agent_dir, rpc, server_env, start, stop
from lsprotocol import types
from test_lsp_background_index import _index_ends, _wait

from fabric_lsp import protocol

pytestmark = [SPEC_WARNINGS_AS_ERRORS, pytest.mark.asyncio(loop_scope="function")]

OPS = f"{PROJECT_CWD}/calc/ops.py"


def _corpus(root: Path, extra: int) -> Path:
    """The real-Pi fixtures plus `extra` generated sessions of the same project."""
    agent = make_agent_dir(root)
    folder = next((agent / "sessions").iterdir())
    filler = " ".join(f"word{k}" for k in range(60))
    for i in range(extra):
        rows = [
            {
                "type": "session",
                "version": 3,
                "id": f"fa{i:03d}",
                "timestamp": "2025-01-01T00:00:00.000Z",
                "cwd": PROJECT_CWD,
            }
        ]
        parent = None
        for j in range(12):
            text = f"session {i} step {j} {filler}" + (" oldest_rare_fact" if i == 0 and j == 3 else "")
            rows.append(
                {
                    "type": "message",
                    "id": f"f{i}x{j}",
                    "parentId": parent,
                    "timestamp": "2025-01-01T00:00:01.000Z",
                    "message": {"role": "user", "content": text},
                }
            )
            parent = f"f{i}x{j}"
        path = folder / f"2025-01-01T00-00-00-000Z_fa{i:03d}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (1_600_000_000 + i * 10, 1_600_000_000 + i * 10))  # older than the fixtures
    return agent


QUERIES = [
    {"query": "oldest_rare_fact", "scope": "global"},
    {"query": "word7 step", "scope": "global"},
    {"query": "calc", "scope": "project"},
    {"query": "error", "scope": "global", "branches": "all"},
]


async def _answers(client) -> list:
    out: list = [await rpc(client, protocol.RECALL, {**q, "cwd": PROJECT_CWD}) for q in QUERIES]
    out.append(await rpc(client, protocol.SESSIONS, {"scope": "global"}))
    out.append(await rpc(client, protocol.FILE_HISTORY, {"path": OPS}))
    uri = Path(OPS).as_uri()
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    out.append([(lens.range.start.line, lens.command.title if lens.command else None) for lens in lenses or []])
    return out


@pytest.mark.parametrize("hot", [0, 3])
async def test_the_first_answers_within_the_budgets_are_complete(tmp_path: Path, hot: int):
    agent = _corpus(tmp_path, 150)  # (enough that the indexer cannot be done before the first request)
    env = server_env(agent, FABRIC_LSP_BACKGROUND_INDEX="1")
    client = await start(
        agent,
        "visual-studio-code",
        configuration={"memory": {"hotSessions": hot}},
        env=env,
        workspace=Path(PROJECT_CWD),
    )
    try:
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=Path(OPS).as_uri(), language_id="python", version=1, text="def add(a, b):\n    return a + b\n"
                )
            )
        )
        first = await _answers(client)  # right after `initialized`, while the indexer runs
        for result in first[: len(QUERIES) + 1]:
            assert result["coverage"]["complete"] or "max_entry_chars" in result["coverage"]["reasons"], result[
                "coverage"
            ]
            assert "indexing_in_progress" not in result["coverage"]["reasons"]
        assert await _wait(lambda: any(e.get("complete") for e in _index_ends(client)), 120), (
            "the indexer never said the index is complete"
        )
        after = await _answers(client)
        assert first == after
        # the oldest (cold) session's fact was found the first time
        assert [
            it["pointer"]["sessionId"] if it["kind"] == "pointer" else it["segment"]["sessionId"]
            for it in first[0]["items"]
        ] == ["fa000"]
    finally:
        await stop(client)


async def test_beyond_the_budgets_the_first_answer_says_so_and_a_later_one_is_complete(tmp_path: Path):
    agent = _corpus(tmp_path, 30)
    env = server_env(agent, FABRIC_LSP_BACKGROUND_INDEX="1")
    settings = {"memory": {"hotSessions": 2, "maxSyncSessions": 4}}
    client = await start(agent, "visual-studio-code", configuration=settings, env=env)
    try:
        first = await rpc(client, protocol.RECALL, {"query": "oldest_rare_fact", "scope": "global"})
        cov = first["coverage"]
        if not cov["complete"]:  # (an indexer faster than this request leaves nothing to say)
            assert {"indexing_in_progress", "max_sync_sessions"} <= set(cov["reasons"]) and not first["authoritative"]
        assert await _wait(lambda: any(e.get("complete") for e in _index_ends(client)), 120)
        later = await rpc(client, protocol.RECALL, {"query": "oldest_rare_fact", "scope": "global"})
        assert later["coverage"]["indexedSessions"] == later["coverage"]["eligibleSessions"]
        assert "indexing_in_progress" not in later["coverage"]["reasons"]
        assert [it["pointer"]["sessionId"] for it in later["items"] if it["kind"] == "pointer"] == ["fa000"]
    finally:
        await stop(client)
