"""The composition root of the LSP face: builds the server and registers every feature.

`fabric_lsp/server.py` is the server object (state and wire plumbing); each module of
`fabric_lsp/handlers/` registers its handlers with `@feature(method)` when imported
(`handlers/registry.py`). `build_server` imports every handler module (sorted by name:
a new module needs no list to be edited), gives the server each feature, and adds the
`workspace/executeCommand` mirrors of `protocol.COMMANDS`. Imports point one way:
app -> handlers -> server -> engines -> engine.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil

from fabric_lsp import handlers
from fabric_lsp.handlers.commands import register_commands
from fabric_lsp.handlers.registry import features
from fabric_lsp.server import FabricServer, configure_logging, quiet_pygls

log = logging.getLogger("fabric_lsp.server")


def load_handlers() -> None:
    """Import every handler module (each registers its features once)."""
    for info in sorted(pkgutil.iter_modules(handlers.__path__), key=lambda m: m.name):
        importlib.import_module(f"{handlers.__name__}.{info.name}")


def build_server() -> FabricServer:
    quiet_pygls()
    server = FabricServer()
    configure_logging(server)
    load_handlers()
    for f in features():
        if f.options is None:
            server.feature(f.method)(f.handler)
        else:
            server.feature(f.method, f.options)(f.handler)
    register_commands(server)
    return server


def run_server(tcp: str | None = None) -> int:
    """Serve LSP over stdio (or TCP `host:port`, for debugging); returns the exit code."""
    if tcp:
        host, _, port = tcp.rpartition(":")
        if not host or not port.isdigit():
            log.error("--tcp expects HOST:PORT, got %r", tcp)
            return 2
    server = build_server()
    if tcp:
        server.start_tcp(host, int(port))
    else:
        server.start_io()
    server.engines.close()
    server.engine_executor.shutdown(wait=False, cancel_futures=True)
    server.memory_executor.shutdown(wait=False, cancel_futures=True)
    server.heavy_executor.shutdown(wait=False, cancel_futures=True)
    if server.preview_pool is not None:
        server.preview_pool.close()
    # LSP: exit code 0 only when `shutdown` came before `exit` (or end of input)
    return 0 if server.protocol._shutdown else 1
