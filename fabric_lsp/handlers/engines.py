"""Lazy access to the engines, as the server's configuration describes them.

Engines are imported on first use. While an engine module has not landed, a method that
needs it answers "<method> is not available yet: the <part> has not landed" (-32601)
instead of pretending. Everything here runs in the engine executor, never on the loop.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from fabric_lsp.server import FabricServer

log = logging.getLogger("fabric_lsp.engines")

MEMORY = "fabric_lsp.engine.memory.api"
COMPACTION = "fabric_lsp.engine.compaction.api"
INTENTS = "fabric_lsp.engine.intents"
INTENTS_SERVICE = "fabric_lsp.engine.intents.service"
SESSION = "fabric_lsp.engine.session"

PART_NAMES = {
    MEMORY: "memory engine (fabric_lsp.engine.memory.api)",
    COMPACTION: "compaction engine (fabric_lsp.engine.compaction.api)",
    INTENTS: "intents engine (fabric_lsp.engine.intents)",
    INTENTS_SERVICE: "intents engine (fabric_lsp.engine.intents.service)",
    SESSION: "session model (fabric_lsp.engine.session)",
}


class EngineUnavailable(Exception):
    def __init__(self, method: str, module: str, detail: str = "has not landed") -> None:
        self.method = method
        self.module = module
        super().__init__(f"{method} is not available yet: the {PART_NAMES.get(module, module)} {detail}")


def load_module(method: str, module: str, *attrs: str) -> Any:
    """Import `module`; EngineUnavailable when it (or one of `attrs`) is not there yet."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as err:
        # only "the module itself is missing" means not landed; a broken import inside
        # a landed engine is an internal error and propagates
        if err.name and (module == err.name or module.startswith(err.name + ".")):
            raise EngineUnavailable(method, module) from None
        raise
    missing = [a for a in attrs if not hasattr(mod, a)]
    if missing:
        raise EngineUnavailable(method, module, f"does not provide {', '.join(missing)} yet")
    return mod


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


def build_memory_config(cls: Any, values: dict[str, Any]) -> Any:
    """Instantiate the memory engine's config type from our camelCase settings, keeping
    only the fields it declares."""
    for factory in ("from_settings", "from_dict"):
        if hasattr(cls, factory):
            return getattr(cls, factory)(dict(values))
    fields: set[str] | None = None
    if hasattr(cls, "__struct_fields__"):
        fields = set(cls.__struct_fields__)
    elif dataclasses.is_dataclass(cls):
        fields = {f.name for f in dataclasses.fields(cls)}
    else:
        try:
            fields = set(inspect.signature(cls).parameters)
        except (TypeError, ValueError):
            fields = None
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        for name in (_snake(key), key):
            if fields is None or name in fields:
                kwargs[name] = value
                break
    return cls(**kwargs)


class Engines:
    def __init__(self, server: "FabricServer") -> None:
        self.server = server
        self._lock = threading.RLock()
        self._memory: Any = None
        self._intents: Any = None

    # -- memory -------------------------------------------------------------------------

    def memory(self, method: str) -> Any:
        mod = load_module(method, MEMORY, "MemoryEngine", "MemoryConfig")
        with self._lock:
            if self._memory is None:
                cfg = self.server.config
                self._memory = mod.MemoryEngine(
                    build_memory_config(mod.MemoryConfig, cfg.memory),
                    agent_dir=str(cfg.agent_dir),
                    session_dir=str(cfg.session_dir),
                    index_dir=str(cfg.index_dir),
                )
            return self._memory

    def memory_if_started(self) -> Any:
        with self._lock:
            return self._memory

    # -- compaction ---------------------------------------------------------------------

    def compaction(self, method: str, fn: str) -> Any:
        return getattr(load_module(method, COMPACTION, fn), fn)

    # -- session model ------------------------------------------------------------------

    def session(self, method: str, *attrs: str) -> Any:
        return load_module(method, SESSION, *attrs)

    # -- intents ------------------------------------------------------------------------

    def intents(self, method: str) -> Any:
        mod = load_module(method, INTENTS_SERVICE, "IntentsService", "default_state_dir")
        with self._lock:
            if self._intents is None:
                cfg = self.server.config
                service = mod.IntentsService(
                    state_dir=mod.default_state_dir(str(cfg.agent_dir)),
                    quiet_interval_s=cfg.compaction["commitQuietMs"] / 1000.0,
                    compaction_options_provider=lambda _path: self.compaction_options(),
                    on_committed=self.server_committed,
                )
                service.start()
                self._intents = service
            return self._intents

    def start_background(self) -> None:
        """Start the intents committer now, so intents left pending by an earlier run (or
        by another process) are committed without waiting for a client request."""
        try:
            self.intents("initialized")
        except EngineUnavailable:
            pass
        except Exception:
            log.exception("starting the intents engine failed")

    def compaction_options(self) -> dict[str, Any]:
        """Keyword options of `preview_compaction` from the effective settings."""
        cfg = self.server.config
        return {
            "context_window": cfg.compaction["contextWindow"],
            "reserve_tokens": cfg.reserve_tokens,
            "keep_recent_tokens": cfg.keep_recent_tokens,
            "target_context_ratio": cfg.compaction["targetContextRatio"],
            "settings": dict(cfg.compaction),
        }

    def server_committed(self, session_path: str, record: dict[str, Any]) -> None:
        """The intents engine's on_committed callback → `fabric/compactionCommitted`."""
        from fabric_lsp.protocol import COMPACTION_COMMITTED

        self.server.notify(COMPACTION_COMMITTED, {"session": str(session_path), "record": record})

    # -- lifecycle ----------------------------------------------------------------------

    def notify_changed(self, paths: Iterable[str]) -> None:
        paths = sorted(set(paths))
        if not paths:
            return
        for engine in (self.memory_if_started(), self._intents):
            fn = getattr(engine, "notify_changed", None)
            if fn is not None:
                try:
                    fn(paths)
                except Exception:
                    log.exception("notify_changed failed")

    def drop_caches(self) -> None:
        engine = self.memory_if_started()
        if engine is not None and hasattr(engine, "drop_caches"):
            engine.drop_caches()

    def reset(self, *, wait: bool = False) -> None:
        """Forget engines built from an older configuration; they are closed in the
        executor (closing may join threads), or here when `wait`."""
        with self._lock:
            old = [e for e in (self._memory, self._intents) if e is not None]
            self._memory = None
            self._intents = None
        for engine in old:
            if not hasattr(engine, "close"):
                continue
            if wait:
                _close(engine)
            else:
                self.server.engine_executor.submit(_close, engine)

    def close(self) -> None:
        self.reset(wait=True)


def _close(engine: Any) -> None:
    try:
        engine.close()
    except Exception:
        log.exception("closing an engine failed")


class DomainError(Exception):
    """A domain outcome the wire reports as `{error: {code, message, candidates?}}`."""

    def __init__(self, code: str, message: str, candidates: list[str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.candidates = candidates

    def to_result(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.candidates is not None:
            error["candidates"] = list(self.candidates)
        return {"error": error}


def resolve_session_ref(engines: Engines, method: str, ref: str) -> Any:
    """Session id, absolute path or file:// URI → the session file's Path."""
    mod = engines.session(method, "resolve_session")
    try:
        return Path(mod.resolve_session(ref, str(engines.server.config.session_dir)))
    except LookupError as err:
        code = getattr(err, "code", None)
        if code == "ambiguous_session":
            candidates = [str(c) for c in getattr(err, "candidates", [])]
            raise DomainError(code, str(err), candidates) from None
        if code == "session_not_found":
            raise DomainError(code, str(err)) from None
        raise
