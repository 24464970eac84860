"""`workspace/executeCommand`: one command per request (its params object as the single
argument) plus `fabric.reload` (re-read configuration, drop caches)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from pygls.exceptions import JsonRpcInvalidParams

from fabric_lsp import protocol
from fabric_lsp.handlers import compaction, expand, file_history, intents, recall, sessions

if TYPE_CHECKING:
    from fabric_lsp.server import FabricServer

REQUEST_HANDLERS: dict[str, Callable[[Any, Any], Awaitable[Any]]] = {
    protocol.SESSIONS: sessions.sessions,
    protocol.RECALL: recall.recall,
    protocol.EXPAND: expand.expand,
    protocol.COMPACTION_PREVIEW: compaction.compaction_preview,
    protocol.BRANCH_SUMMARY_PREVIEW: compaction.branch_summary_preview,
    protocol.COMPACT_REQUEST: intents.compact_request,
    protocol.COMPACT_STATUS: intents.compact_status,
    protocol.COMPACT_CANCEL: intents.compact_cancel,
    protocol.FILE_HISTORY: file_history.file_history,
}


def _single_argument(command: str, args: tuple[Any, ...]) -> Any:
    if len(args) > 1:
        raise JsonRpcInvalidParams(
            message=f"{command}: takes one argument (the request's params object), got {len(args)}"
        )
    return args[0] if args else {}


def _make_command(command: str, method: str) -> Callable[..., Awaitable[Any]]:
    handler = REQUEST_HANDLERS[method]

    async def run(ls, *args):  # noqa: ANN001 - pygls inspects this signature
        return await handler(ls, _single_argument(command, args))

    run.__name__ = command.replace(".", "_")
    return run


async def reload(ls, *args):  # noqa: ANN001
    _single_argument("fabric.reload", args)
    from fabric_lsp.handlers.lifecycle import pull_client_settings, start_watching

    await pull_client_settings(ls)
    old_dir = ls.config.session_dir
    config = ls.reload_config()
    if config.session_dir != old_dir:
        await start_watching(ls)
    await asyncio.get_running_loop().run_in_executor(ls.memory_executor, ls.engines.drop_caches)
    return config.describe()


def register(server: "FabricServer") -> None:
    for command, method in protocol.COMMANDS.items():
        if method is None:
            server.command(command)(reload)
        else:
            server.command(command)(_make_command(command, method))
