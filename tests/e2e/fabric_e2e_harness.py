"""End-to-end harness: the real server process over stdio, driven by pytest-lsp with the
capability sets of real editors (VS Code, Neovim 0.11)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.checks import LspSpecificationWarning

from fabric_lsp.server import converter_factory
from tests.support.agent import real_sessions_agent

REPO = Path(__file__).resolve().parents[2]
REAL_SESSIONS = REPO / "tests" / "fixtures" / "real-sessions"
PROJECT_CWD = "/home/user/proj"
PROJECT_FOLDER = "--home-user-proj--"
EDITORS = ["visual-studio-code", "neovim@v0.11"]
SERVER_CMD = [sys.executable, "-m", "fabric_lsp"]
# the real server with injected engine faults (tests/e2e/faulty_server.py)
FAULTY_SERVER_CMD = [sys.executable, str(Path(__file__).resolve().parent / "faulty_server.py")]


def make_agent_dir(root: Path) -> Path:
    """`<root>/agent/sessions/--home-user-proj--/*.jsonl` from the real Pi fixtures
    (04 is a resumed copy of 03, so their session id is ambiguous by design)."""
    return real_sessions_agent(root, PROJECT_FOLDER)


class RecordingClient(LanguageClient):
    """Records every LSP specification warning raised inside a client handler (pytest-lsp
    only reports those for clients that are test fixtures; `stop` fails on any)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spec_violations: list[str] = []

    def report_server_error(self, error: Exception, source: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, LspSpecificationWarning):
            self.spec_violations.append(str(exc))
        super().report_server_error(error, source)


def make_client() -> LanguageClient:
    """pytest-lsp's client, but custom results stay dicts and fabric notifications,
    registrations and progress are recorded."""
    client = RecordingClient(converter_factory=converter_factory)
    features = dict(pytest_lsp.client.DEFAULT_CLIENT_FEATURES)
    default_create = features.pop(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
    pytest_lsp.client.register_lsp_features(client, features)
    client.create_delay = 0.0  # type: ignore[attr-defined]
    client.creates_in_flight = 0  # type: ignore[attr-defined]

    @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
    async def _create(ls: LanguageClient, params: types.WorkDoneProgressCreateParams) -> None:
        # pytest-lsp's own handler (token bookkeeping, duplicate check), answered after
        # an optional delay, as a busy editor might
        ls.creates_in_flight += 1  # type: ignore[attr-defined]
        try:
            if ls.create_delay:  # type: ignore[attr-defined]
                await asyncio.sleep(ls.create_delay)  # type: ignore[attr-defined]
            default_create(ls, params)
        finally:
            ls.creates_in_flight -= 1  # type: ignore[attr-defined]

    client.activity = []  # type: ignore[attr-defined]
    client.committed = []  # type: ignore[attr-defined]
    client.registrations = []  # type: ignore[attr-defined]
    client.unregistrations = []  # type: ignore[attr-defined]

    @client.feature("fabric/activity")
    def _activity(ls: LanguageClient, params: Any) -> None:
        ls.activity.append(params)  # type: ignore[attr-defined]

    @client.feature("fabric/compactionCommitted")
    def _committed(ls: LanguageClient, params: Any) -> None:
        ls.committed.append(params)  # type: ignore[attr-defined]

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def _register(ls: LanguageClient, params: types.RegistrationParams) -> None:
        ls.registrations.extend(params.registrations)  # type: ignore[attr-defined]

    @client.feature(types.CLIENT_UNREGISTER_CAPABILITY)
    def _unregister(ls: LanguageClient, params: types.UnregistrationParams) -> None:
        ls.unregistrations.extend(params.unregisterations)  # type: ignore[attr-defined]

    return client


def server_env(agent_dir: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PI_CODING_AGENT_DIR"] = str(agent_dir)
    env["HOME"] = str(agent_dir.parent)
    env.update(extra)
    return env


async def start(
    agent_dir: Path,
    editor: str,
    *,
    workspace: Path | None = None,
    init_options: Any = None,
    configuration: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    capabilities: types.ClientCapabilities | None = None,
    server_args: list[str] | None = None,
    server_command: list[str] | None = None,
) -> LanguageClient:
    """A started and initialized client against a fresh server process."""
    config = ClientServerConfig(
        server_command=(server_command or SERVER_CMD) + (server_args or []),
        client_factory=make_client,
        server_env=env or server_env(agent_dir),
    )
    client = await config.start()
    if configuration is not None:
        client.set_configuration(configuration, section="fabric")
    ws = workspace or Path(PROJECT_CWD)
    await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities if capabilities is not None else client_capabilities(editor),
            workspace_folders=[types.WorkspaceFolder(uri=ws.as_uri(), name="proj")],
            initialization_options=init_options,
        )
    )
    return client


async def stop(client: LanguageClient) -> None:
    # A create answer still being delayed (create_delay) is a pending handler task; pygls
    # cannot fail such a task when the server exits, so let it answer first.
    deadline = time.monotonic() + 10.0
    while getattr(client, "creates_in_flight", 0) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    await client.shutdown_session()
    await client.stop()
    violations = getattr(client, "spec_violations", [])
    assert not violations, f"LSP specification warnings: {violations}"


async def rpc(client: LanguageClient, method: str, params: Any = None) -> Any:
    return await client.protocol.send_request_async(method, params)


async def rpc_error(client: LanguageClient, method: str, params: Any = None) -> tuple[int, str]:
    """(code, message) of the error the server answers; fails when it answers a result."""
    from pygls.exceptions import JsonRpcException

    try:
        result = await client.protocol.send_request_async(method, params)
    except JsonRpcException as err:
        return err.code, err.message
    raise AssertionError(f"{method} answered a result instead of an error: {result!r}")


SPEC_WARNINGS_AS_ERRORS = pytest.mark.filterwarnings("error::pytest_lsp.checks.LspSpecificationWarning")
