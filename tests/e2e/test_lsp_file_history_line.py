"""`fabric/fileHistory` items carry `line`, the 0-based line of the operation's entry in
its session file (issue 34, finding 9: the Neovim quickfix list put every item on line 1),
against the real server on the real-Pi fixtures: hot sessions, cold sessions, and tables
read back from the disk cache; a cache record written before the field is rebuilt, never
read without lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fabric_e2e_harness import PROJECT_CWD, make_agent_dir, rpc, server_env, start, stop

from fabric_lsp import protocol

pytestmark = pytest.mark.asyncio(loop_scope="function")

OPS = f"{PROJECT_CWD}/calc/ops.py"


def _entry_at(session_file: str, line: int) -> dict:
    lines = Path(session_file).read_text(encoding="utf-8").split("\n")
    return json.loads(lines[line])


def _check_lines(result: dict) -> None:
    assert result["items"], "the fixtures touch calc/ops.py"
    for item in result["items"]:
        assert isinstance(item.get("line"), int), f"no line: {item}"
        entry = _entry_at(item["sessionFile"], item["line"])
        assert entry["id"] == item["entryId"], (item, entry)
        if item.get("toolCallId"):  # a Pi call: the entry holds the call
            calls = [p for p in entry["message"]["content"] if p.get("type") == "toolCall"]
            assert any(p["id"] == item["toolCallId"] and p["name"] == item["toolName"] for p in calls)
    # the same operation has one line, whatever the item
    assert len({(i["sessionFile"], i["line"]) for i in result["items"]}) > 1


async def _history(agent: Path, settings: dict) -> dict:
    client = await start(agent, "neovim@v0.11", init_options=settings, env=server_env(agent))
    try:
        return await rpc(client, protocol.FILE_HISTORY, {"path": OPS, "pageSize": 200})
    finally:
        await stop(client)


@pytest.mark.parametrize("hot", [50, 0], ids=["hot", "cold"])
async def test_items_carry_the_entry_line(tmp_path: Path, hot: int):
    agent = make_agent_dir(tmp_path)
    index = tmp_path / "index"
    settings = {"memory": {"hotSessions": hot, "indexDir": str(index)}}
    first = await _history(agent, settings)
    _check_lines(first)
    # the second server reads the tables from the disk cache: same lines
    cached = await _history(agent, settings)
    assert cached == first


async def test_old_cache_record_is_rebuilt_not_misread(tmp_path: Path):
    agent = make_agent_dir(tmp_path)
    index = tmp_path / "index"
    settings = {"memory": {"hotSessions": 50, "indexDir": str(index)}}
    first = await _history(agent, settings)
    _check_lines(first)
    # rewrite every file-operations record as a server before `line` wrote it: each row
    # one element shorter (its cacheBytes and seal kept consistent, so only the rows differ)
    from fabric_lsp.engine.memory import disk_cache, seal

    records = sorted(index.rglob("*.files.json"))
    assert records, f"no file-operations records under {index}"
    for path in records:
        rec = disk_cache.decode_record(path.read_bytes()) if disk_cache.sealed(path.read_bytes()) else None
        assert rec is not None
        rec["operations"] = [row[:-1] for row in rec["operations"]]
        old = seal.apply_cache_metrics_slow(rec, Path(rec["sessionFile"]).stat().st_size)
        assert disk_cache.sealed(old)
        path.write_bytes(old)
    again = await _history(agent, settings)
    _check_lines(again)
    assert again == first
