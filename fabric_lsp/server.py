"""The language server: builds the pygls LanguageServer, owns the state, registers the
handler modules. All request logic lives in `handlers/` (thin) and `engine/` (real work).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import cattrs
from lsprotocol import types
from lsprotocol.types import ResponseError
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
)
from pygls.protocol import default_converter as _pygls_default_converter
from pygls.uris import to_fs_path

from fabric_lsp import __version__
from fabric_lsp.config import ServerConfig, load_config
from fabric_lsp.engine.activity import CancelToken

log = logging.getLogger("fabric_lsp.server")


def _keep_params(obj: dict[str, Any], cls: type) -> Any:
    # Custom (`fabric/*`) params and results stay plain dicts: protocol.py decodes them
    # strictly. pygls' default would turn them into namedtuples.
    obj.setdefault("result" if cls is JsonRPCResponseMessage else "params", None)
    return cls(**obj)


def converter_factory() -> cattrs.Converter:
    converter = _pygls_default_converter()
    for cls in (JsonRPCRequestMessage, JsonRPCNotification, JsonRPCResponseMessage):
        converter.register_structure_hook(cls, _keep_params)
    return converter


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float, str)) and not isinstance(value, bool))


class _RawMessage(dict):
    """A JSON object with a `jsonrpc` key, not yet structured (see FabricProtocol)."""


class FabricProtocol(LanguageServerProtocol):
    # pygls structures every JSON object that has a `jsonrpc` key while parsing, nested
    # ones inside params included. Structure only the top-level message, so params stay
    # exactly the JSON the client sent.
    def structure_message(self, data: dict[str, Any]) -> Any:
        return _RawMessage(data) if "jsonrpc" in data else data

    def handle_message(self, message: Any) -> None:
        if not isinstance(message, _RawMessage):  # no "jsonrpc" key, or not an object
            self._invalid_request(message, 'not a JSON-RPC 2.0 message (no "jsonrpc": "2.0")')
            return
        raw = _plain(message)
        if raw.get("jsonrpc") != "2.0":
            self._invalid_request(raw, '"jsonrpc" must be "2.0"')
            return
        if "id" in raw and not _valid_id(raw["id"]):
            # JSON-RPC 2.0: an id that is not a string, number or null cannot be echoed;
            # the answer is Invalid Request with a null id.
            if "method" in raw:
                self._send_response(None, error=ResponseError(code=-32600, message="Invalid Request: id must be a string, a number or null"))
            else:
                log.warning("ignored a response whose id is not a string or number")
            return
        if "method" in raw and not isinstance(raw["method"], str):
            self._invalid_request(raw, '"method" must be a string')
            return
        try:
            structured = super().structure_message(raw)
        except Exception as err:  # params that do not fit the standard LSP type
            self._unstructurable(raw, err)
            return
        super().handle_message(structured)

    def _invalid_request(self, raw: Any, why: str) -> None:
        """JSON-RPC -32600 for a request we can identify; anything else is logged."""
        if isinstance(raw, dict) and "method" in raw and isinstance(raw.get("id"), (int, str)):
            self._send_response(raw["id"], error=ResponseError(code=-32600, message=f"Invalid Request: {why}"))
        else:
            log.warning("ignored a message that is not JSON-RPC 2.0: %s", why)

    def _unstructurable(self, raw: dict[str, Any], err: Exception) -> None:
        method = raw.get("method")
        cause = err.__cause__ or err
        detail = " ".join(str(cause).split())[:300]
        if method is not None and "id" in raw:
            message = f"{method}: params do not match the LSP type: {detail}"
            self._send_response(raw["id"], error=ResponseError(code=-32602, message=message))
        elif method is not None:
            log.warning("ignored notification %s with unusable params: %s", method, detail)
        elif "id" in raw:  # a client's answer of an unexpected shape: hand it over raw
            self._handle_response(raw["id"], raw.get("result"), None)

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        # Set the engine's CancelToken first, so work running in the executor stops at
        # its next check; pygls then cancels the handler task (→ -32800).
        token = self._server.cancel_tokens.get(msg_id)  # type: ignore[attr-defined]
        if token is not None:
            token.cancel()
        super()._handle_cancel_notification(msg_id)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


class FabricServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            name="fabric-lsp",
            version=__version__,
            protocol_cls=FabricProtocol,
            converter_factory=converter_factory,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            max_workers=4,  # pygls' stdio reader lives in this pool: never 1
        )
        self.engine_executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="fabric-engine")
        # The memory engine serialises its calls; queued memory requests wait in their own
        # pool so they never hold the threads previews, intents and hovers run on.
        self.memory_executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="fabric-memory")
        self.cancel_tokens: dict[Any, CancelToken] = {}
        self.init_options: Any = None
        self.client_settings: Any = None
        self.workspace_root: Path | None = None
        self.config: ServerConfig = load_config()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.watch_task: asyncio.Task[Any] | None = None
        self.watch_mode: str | None = None  # "registered" | "polling"
        self.initialized_done = False
        self._shown_warnings: set[str] = set()
        self._lock = threading.Lock()
        from fabric_lsp.handlers.engines import Engines

        self.engines = Engines(self)

    # -- client capabilities -------------------------------------------------------

    def client_supports(self, *path: str) -> bool:
        node: Any = self.client_capabilities
        for name in path:
            node = getattr(node, name, None)
            if node is None:
                return False
        return bool(node)

    # -- configuration -------------------------------------------------------------

    def reload_config(self) -> ServerConfig:
        """Re-read every configuration layer; invalid values become warnings."""
        new = load_config(
            workspace_root=self.workspace_root,
            init_options=self.init_options,
            client_settings=self.client_settings,
        )
        old, self.config = self.config, new
        if (old.agent_dir, old.session_dir, old.index_dir, old.memory, old.compaction) != (
            new.agent_dir,
            new.session_dir,
            new.index_dir,
            new.memory,
            new.compaction,
        ):
            self.engines.reset()
            if self.initialized_done and os.environ.get("FABRIC_LSP_INTENTS_AUTOSTART", "1") != "0":
                self.engine_executor.submit(self.engines.start_background)
        for warning in new.warnings:
            if warning not in self._shown_warnings:  # each problem is reported once
                self._shown_warnings.add(warning)
                log.warning("configuration: %s", warning)
                self.show_message(f"fabric-lsp configuration: {warning}", types.MessageType.Warning)
        return new

    # -- thread-safe outbound messages ---------------------------------------------

    def call_in_loop(self, fn: Any, *args: Any) -> None:
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        try:
            if threading.current_thread() is threading.main_thread():
                fn(*args)
            else:
                loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # loop closed during shutdown
            pass

    def notify(self, method: str, params: Any) -> None:
        self.call_in_loop(self.protocol.notify, method, params)

    def show_message(self, message: str, kind: types.MessageType) -> None:
        self.call_in_loop(self.window_show_message, types.ShowMessageParams(type=kind, message=message))

    def log_message(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self.call_in_loop(self.window_log_message, types.LogMessageParams(type=kind, message=message))

    # -- paths ------------------------------------------------------------------------

    def default_cwd(self) -> str | None:
        return str(self.workspace_root) if self.workspace_root is not None else None


def workspace_root_of(params: types.InitializeParams) -> Path | None:
    uri = None
    if params.workspace_folders:
        uri = params.workspace_folders[0].uri
    elif params.root_uri:
        uri = params.root_uri
    if uri:
        path = to_fs_path(uri)
        return Path(path) if path else None
    if params.root_path:
        return Path(params.root_path)
    return None


# -- logging ----------------------------------------------------------------------------


class _ClientLogHandler(logging.Handler):
    """Forwards fabric_lsp log records to the client as `window/logMessage`."""

    _LEVELS = (
        (logging.ERROR, types.MessageType.Error),
        (logging.WARNING, types.MessageType.Warning),
        (logging.INFO, types.MessageType.Info),
        (0, types.MessageType.Log),
    )

    def __init__(self, server: FabricServer) -> None:
        super().__init__()
        self.server = server
        self._busy = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(self._busy, "on", False):
            return
        self._busy.on = True
        try:
            kind = next(k for lvl, k in self._LEVELS if record.levelno >= lvl)
            message = record.getMessage()
            if record.exc_info and record.levelno >= logging.ERROR:
                message += "\n" + logging.Formatter().formatException(record.exc_info)
            self.server.log_message(message, kind)
        except Exception:  # logging must never break serving
            pass
        finally:
            self._busy.on = False


class _DropOwnRpcErrors(logging.Filter):
    """pygls logs every error response with a traceback; ours are already logged (or are
    plain InvalidParams / cancellations), so drop those duplicates."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, JsonRpcException)


def _quiet_pygls() -> None:
    # pygls logs every message at INFO ("Sending data: ...") and every registration:
    # keep it at WARNING, before the server object is built.
    logging.getLogger("pygls").setLevel(logging.WARNING)
    logging.getLogger("pygls.protocol.json_rpc").addFilter(_DropOwnRpcErrors())


def _configure_logging(server: FabricServer) -> None:
    handler = _ClientLogHandler(server)
    logging.getLogger("fabric_lsp").addHandler(handler)


def build_server() -> FabricServer:
    _quiet_pygls()
    server = FabricServer()
    _configure_logging(server)
    from fabric_lsp.handlers import register_all

    register_all(server)
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
    # LSP: exit code 0 only when `shutdown` came before `exit` (or end of input)
    return 0 if server.protocol._shutdown else 1
