"""initialize/initialized/shutdown with the capability sets of VS Code and Neovim 0.11."""

from __future__ import annotations

import asyncio

import pytest
from fabric_e2e_harness import SPEC_WARNINGS_AS_ERRORS, rpc_error, start, stop
from lsprotocol import types

from fabric_lsp import __version__, protocol

pytestmark = [SPEC_WARNINGS_AS_ERRORS]


async def test_initialize_capabilities_and_watching(agent_dir, editor):
    client = await start(agent_dir, editor)
    try:
        for _ in range(300):
            if client.log_messages:
                break
            await asyncio.sleep(0.05)
        assert any("fabric-lsp" in m.message and "ready" in m.message for m in client.log_messages)
        if editor == "visual-studio-code":
            # dynamic registration supported: the session dir is watched by the client
            methods = {r.method for r in client.registrations}
            assert types.WORKSPACE_DID_CHANGE_WATCHED_FILES in methods
            watch = next(r for r in client.registrations if r.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
            pattern = watch.register_options["watchers"][0]["globPattern"]
            assert str(agent_dir / "sessions") in (pattern if isinstance(pattern, str) else pattern["baseUri"])
        else:
            # Neovim 0.11 declares no dynamic registration: the server polls instead
            assert not any(r.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES for r in client.registrations)
    finally:
        await stop(client)


async def test_initialize_result(agent_dir, editor):
    from fabric_e2e_harness import SERVER_CMD, ClientServerConfig, make_client, server_env
    from pytest_lsp import client_capabilities

    client = await ClientServerConfig(
        server_command=SERVER_CMD, client_factory=make_client, server_env=server_env(agent_dir)
    ).start()
    try:
        result = await client.initialize_session(types.InitializeParams(capabilities=client_capabilities(editor)))
        assert result.server_info.name == "fabric-lsp"
        assert result.server_info.version == __version__
        caps = result.capabilities
        assert sorted(caps.execute_command_provider.commands) == sorted(protocol.COMMANDS)
        assert caps.hover_provider
        assert caps.definition_provider
        assert caps.workspace_symbol_provider
        # an unknown command is InvalidParams, and the server keeps serving
        code, message = await rpc_error(
            client, types.WORKSPACE_EXECUTE_COMMAND, types.ExecuteCommandParams(command="fabric.nope", arguments=[])
        )
        assert code == -32602 and "fabric.nope" in message
        code, message = await rpc_error(client, "fabric/nope", {})
        assert code == -32601
    finally:
        await stop(client)


@pytest.mark.parametrize("editor_name", ["neovim@v0.11"])
async def test_polling_notices_appends(agent_dir, editor_name, tmp_path):
    """Without watched-file registration the server polls: an append is noticed (the
    memory engine, once started, is told through notify_changed). Observable here as the
    server staying healthy while files change under it."""
    from fabric_e2e_harness import server_env

    client = await start(agent_dir, editor_name, env=server_env(agent_dir, FABRIC_LSP_POLL_INTERVAL="0.05"))
    try:
        session = sorted((agent_dir / "sessions").glob("*/*.jsonl"))[0]
        with open(session, "ab") as fh:
            fh.write(b"")
        await asyncio.sleep(0.2)
        code, _ = await rpc_error(client, protocol.RECALL, {"pageSize": 0})
        assert code == -32602
    finally:
        await stop(client)


def test_exit_code_follows_shutdown(tmp_path):
    import os
    import sys

    from fabric_lsp.commands.demo import StdioLspClient

    env = dict(os.environ, PI_CODING_AGENT_DIR=str(tmp_path), HOME=str(tmp_path))
    init = {"processId": None, "rootUri": None, "capabilities": {}}
    polite = StdioLspClient([sys.executable, "-m", "fabric_lsp"], env=env)
    polite.request("initialize", init)
    polite.request("shutdown")
    polite.notify("exit")
    assert polite.proc.wait(timeout=30) == 0
    abrupt = StdioLspClient([sys.executable, "-m", "fabric_lsp"], env=env)
    abrupt.request("initialize", init)
    abrupt.notify("exit")
    assert abrupt.proc.wait(timeout=30) == 1


def test_serving_does_not_import_the_subcommand_modules(tmp_path):
    """The editor pays the server's start-up on every launch: `fabric-lsp [serve]` skips the
    CLI's subcommand registry (and so every engine the subcommands import)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, PI_CODING_AGENT_DIR=str(tmp_path), HOME=str(tmp_path))
    for argv in ([], ["serve"], ["-v", "serve"]):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "fabric_lsp", *argv],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        imported = {
            line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")
        }
        assert "fabric_lsp.server" in imported, proc.stderr[-2000:]
        assert not {m for m in imported if m.startswith("fabric_lsp.commands.")}, argv
        assert not {m for m in imported if m.startswith(("fabric_lsp.engine.memory", "fabric_lsp.engine.compaction"))}
