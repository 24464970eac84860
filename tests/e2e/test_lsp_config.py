"""Layered configuration and workspace trust, end to end and as a pure function."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from fabric_e2e_harness import SPEC_WARNINGS_AS_ERRORS, make_agent_dir, rpc, start, stop
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types

from fabric_lsp import protocol
from fabric_lsp.config import load_config
from tests.support.examples import profile_examples

pytestmark = [SPEC_WARNINGS_AS_ERRORS]


def _write(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value if isinstance(value, str) else json.dumps(value), encoding="utf-8")


async def _reload(client):
    return await rpc(
        client, types.WORKSPACE_EXECUTE_COMMAND, types.ExecuteCommandParams(command="fabric.reload", arguments=[])
    )


def _layout(tmp_path: Path) -> tuple[Path, Path]:
    agent = make_agent_dir(tmp_path)
    project = tmp_path / "proj"
    _write(
        agent / "fabric.json",
        {"memory": {"maxSessions": 7, "hotSessions": 5}, "compaction": {"targetContextRatio": 0.9}},
    )
    _write(agent / "settings.json", {"compaction": {"keepRecentTokens": 1234}})
    _write(project / ".pi" / "fabric.json", {"memory": {"hotSessions": 3, "maxEntryChars": 100}})
    _write(project / ".pi" / "settings.json", {"compaction": {"reserveTokens": 999}})
    return agent, project


async def _wait_messages(client, n=1, timeout=15.0):
    for _ in range(int(timeout / 0.02)):
        if len(client.messages) >= n:
            return
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("editor", ["visual-studio-code", "neovim@v0.11"])
async def test_untrusted_project_layers_are_ignored(tmp_path, editor):
    agent, project = _layout(tmp_path)
    client = await start(agent, editor, workspace=project)
    try:
        cfg = await _reload(client)
        assert cfg["trusted"] is False
        assert cfg["memory"]["maxSessions"] == 7  # global fabric.json
        assert cfg["memory"]["hotSessions"] == 5  # project layer NOT applied
        assert cfg["memory"]["maxEntryChars"] == 2000
        assert cfg["keepRecentTokens"] == 1234  # Pi's global settings.json
        assert cfg["reserveTokens"] == 16384  # project settings.json NOT applied
        assert cfg["compaction"]["targetContextRatio"] == 0.65  # invalid → default
        await _wait_messages(client)
        warnings = [m for m in client.messages if m.type == types.MessageType.Warning]
        assert any("compaction.targetContextRatio" in m.message and "0.85" in m.message for m in warnings)
    finally:
        await stop(client)


@pytest.mark.parametrize("editor", ["visual-studio-code", "neovim@v0.11"])
async def test_trusted_project_and_client_layers(tmp_path, editor):
    agent, project = _layout(tmp_path)
    client = await start(
        agent,
        editor,
        workspace=project,
        init_options={"trusted": True, "memory": {"maxSessions": 9, "regexTimeoutMs": 100}},
        configuration={"memory": {"regexTimeoutMs": 300}, "compaction": {"contextWindow": 1000}},
    )
    try:
        cfg = await _reload(client)
        assert cfg["trusted"] is True
        assert cfg["memory"]["hotSessions"] == 3  # trusted project layer
        assert cfg["memory"]["maxEntryChars"] == 100
        assert cfg["memory"]["maxSessions"] == 9  # initializationOptions over files
        assert cfg["memory"]["regexTimeoutMs"] == 300  # workspace/configuration over init
        assert cfg["compaction"]["contextWindow"] == 1000
        assert cfg["reserveTokens"] == 999  # project Pi settings.json, trusted
        assert cfg["keepRecentTokens"] == 1234
        assert cfg["sources"] == [
            str(agent / "fabric.json"),
            str(project / ".pi" / "fabric.json"),
            str(agent / "settings.json"),
            str(project / ".pi" / "settings.json"),
        ]
    finally:
        await stop(client)


async def test_did_change_configuration_warns_and_uses_the_default(tmp_path):
    agent = make_agent_dir(tmp_path)
    client = await start(agent, "visual-studio-code", configuration={"memory": {"maxSessions": 3}})
    try:
        assert (await _reload(client))["memory"]["maxSessions"] == 3
        client.set_configuration({"memory": {"maxSessions": "lots"}}, section="fabric")
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        await _wait_messages(client)
        assert any("memory.maxSessions must be an integer" in m.message for m in client.messages)
        cfg = await _reload(client)
        assert cfg["memory"]["maxSessions"] == 500
    finally:
        await stop(client)


async def test_broken_global_file_is_a_warning_not_a_crash(tmp_path):
    agent = make_agent_dir(tmp_path)
    _write(agent / "fabric.json", "{not json")
    client = await start(agent, "neovim@v0.11", init_options=["not", "an", "object"])
    try:
        await _wait_messages(client, 2)
        text = " | ".join(m.message for m in client.messages)
        assert "fabric.json: not valid JSON" in text
        assert "initializationOptions: must be an object" in text
        assert (await _reload(client))["memory"]["maxSessions"] == 500
    finally:
        await stop(client)


# -- the pure function -------------------------------------------------------------------


def test_agent_dir_and_paths(tmp_path):
    env = {"PI_CODING_AGENT_DIR": str(tmp_path / "a")}
    cfg = load_config(env=env)
    assert cfg.agent_dir == tmp_path / "a"
    assert cfg.session_dir == tmp_path / "a" / "sessions"
    assert cfg.index_dir == tmp_path / "a" / "fabric-lsp" / "memory-index"
    cfg = load_config(env=env, init_options={"sessionDir": "relative/dir", "memory": {"indexDir": str(tmp_path / "i")}})
    assert cfg.session_dir == tmp_path / "a" / "sessions"
    assert any("sessionDir must be an absolute path" in w for w in cfg.warnings)
    assert cfg.index_dir == tmp_path / "i"  # seed spelling memory.indexDir accepted


def test_files_cannot_set_trust_or_agent_dir(tmp_path):
    _write(tmp_path / "fabric.json", {"trusted": True, "agentDir": "/elsewhere", "nope": 1})
    cfg = load_config(env={"PI_CODING_AGENT_DIR": str(tmp_path)})
    assert cfg.trusted is False and cfg.agent_dir == tmp_path
    assert sum("cannot be set in fabric.json" in w for w in cfg.warnings) == 2
    assert any("unknown setting `nope`" in w for w in cfg.warnings)


def test_thresholds_are_clamped_as_the_seed_says(tmp_path):
    cfg = load_config(
        env={"PI_CODING_AGENT_DIR": str(tmp_path)},
        client_settings={
            "compaction": {"thresholds": {"a/b": 0.1, "c/d": 0.99}, "tokenThresholds": {"e/f": 12.6, "g/h": 10**9}}
        },
    )
    assert cfg.compaction["thresholds"] == {"a/b": 0.25, "c/d": 0.95}
    assert cfg.compaction["tokenThresholds"] == {"e/f": 1000, "g/h": 100_000_000}


json_leaf = st.none() | st.booleans() | st.integers(-10, 10**7) | st.floats() | st.text(max_size=6)
json_value = st.recursive(
    json_leaf, lambda i: st.lists(i, max_size=3) | st.dictionaries(st.text(max_size=6), i, max_size=3), max_leaves=10
)
setting_keys = st.sampled_from(["agentDir", "sessionDir", "indexDir", "trusted", "memory", "compaction", "x"])


@settings(max_examples=profile_examples(150), deadline=None)
@given(
    init=st.one_of(json_value, st.dictionaries(setting_keys, json_value, max_size=4)),
    client=st.one_of(json_value, st.dictionaries(setting_keys, json_value, max_size=4)),
)
def test_any_input_gives_a_valid_config(tmp_path_factory, init, client):
    root = tmp_path_factory.mktemp("cfg")
    cfg = load_config(env={"PI_CODING_AGENT_DIR": str(root)}, init_options=init, client_settings=client)
    assert cfg.agent_dir.is_absolute() and cfg.session_dir.is_absolute()
    assert isinstance(cfg.trusted, bool)
    assert 0.25 <= cfg.compaction["targetContextRatio"] <= 0.85
    assert cfg.compaction["engine"] in ("fabric", "pi")
    assert all(
        isinstance(v, bool) for k, v in cfg.memory.items() if k in ("enabled", "indexThinking", "indexToolOutput")
    )
    assert all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0
        for k, v in cfg.memory.items()
        if k.startswith(("max", "regex", "hot"))
    )


async def test_new_session_dir_moves_the_file_watcher(tmp_path):
    agent = make_agent_dir(tmp_path)
    other = tmp_path / "other-sessions"
    other.mkdir()
    client = await start(agent, "visual-studio-code")
    try:
        for _ in range(750):
            watched = [r for r in client.registrations if r.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES]
            if watched:
                break
            await asyncio.sleep(0.02)
        assert len(watched) == 1
        client.set_configuration({"sessionDir": str(other)}, section="fabric")
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        for _ in range(750):
            watched = [r for r in client.registrations if r.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES]
            if len(watched) == 2:
                break
            await asyncio.sleep(0.02)
        assert [u.id for u in client.unregistrations] == [watched[0].id]
        pattern = watched[1].register_options["watchers"][0]["globPattern"]
        assert str(other) in (pattern if isinstance(pattern, str) else pattern["baseUri"])
        assert (await _reload(client))["sessionDir"] == str(other)
    finally:
        await stop(client)


async def test_workspace_folder_change_moves_the_project_layers(tmp_path):
    agent, project = _layout(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    client = await start(agent, "visual-studio-code", workspace=elsewhere, init_options={"trusted": True})
    try:
        assert (await _reload(client))["memory"]["hotSessions"] == 5  # no project layer there
        client.workspace_did_change_workspace_folders(
            types.DidChangeWorkspaceFoldersParams(
                event=types.WorkspaceFoldersChangeEvent(
                    added=[types.WorkspaceFolder(uri=project.as_uri(), name="proj")],
                    removed=[types.WorkspaceFolder(uri=elsewhere.as_uri(), name="proj")],
                )
            )
        )
        for _ in range(750):
            cfg = await _reload(client)
            if cfg["memory"]["hotSessions"] == 3:
                break
            await asyncio.sleep(0.02)
        assert cfg["memory"]["hotSessions"] == 3 and cfg["reserveTokens"] == 999
    finally:
        await stop(client)


async def test_a_missing_session_dir_is_named_and_never_complete(tmp_path):
    """Issue 34: an agent dir without sessions/ is not an empty history. Every listing
    answer says so (reason, error naming the directory); once the directory exists, the
    same requests are complete again."""
    agent = tmp_path / "agent"
    agent.mkdir()
    sessions = agent / "sessions"
    client = await start(agent, "neovim@v0.11")
    try:
        for method, params in (
            (protocol.RECALL, {"query": "anything", "scope": "global"}),
            (protocol.SESSIONS, {"scope": "global"}),
            (protocol.FILE_HISTORY, {"path": "/home/user/proj/app.py"}),
        ):
            out = await rpc(client, method, params)
            cov = out["coverage"]
            assert cov["complete"] is False and cov["reasons"] == ["session_dir_missing"], (method, cov)
            assert cov["error"]["code"] == "session_dir_missing" and str(sessions) in cov["error"]["message"]
            assert "PI_CODING_AGENT_DIR" in cov["error"]["message"]
        recall = await rpc(client, protocol.RECALL, {"query": "anything", "scope": "global"})
        assert recall["authoritative"] is False and recall["text"].startswith("No indexed matches")
        assert str(sessions) in recall["text"]  # what a user reads names the directory too
        sessions.mkdir()
        again = await rpc(client, protocol.RECALL, {"query": "anything", "scope": "global"})
        assert again["coverage"]["complete"] is True and "error" not in again["coverage"]
        assert again["authoritative"] is True
    finally:
        await stop(client)
