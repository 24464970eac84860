"""The language server object: the pygls LanguageServer subclass that owns the state
(settings, engines, executors, the outbox) and its wire plumbing. It registers nothing:
the composition root `fabric_lsp/app.py` builds it and hands it the features of
`handlers/`; request logic lives in `handlers/` (thin) and `engine/` (real work).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import cattrs
import msgspec
from lsprotocol import types
from lsprotocol.types import ResponseError
from pygls.exceptions import JsonRpcException, JsonRpcInternalError
from pygls.lsp.server import LanguageServer
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
)
from pygls.protocol import default_converter as _pygls_default_converter
from pygls.uris import to_fs_path

from fabric_lsp import __version__, preview_workers
from fabric_lsp.config import ServerConfig, load_config
from fabric_lsp.engine.activity import CancelToken
from fabric_lsp.engine_owner import Engines
from fabric_lsp.outbox import EXIT_DRAIN_S, Outbox, max_pending_from_env

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
                # JSON-RPC 2.0 answers with a null id here; pygls' MsgId type has no None
                self._send_response(
                    None,  # pyright: ignore[reportArgumentType]
                    error=ResponseError(code=-32600, message="Invalid Request: id must be a string, a number or null"),
                )
            else:
                log.warning("ignored a response whose id is not a string or number")
            return
        if "method" in raw and not isinstance(raw["method"], str):
            self._invalid_request(raw, '"method" must be a string')
            return
        if "method" in raw and not self._lifecycle_allows(raw):
            return
        try:
            structured = super().structure_message(raw)
        except Exception as err:  # params that do not fit the standard LSP type
            self._unstructurable(raw, err)
            return
        if raw.get("method") == "initialize" and "id" in raw:
            self._initialize_seen = True
        elif raw.get("method") == "shutdown" and "id" in raw:
            self._shutdown_seen = True
        super().handle_message(structured)  # pyright: ignore[reportArgumentType]  # structured by pygls' own converter

    _initialize_seen = False
    _shutdown_seen = False

    @property
    def shutting_down(self) -> bool:
        """`shutdown` was asked for (answered or not): start nothing new."""
        return bool(self._shutdown_seen or self._shutdown)

    def _lifecycle_allows(self, raw: dict[str, Any]) -> bool:
        """LSP lifecycle: before `initialize` only `initialize` and `exit` (a request gets
        -32002); one `initialize`; after `shutdown` only `exit` (a request gets -32600).
        Refused notifications are dropped, as the spec says."""
        method, is_request = raw["method"], "id" in raw
        if method == "exit":
            return True
        if self.shutting_down:
            why, code = f"Invalid Request: {method} after shutdown (only exit is accepted now)", -32600
        elif not self._initialize_seen:
            if method == "initialize" and is_request:
                return True
            why, code = f"Server not initialized: {method} before initialize", -32002
        elif method == "initialize" and is_request:
            why, code = "Invalid Request: initialize may be sent only once", -32600
        else:
            return True
        if is_request:
            self._send_response(raw["id"], error=ResponseError(code=code, message=why))
        else:
            log.debug("dropped notification %s: %s", method, why)
        return False

    def reject_too_deep(self, top: Any) -> None:
        """A message nested deeper than framing.MAX_MESSAGE_DEPTH (`top`: its top level,
        nested values as framing.NESTED): -32602 for a request, dropped otherwise."""
        from fabric_lsp.framing import MAX_MESSAGE_DEPTH, NESTED

        why = f"the message is nested deeper than {MAX_MESSAGE_DEPTH} levels"
        if not isinstance(top, dict) or "method" not in top or "id" not in top:
            log.warning("ignored a message that is not a request: %s", why)
        elif top["id"] == NESTED or not _valid_id(top["id"]):
            self._send_response(None, error=ResponseError(code=-32600, message=f"Invalid Request: {why}"))  # type: ignore[arg-type]
        elif not isinstance(top["method"], str):
            self._send_response(top["id"], error=ResponseError(code=-32600, message=f"Invalid Request: {why}"))
        else:
            self._send_response(top["id"], error=ResponseError(code=-32602, message=f"{top['method']}: {why}"))

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

    def _send_data(self, data: Any) -> None:
        """pygls' sender, with strict JSON: a non-finite number (a session's `1e400`) is
        written as JavaScript's JSON.stringify writes it, `null`, never `Infinity`/`NaN`;
        a response whose result cannot be serialized still gets an answer (-32603)."""
        if not data:
            return
        if self.writer is None:
            log.error("unable to send data: no transport")
            return
        if type(data) is JsonRPCResponseMessage and type(data.result) is EncodedResult:
            payload = data.result.response(data.id)  # (UTF-8 already: no text made of it)
        else:
            try:
                body = message_json(data, self._serialize_message)
            except Exception as err:
                log.exception("cannot serialize an outgoing message")
                msg_id = getattr(data, "id", None)
                if msg_id is None or not hasattr(data, "result"):
                    return
                error = {"code": -32603, "message": f"the result could not be serialized: {type(err).__name__}"}
                body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "error": error})
            payload = body.encode(self.CHARSET)  # (an encoded result holds raw UTF-8: count bytes)
        header = f"Content-Length: {len(payload)}\r\nContent-Type: {self.CONTENT_TYPE}; charset={self.CHARSET}\r\n\r\n"
        frame = (header.encode("ascii") + payload) if self._include_headers else payload
        try:
            if isinstance(self.writer, Outbox):  # stdio: queued, written by its own thread
                self.writer.write(frame, droppable=_informational(data))
                return
            res = self.writer.write(frame)
            if inspect.isawaitable(res):
                asyncio.ensure_future(res)
        except BrokenPipeError:
            log.exception("error sending data: broken pipe")
            raise
        except Exception as error:
            log.exception("error sending data")
            self._server._report_server_error(error, JsonRpcInternalError)  # type: ignore[attr-defined]


_INFORMATIONAL = frozenset({"window/logMessage", "fabric/activity"})


def _informational(data: Any) -> bool:
    """A notification the client can miss without harm (outbox.py drops these while
    the client does not read): a log message, an activity event, a progress report."""
    if isinstance(data, JsonRPCNotification) or hasattr(data, "method") and not hasattr(data, "id"):
        method = getattr(data, "method", None)
        if method in _INFORMATIONAL:
            return True
        if method == "$/progress":
            return getattr(getattr(getattr(data, "params", None), "value", None), "kind", None) == "report"
    return False


def _finite(value: Any) -> Any:
    """`value` with every NaN/±Infinity replaced by None (JSON.stringify's `null`)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def wire_json(data: Any, default: Any = None) -> str:
    """JSON text of an outgoing message, never holding NaN or Infinity (not JSON: a
    strict client drops the whole frame)."""
    try:
        return json.dumps(data, default=default, allow_nan=False)
    except ValueError:  # "Out of range float values are not JSON compliant"
        log.info("an outgoing message held NaN or Infinity: written as null")
        plain = json.loads(json.dumps(data, default=default))
        return json.dumps(_finite(plain), allow_nan=False)


class EncodedResult:
    """A response's result already encoded as JSON (msgspec, from a result Struct): the
    response text is made around it without a copy into plain values, which pygls' JSON
    encoder would then walk again (about 1 ms of a 175 KB recall answer). msgspec writes
    a non-finite float as `null`, as JSON.stringify does."""

    __slots__ = ("raw",)

    def __init__(self, struct: Any) -> None:
        try:
            self.raw: bytes = msgspec.json.encode(struct)  # UTF-8
        except UnicodeEncodeError:  # a lone surrogate (an echoed query): JSON's \uXXXX escape
            self.raw = wire_json(msgspec.to_builtins(struct)).encode("ascii")

    def response(self, msg_id: Any) -> bytes:
        """The whole response's JSON as UTF-8 (`id`, `jsonrpc`, `result`), made with one
        copy of the result and no text in between."""
        return b"".join((b'{"id":', json.dumps(msg_id).encode("utf-8"), b',"jsonrpc":"2.0","result":', self.raw, b"}"))


def message_json(data: Any, serialize: Any) -> str:
    """`wire_json(data, serialize)`, the same text, made without pygls' converter for the
    response of one of our own methods: its result is plain JSON values already
    (protocol.to_wire), which the converter would only copy value by value (a few ms for
    a recall answer)."""
    if type(data) is JsonRPCResponseMessage and type(data.result) is EncodedResult:
        return data.result.response(data.id).decode("utf-8")
    if type(data) is JsonRPCResponseMessage and type(data.result) is dict:
        try:
            return wire_json({"id": data.id, "jsonrpc": data.jsonrpc, "result": data.result})
        except TypeError:  # not plain after all: the converter's way
            pass
    return wire_json(data, serialize)


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
        # Previews (CPU-heavy) queue here, never in front of cheap requests in the engine
        # pool; identical ones in flight are computed once (handlers/scheduling.py).
        self.heavy_executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="fabric-heavy")
        self.heavy_inflight: dict[bytes, Any] = {}
        self.cancel_tokens: dict[Any, CancelToken] = {}
        self.init_options: Any = None
        self.client_settings: Any = None
        self.workspace_root: Path | None = None
        self.config: ServerConfig = load_config()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.watch_task: asyncio.Task[Any] | None = None
        self.watch_mode: str | None = None  # "registered" | "polling"
        self.change_batcher: Any = None  # handlers/lifecycle.ChangeBatcher, made on first change
        self.initialized_done = False
        # Set once `initialized` has the client's settings (None: not asked for yet): a
        # request that comes meanwhile waits for them (request_runner.run_request).
        self.settings_pulled: asyncio.Event | None = None
        self._shown_warnings: set[str] = set()
        self._lock = threading.Lock()
        self.engines = Engines(
            lambda: self.config,
            notify=self.notify,
            submit=self.engine_executor.submit,
            warn=lambda message: self.show_message(message, types.MessageType.Warning),
        )
        # Previews are computed in worker processes, so they never hold this process'
        # GIL (the reader, the loop and cheap requests keep it): engine/procpool.py.
        self.preview_pool = preview_workers.pool_from_env()
        if self.preview_pool is not None:
            self.engines.preview_runner = self.preview_pool.run

    # -- transport ---------------------------------------------------------------------

    def _start_io_async(self, stdin: Any = None, stdout: Any = None) -> None:
        """pygls' stdio server with our reader (fabric_lsp/framing.py) instead of
        pygls.io_.run_async, which dies on a huge Content-Length and goes deaf on a bad one."""
        import sys
        from threading import Event

        from fabric_lsp.framing import FrameReader, serve

        self._stop_event = stop = Event()
        source = stdin or sys.stdin.buffer
        read_some = getattr(source, "read1", None) or source.read
        # never a blocking write on the loop: a client that stops reading cannot stall it
        outbox = Outbox(stdout or sys.stdout.buffer, max_pending=max_pending_from_env())
        self.protocol.set_writer(outbox)

        async def main() -> None:
            loop = asyncio.get_running_loop()
            reader = FrameReader(lambda n: loop.run_in_executor(self.thread_pool, read_some, n))
            await serve(reader, self.protocol, stop.is_set, room=outbox.wait_room)

        try:
            asyncio.run(main())
        except BrokenPipeError:
            log.error("the connection to the client is lost: stopping")
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            outbox.drain(EXIT_DRAIN_S)  # end of input: the answers already queued still go out
            self.shutdown()

    def start_tcp(self, host: str, port: int) -> None:
        """pygls' TCP server (for debugging), with the same reader as stdio."""
        from threading import Event

        from fabric_lsp.framing import FrameReader, serve

        self._stop_event = stop = Event()

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.protocol.set_writer(writer)  # type: ignore[arg-type]
            await serve(FrameReader(reader.read), self.protocol, stop.is_set)
            self.shutdown()

        async def main() -> None:
            self._server = await asyncio.start_server(connection, host, port)
            async with self._server:
                await self._server.serve_forever()

        try:
            asyncio.run(main())
        except asyncio.CancelledError:
            pass

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
            elif self.initialized_done:
                self.engine_executor.submit(self.engines.resume_background_index)
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

    @property
    def shutting_down(self) -> bool:
        """The client asked for `shutdown`: start-up steps and servers not yet started stay so."""
        protocol = self.protocol
        return isinstance(protocol, FabricProtocol) and protocol.shutting_down

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


def quiet_pygls() -> None:
    # pygls logs every message at INFO ("Sending data: ...") and every registration:
    # keep it at WARNING, before the server object is built.
    logging.getLogger("pygls").setLevel(logging.WARNING)
    logging.getLogger("pygls.protocol.json_rpc").addFilter(_DropOwnRpcErrors())


def configure_logging(server: FabricServer) -> None:
    handler = _ClientLogHandler(server)
    logging.getLogger("fabric_lsp").addHandler(handler)
