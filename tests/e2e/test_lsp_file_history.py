"""`fabric/fileHistory`, its command and the file-history CodeLens against the real server
on the real-Pi fixtures (VS Code and Neovim 0.11 capability sets), and the CLI's
`history --json` equal to the server's result."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
import pytest_asyncio
from fabric_e2e_harness import (
    PROJECT_CWD,
    PROJECT_FOLDER,
    SPEC_WARNINGS_AS_ERRORS,
    make_agent_dir,
    rpc,
    rpc_error,
    server_env,
    start,
    stop,
)
from lsprotocol import types

from fabric_lsp import protocol

pytestmark = [SPEC_WARNINGS_AS_ERRORS, pytest.mark.asyncio(loop_scope="module")]

OPS = f"{PROJECT_CWD}/calc/ops.py"
NEWEST_SESSION = "01a22a5e-04f3-7d72-a761-a098d36e6869"  # 05-rpc-overflow…: its last edit is the newest


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(agent_dir, editor):
    c = await start(agent_dir, editor)
    yield c
    await stop(c)


def open_doc(client, uri: str, text: str, language: str = "python") -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)
        )
    )


async def lenses(client, uri: str) -> list[types.CodeLens]:
    return await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )


async def test_file_history_request_and_command(client):
    result = await rpc(client, protocol.FILE_HISTORY, {"path": OPS})
    msgspec.convert(result, protocol.FileHistoryResult)
    assert result["path"] == OPS and result["scope"] == "global" and result["branches"] == "active"
    assert result["totalSessions"] == 6 and result["totalItems"] == 18
    assert {i["action"] for i in result["items"]} == {"read", "edit"}
    assert {i["outcome"] for i in result["items"]} == {"succeeded", "failed"}
    stamps = [i["timestamp"] for i in result["items"]]
    assert stamps == sorted(stamps, reverse=True)
    assert result["sessions"][0]["sessionId"] == NEWEST_SESSION
    assert all(i["ref"].startswith(f"pi-entry:{i['sessionId']}/") for i in result["items"])
    by_uri = await rpc(client, protocol.FILE_HISTORY, {"uri": Path(OPS).as_uri()})
    assert by_uri == result
    command = await rpc(
        client,
        types.WORKSPACE_EXECUTE_COMMAND,
        types.ExecuteCommandParams(command="fabric.fileHistory", arguments=[{"path": OPS}]),
    )
    assert command == result
    # an item expands through fabric/expand by its index
    item = result["items"][0]
    expanded = await rpc(client, protocol.EXPAND, {"session": item["sessionFile"], "indices": [item["index"]]})
    assert expanded["expanded"][0]["entryId"] == item["entryId"]


async def test_invalid_params_name_the_field(client):
    code, message = await rpc_error(client, protocol.FILE_HISTORY, {"path": "calc/ops.py"})
    assert code == -32602 and "`path` must be an absolute path" in message
    code, message = await rpc_error(client, protocol.FILE_HISTORY, {"path": OPS, "scope": "session"})
    assert code == -32602 and "scope" in message


async def test_code_lens_on_a_source_file(client):
    uri = Path(OPS).as_uri()
    open_doc(client, uri, "def add(a, b):\n    return a + b\n")
    got = await lenses(client, uri)
    assert len(got) == 1
    lens = got[0]
    assert lens.range.start == types.Position(line=0, character=0)
    assert lens.command is not None
    assert lens.command.title == f"Pi: 6 sessions · edited in {NEWEST_SESSION[:8]}"
    assert lens.command.command == "fabric.fileHistory" and list(lens.command.arguments) == [{"path": OPS}]
    # the lens's command answers the full history
    result = await rpc(
        client,
        types.WORKSPACE_EXECUTE_COMMAND,
        types.ExecuteCommandParams(command=lens.command.command, arguments=list(lens.command.arguments)),
    )
    assert result["totalSessions"] == 6


async def test_no_lens_on_untouched_files_sessions_and_other_schemes(client, agent_dir):
    untouched = Path(f"{PROJECT_CWD}/calc/never_touched.py").as_uri()
    open_doc(client, untouched, "x = 1\n")
    assert list(await lenses(client, untouched)) == []
    session = agent_dir / "sessions" / PROJECT_FOLDER / "01-print-default-tools.jsonl"
    open_doc(client, session.as_uri(), session.read_text(encoding="utf-8"), "jsonl")
    assert list(await lenses(client, session.as_uri())) == []
    open_doc(client, "untitled:Untitled-1", "print(1)\n")
    assert list(await lenses(client, "untitled:Untitled-1")) == []


async def test_code_lens_setting_turns_lenses_off(tmp_path, editor):
    agent = make_agent_dir(tmp_path)
    c = await start(agent, editor, init_options={"codeLens": False})
    try:
        uri = Path(OPS).as_uri()
        open_doc(c, uri, "def add(a, b):\n    return a + b\n")
        assert list(await lenses(c, uri)) == []
        assert (await rpc(c, protocol.FILE_HISTORY, {"path": OPS}))["totalSessions"] == 6
    finally:
        await stop(c)


async def test_cli_json_is_the_server_result(client, agent_dir):
    for params, argv in [
        ({"path": OPS}, [OPS]),
        (
            {"path": OPS, "branches": "all", "page": 2, "pageSize": 5},
            [OPS, "--branches", "all", "--page", "2", "--page-size", "5"],
        ),
        (
            {"uri": Path(OPS).as_uri(), "scope": "project"},
            [Path(OPS).as_uri(), "--scope", "project", "--cwd", PROJECT_CWD],
        ),
    ]:
        server = await rpc(client, protocol.FILE_HISTORY, params)
        out = subprocess.run(
            [sys.executable, "-m", "fabric_lsp", "history", *argv, "--json", "--agent-dir", str(agent_dir)],
            capture_output=True,
            text=True,
            env=server_env(agent_dir),
            timeout=120,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == server
    bad = subprocess.run(
        [sys.executable, "-m", "fabric_lsp", "history", OPS, "--page", "0", "--agent-dir", str(agent_dir)],
        capture_output=True,
        text=True,
        env=server_env(agent_dir),
        timeout=120,
        check=False,
    )
    assert bad.returncode == 2 and bad.stdout == "" and "page" in bad.stderr
