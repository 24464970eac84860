"""initialize / initialized / shutdown, configuration pulls and session-file freshness
(`workspace/didChangeWatchedFiles` when the client can register it, else cheap polling)."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.uris import to_fs_path

from fabric_lsp import __version__
from fabric_lsp.handlers.registry import feature

if TYPE_CHECKING:
    from fabric_lsp.server import FabricServer

log = logging.getLogger("fabric_lsp.lifecycle")

POLL_INTERVAL_S = float(os.environ.get("FABRIC_LSP_POLL_INTERVAL", "2.0"))
WATCH_REGISTRATION_ID = "fabric-lsp/session-files"
CONFIG_REGISTRATION_ID = "fabric-lsp/configuration"
# How long after `initialized` the start-up chores wait (`start_up_chores`): the editor's
# first requests come within it and run without them.
CHORES_DELAY_S = 0.25


async def ask_client(request: Any, timeout: float = 5.0) -> Any:
    """Await a server→client request at most `timeout` seconds. The request itself is
    shielded: a late answer must still find its future (pygls fails on answers to
    requests whose future was cancelled)."""
    pending = asyncio.ensure_future(request)
    pending.add_done_callback(lambda f: f.cancelled() or f.exception())
    return await asyncio.wait_for(asyncio.shield(pending), timeout)


@feature(types.INITIALIZE)
def initialize(ls: FabricServer, params: types.InitializeParams) -> None:
    from fabric_lsp.server import workspace_root_of

    ls.loop = asyncio.get_running_loop()
    ls.init_options = params.initialization_options
    ls.workspace_root = workspace_root_of(params)
    ls.reload_config()
    if os.environ.get("FABRIC_LSP_BACKGROUND_INDEX", "1") != "0":
        # A fresh index's builders start now, before the answer, and import while the
        # handshake goes on (`initialized` checks again with the client's settings).
        ls.engines.prestart_builders(indexing=True)


async def pull_client_settings(ls: FabricServer) -> None:
    """`workspace/configuration` section "fabric", when the client supports it."""
    if not ls.client_supports("workspace", "configuration"):
        return
    scope = ls.workspace_root.as_uri() if ls.workspace_root is not None else None
    try:
        result = await ask_client(
            ls.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="fabric", scope_uri=scope)])
            )
        )
    except Exception as err:
        log.warning("workspace/configuration failed: %s", err)
        return
    if isinstance(result, (list, tuple)) and result:
        ls.client_settings = result[0]


@feature(types.INITIALIZED)
async def initialized(ls: FabricServer, params: types.InitializedParams) -> None:
    # (before any await: a request read after this notification finds it unset)
    pulled = ls.settings_pulled = asyncio.Event()
    index_in_background = os.environ.get("FABRIC_LSP_BACKGROUND_INDEX", "1") != "0"
    if index_in_background:
        from fabric_lsp.handlers.request_runner import BackgroundProgress

        # Enabled first (cheap: a flag), before this handler awaits the client: a request
        # that runs meanwhile makes its memory engine with the indexer pending, so its
        # answer says what the indexer will cover (`indexing_in_progress`).
        ls.engines.enable_background_index(BackgroundProgress(ls).sink)
    try:
        await pull_client_settings(ls)
        config = ls.reload_config()
    finally:
        pulled.set()
    if index_in_background:  # (a fresh index only; its dir as the client's settings have it)
        ls.engine_executor.submit(ls.engines.prestart_builders)  # (ends them if not wanted now)
    if ls.client_supports("workspace", "did_change_configuration", "dynamic_registration"):
        await _register(ls, CONFIG_REGISTRATION_ID, types.WORKSPACE_DID_CHANGE_CONFIGURATION, None)
    await start_watching(ls)
    ls.initialized_done = True
    if ls.preview_pool is not None:  # the first preview must not wait for a worker to start
        ls.engine_executor.submit(ls.preview_pool.warm)
    if index_in_background:  # every session, newest first, at the lowest priority; `$/progress` per pass
        ls.engine_executor.submit(ls.engines.resume_background_index)
    # The rest of start-up waits a moment and then runs one step at a time (`start_up_chores`).
    asyncio.get_running_loop().call_later(CHORES_DELAY_S, _submit_chores, ls)
    ls.log_message(
        f"fabric-lsp {__version__} ready; sessions in {config.session_dir}; "
        f"project config {'applied' if config.trusted else 'ignored (workspace not trusted)'}"
    )


def _submit_chores(ls: FabricServer) -> None:
    if ls.shutting_down:
        return
    try:
        ls.engine_executor.submit(start_up_chores, ls)
    except RuntimeError:  # the executor is shut down: the server is stopping
        pass


def start_up_chores(ls: FabricServer) -> None:
    """What the server sets up after `initialized` besides the preview worker and the
    background indexer: this process' preview imports (so the first preview does not pay
    for them), the CLI's socket (docs/cli.md) and the intents committer (intents left
    pending by an earlier run or another process are committed without waiting for a
    request). About 25 ms of imports and set-up, run one after another, `CHORES_DELAY_S`
    after `initialized`: run at once in parallel threads they held the interpreter lock
    and the import lock when the editor's first requests came, and a compaction preview
    sent right after `initialized` waited ~30 ms for them before its worker got the task
    (docs/performance.md, "The first preview after start")."""
    steps: list[Any] = [ls.engines.warm_previews]
    from fabric_lsp.local_socket_server import serve_for_server

    steps.append(lambda: serve_for_server(ls))  # the CLI's memory reads, over this user's socket
    if os.environ.get("FABRIC_LSP_INTENTS_AUTOSTART", "1") != "0":
        steps.append(ls.engines.start_background)
    for step in steps:
        if ls.shutting_down:
            return
        try:
            step()
        except Exception:
            log.exception("a start-up step failed")


async def _register(ls: FabricServer, reg_id: str, method: str, options: Any) -> bool:
    try:
        await ask_client(
            ls.client_register_capability_async(
                types.RegistrationParams(
                    registrations=[types.Registration(id=reg_id, method=method, register_options=options)]
                )
            )
        )
        return True
    except Exception as err:
        log.info("client/registerCapability %s failed: %s", method, err)
        return False


async def start_watching(ls: FabricServer) -> None:
    stop_watching(ls)
    if getattr(ls, "watch_mode", None) == "registered":  # re-register for a new session dir
        try:
            await ask_client(
                ls.client_unregister_capability_async(
                    types.UnregistrationParams(
                        unregisterations=[
                            types.Unregistration(
                                id=WATCH_REGISTRATION_ID, method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES
                            )
                        ]
                    )
                )
            )
        except Exception as err:
            log.info("client/unregisterCapability failed: %s", err)
        ls.watch_mode = None
    session_dir: Path = ls.config.session_dir
    if ls.client_supports("workspace", "did_change_watched_files", "dynamic_registration"):
        if ls.client_supports("workspace", "did_change_watched_files", "relative_pattern_support"):
            pattern: Any = types.RelativePattern(base_uri=session_dir.as_uri(), pattern="**/*.jsonl")
        else:
            pattern = f"{session_dir.as_posix()}/**/*.jsonl"
        options = types.DidChangeWatchedFilesRegistrationOptions(
            watchers=[types.FileSystemWatcher(glob_pattern=pattern)]
        )
        if await _register(ls, WATCH_REGISTRATION_ID, types.WORKSPACE_DID_CHANGE_WATCHED_FILES, options):
            ls.watch_mode = "registered"
            return
    ls.watch_mode = "polling"
    ls.watch_task = asyncio.ensure_future(_poll(ls, session_dir))


def stop_watching(ls: FabricServer) -> None:
    task = getattr(ls, "watch_task", None)
    if task is not None:
        task.cancel()
        ls.watch_task = None


class ChangeBatcher:
    """Coalesces changed session paths into one `notify_changed` at a time, so a burst of
    watched-file events (Pi appends often) never fills the engine executor while a long
    request holds the memory engine. Lives on the event loop; no locks needed."""

    def __init__(self, ls: FabricServer) -> None:
        self.ls = ls
        self.pending: set[str] = set()
        self.running = False

    def add(self, paths: Any) -> None:
        self.pending.update(paths)
        if self.pending and not self.running:
            self.running = True
            asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self.pending:
                batch = sorted(self.pending)
                self.pending.clear()
                await loop.run_in_executor(self.ls.memory_executor, self.ls.engines.notify_changed, batch)
        finally:
            self.running = False


def _changes(ls: FabricServer) -> ChangeBatcher:
    batcher = ls.change_batcher
    if batcher is None:
        batcher = ls.change_batcher = ChangeBatcher(ls)
    return batcher


def snapshot(session_dir: Path) -> dict[str, tuple[int, int, int]]:
    """(size, mtime_ns, inode) of every `<sessionDir>/*/*.jsonl`; a stat per file."""
    out: dict[str, tuple[int, int, int]] = {}
    try:
        projects = list(os.scandir(session_dir))
    except OSError:
        return out
    for project in projects:
        if not project.is_dir(follow_symlinks=False):
            continue
        try:
            entries = list(os.scandir(project.path))
        except OSError:
            continue
        for entry in entries:
            if entry.name.endswith(".jsonl"):
                try:
                    st = entry.stat()
                except OSError:
                    continue
                out[entry.path] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


async def _poll(ls: FabricServer, session_dir: Path) -> None:
    loop = asyncio.get_running_loop()
    previous = await loop.run_in_executor(ls.engine_executor, snapshot, session_dir)
    while True:
        await asyncio.sleep(POLL_INTERVAL_S)
        current = await loop.run_in_executor(ls.engine_executor, snapshot, session_dir)
        changed = [p for p in set(previous) | set(current) if previous.get(p) != current.get(p)]
        previous = current
        if changed:
            log.debug("polling: %d session files changed", len(changed))
            _changes(ls).add(changed)


@feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
async def did_change_watched_files(ls: FabricServer, params: types.DidChangeWatchedFilesParams) -> None:
    paths = []
    for change in params.changes:
        path = to_fs_path(change.uri)
        if path and path.endswith(".jsonl"):
            paths.append(path)
    if paths:
        _changes(ls).add(paths)


@feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(ls: FabricServer, params: types.DidChangeConfigurationParams) -> None:
    if ls.client_supports("workspace", "configuration"):
        await pull_client_settings(ls)
    elif isinstance(params.settings, dict) and "fabric" in params.settings:
        ls.client_settings = params.settings["fabric"]
    old_dir = ls.config.session_dir
    config = ls.reload_config()
    if config.session_dir != old_dir:
        await start_watching(ls)


@feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
async def did_change_workspace_folders(ls: FabricServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
    """The first workspace folder is the project: its cwd scopes recall and its `.pi/`
    holds the project configuration layers."""
    folders = list(ls.workspace.folders.values())
    root = to_fs_path(folders[0].uri) if folders else None
    new_root = Path(root) if root else None
    if new_root == ls.workspace_root:
        return
    ls.workspace_root = new_root
    await pull_client_settings(ls)
    old_dir = ls.config.session_dir
    config = ls.reload_config()
    if config.session_dir != old_dir:
        await start_watching(ls)


@feature(types.SHUTDOWN)
def shutdown(ls: FabricServer, *args: Any) -> None:
    stop_watching(ls)
    ls.engines.close()
