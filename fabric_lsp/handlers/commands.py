"""`workspace/executeCommand`: one command per request (its params object as the single
argument) plus `fabric.reload` (re-read configuration, drop caches)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pygls.exceptions import JsonRpcInvalidParams

from fabric_lsp import protocol
from fabric_lsp.handlers.registry import request_handler

if TYPE_CHECKING:
    from fabric_lsp.server import FabricServer


def _single_argument(command: str, args: tuple[Any, ...]) -> Any:
    if len(args) > 1:
        raise JsonRpcInvalidParams(
            message=f"{command}: takes one argument (the request's params object), got {len(args)}"
        )
    return args[0] if args else {}


def _make_command(command: str, method: str) -> Callable[..., Awaitable[Any]]:
    handler = request_handler(method)

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


def register_commands(server: FabricServer) -> None:
    """The `workspace/executeCommand` mirror of every request `protocol.COMMANDS` names
    (its registered handler, one params object as the argument) and `fabric.reload`."""
    for command, method in protocol.COMMANDS.items():
        if method is None:
            server.command(command)(reload)
        else:
            server.command(command)(_make_command(command, method))
