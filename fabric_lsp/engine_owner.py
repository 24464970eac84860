"""The one owner of engine instances, and the face-neutral engine calls.

The server's handlers and the CLI both call the methods here with the decoded protocol
params Struct and get the method's result Struct back, built by the engine (a preview's,
which comes from a worker process as plain JSON, is checked by `protocol.result_from_json`:
a result the schema does not describe is an error); each face encodes that Struct
(`protocol.to_wire`),
so `fabric-lsp preview --json` and `fabric/compactionPreview` are the same bytes for the
same settings and params. No pygls
import: the server passes in how to notify and where to close engines.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabric_lsp import protocol
from fabric_lsp.config import ServerConfig
from fabric_lsp.engine.activity import ActivityEvent, ActivitySink, CancelToken, IndexingEvent
from fabric_lsp.engine.session import AmbiguousSession, SessionNotFound, resolve_session
from fabric_lsp.engine.session.lease import LeaseBook

if TYPE_CHECKING:
    from fabric_lsp.engine.compaction.options import CompactionOptions, CompactionOverrides
    from fabric_lsp.engine.intents.service import IntentsService
    from fabric_lsp.engine.memory.api import MemoryEngine
    from fabric_lsp.engine.team.api import TeamEngine
    from fabric_lsp.engine.team.autopush import AutoPush

# The compaction and memory engines are imported on first use, not at import time: the
# editor pays the server's start-up on every launch (tests/e2e/test_lsp_lifecycle.py).

log = logging.getLogger("fabric_lsp.engine_owner")

Notify = Callable[[str, Any], None]
Submit = Callable[[Callable[[], None]], Any]


class IntentsUnavailable(RuntimeError):
    """Compaction intents cannot run on this platform: their commit path takes POSIX file
    locks (`fcntl`), which Windows lacks. Previews, recall and file history do not need
    them."""


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


def resolve_session_path(ref: str, session_dir: Path) -> Path:
    """Session id, path or file:// URI → the session file; DomainError when it is not
    found or ambiguous."""
    try:
        return Path(resolve_session(ref, str(session_dir)))
    except AmbiguousSession as err:
        raise DomainError("ambiguous_session", str(err), [str(c) for c in err.candidates]) from None
    except SessionNotFound as err:
        raise DomainError("session_not_found", str(err)) from None


class Engines:
    """Engine instances built from one configuration, created on first use.

    `config()` returns the current settings (the server's change on reload; the CLI's
    never do); `notify(method, params)` sends a notification to the client (the CLI has
    none); `submit(fn)` runs a closing engine's `close()` off the caller's thread.
    """

    def __init__(
        self,
        config: Callable[[], ServerConfig],
        *,
        notify: Notify | None = None,
        submit: Submit | None = None,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self._config = config
        self._notify = notify
        self._warn = warn  # a warning for the user (the server: window/showMessage)
        self._submit = submit
        self._lock = threading.RLock()
        self._memory: MemoryEngine | None = None
        self._intents: IntentsService | None = None
        # One thread at a time imports the intents engine: when that import fails (no
        # `fcntl`), a thread importing it at the same moment would otherwise get the
        # half-made module from the import system and report a missing name instead.
        self._intents_import = threading.Lock()
        self._intents_missing: str | None = None
        self._team: TeamEngine | None = None
        self._autopush: AutoPush | None = None
        self._index_sink: ActivitySink | None = None
        self._index_enabled = False
        self._builders_started = False  # `prestart_builders` started them once
        self._prestart_lock = threading.Lock()
        # Runs a preview task `(name, kwargs, cancel, activity)`; None: in this thread.
        # The server sets its worker-process pool here (engine/procpool.py).
        self.preview_runner: Callable[..., dict[str, Any]] | None = None

    @property
    def config(self) -> ServerConfig:
        return self._config()

    # -- engines --------------------------------------------------------------------

    def memory(self) -> MemoryEngine:
        from fabric_lsp.engine.memory.api import MemoryConfig, MemoryEngine

        with self._lock:
            if self._memory is None:
                cfg = self.config
                self._memory = MemoryEngine(
                    MemoryConfig.from_settings(dict(cfg.memory)),
                    agent_dir=str(cfg.agent_dir),
                    session_dir=str(cfg.session_dir),
                    index_dir=str(cfg.index_dir),
                )
                # held sessions follow the live Pi's leaf (docs/pi.md, "Live lineage")
                self._memory.live_leaves = self.leases().live_leaves
                self._memory.watch_folders()  # (lives as long as this server: list by notices)
                if self._index_enabled:  # (the indexer before any request: answers say it is pending)
                    self._start_indexer(self._memory)
            return self._memory

    def _start_indexer(self, engine: MemoryEngine) -> None:
        from fabric_lsp.engine.memory.background import BackgroundIndexer

        if engine.config.enabled and engine.background is None:
            BackgroundIndexer(engine, self._indexer_event).start()

    def _indexer_event(self, event: ActivityEvent) -> None:
        """The background indexer's events (its thread): to the server's sink, and when
        everything is indexed, a `team.autoPush` push (engine/team/autopush.py)."""
        sink = self._index_sink
        if sink is not None:
            sink(event)
        if isinstance(event, IndexingEvent) and event.phase == "idle":
            try:
                self.request_auto_push()
            except Exception:
                log.exception("asking for a team autoPush failed")

    def request_auto_push(self) -> bool:
        """Push the opted-in sessions in the background when `team.autoPush` is on (and
        `team.url` set); False when it is off."""
        from fabric_lsp.engine.team.settings import TeamSettings, TeamSettingsError

        try:
            settings = TeamSettings.from_settings(self.config.team)
        except TeamSettingsError:
            return False  # warned about at load
        if not settings.auto_push or not settings.url:
            return False
        with self._lock:
            pusher = self._autopush
            if pusher is None:
                from fabric_lsp.engine.team.autopush import AutoPush

                pusher = self._autopush = AutoPush(
                    self._auto_push_once, on_report=self._auto_pushed, on_error=self._auto_push_failed
                )
        pusher.request()
        return True

    def _auto_push_once(self) -> Any:
        report = self.team().push(self.memory())
        counts = report.counts()
        log.info("team autoPush: %s", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "nothing to push")
        return report

    def _auto_pushed(self, report: Any) -> None:
        """A finished autoPush as a `fabric/activity` metrics event (docs/team.md)."""
        if self._notify is not None:
            self._notify(
                protocol.ACTIVITY,
                {
                    "type": "metrics",
                    "request": "fabric/teamPush",
                    "complete": True,
                    "member": report.member,
                    "counts": report.counts(),
                    "entriesSent": sum(s.entries_sent for s in report.steps),
                    "pendingSessions": report.pending,
                },
            )

    def _auto_push_failed(self, message: str) -> None:
        if self._warn is not None:
            self._warn(
                f"fabric-lsp: team.autoPush could not push ({message}); local recall keeps working. "
                "Run `fabric-lsp team push` to see the details."
            )

    def team(self) -> TeamEngine:
        """The team database's engine (docs/team.md), from the user-level `team` settings."""
        from fabric_lsp.engine.memory.api import MemoryConfig
        from fabric_lsp.engine.team.api import TeamEngine
        from fabric_lsp.engine.team.settings import TeamSettings, TeamSettingsError

        with self._lock:
            if self._team is None:
                cfg = self.config
                try:
                    settings = TeamSettings.from_settings(cfg.team)
                except TeamSettingsError:  # warned about at load: as if not set
                    settings = TeamSettings()
                self._team = TeamEngine(settings, MemoryConfig.from_settings(dict(cfg.memory)), self.memory)
            return self._team

    def memory_if_started(self) -> MemoryEngine | None:
        with self._lock:
            return self._memory

    def leases(self) -> LeaseBook:
        return LeaseBook(self.config.agent_dir)

    def intents(self) -> IntentsService:
        with self._intents_import:
            if self._intents_missing is None:
                try:
                    from fabric_lsp.engine.intents.service import IntentsService, default_state_dir
                except ImportError as err:  # ModuleNotFoundError: fcntl, on Windows
                    self._intents_missing = str(err)
            if self._intents_missing is not None:
                raise IntentsUnavailable(
                    "compaction intents need POSIX file locks, which this platform does not have "
                    f"({self._intents_missing}); previews, recall and file history work without them"
                )
        with self._lock:
            if self._intents is None:
                cfg = self.config
                service = IntentsService(
                    state_dir=default_state_dir(str(cfg.agent_dir)),
                    quiet_interval_s=cfg.compaction["commitQuietMs"] / 1000.0,
                    compaction_options_provider=lambda _path: self.compaction_options().kwargs(),
                    on_committed=self._committed,
                    leases=self.leases(),
                )
                service.start()
                self._intents = service
            return self._intents

    def start_background(self) -> None:
        """Start the intents committer now, so intents left pending by an earlier run (or
        by another process) are committed without waiting for a client request."""
        try:
            self.intents()
        except IntentsUnavailable as err:
            log.info("%s", err)
        except Exception:
            log.exception("starting the intents engine failed")
        self.resume_background_index()  # after a settings change: index with the new engine

    def enable_background_index(self, sink: ActivitySink | None = None) -> None:
        """Cheap (no engine is built): from now on every memory engine gets its background
        indexer when it is made, so a request that comes first already sees it pending."""
        with self._lock:
            self._index_enabled = True
            self._index_sink = sink

    def prestart_builders(self, *, indexing: bool = False) -> int:
        """On a fresh index (no cold-term snapshot yet: no indexing pass ever finished
        there), the first call or the indexer's first pass builds every session: start
        their builder children now, so they are ready when that work comes (the indexer
        ends the ones nothing took when it goes idle). Returns how many started.

        The server calls it at `initialize` (`indexing`: background indexing is about to be
        enabled; the config as the initialization options give it), so the children import
        while the handshake goes on, and again once the client's settings are in: children
        start once, and a call whose config does not want them (memory disabled, an index
        that is not fresh) ends the ones no batch took."""
        from fabric_lsp.engine.index_dir import SNAPSHOT_FILE
        from fabric_lsp.engine.memory import build_pool
        from fabric_lsp.engine.memory.config import MemoryConfig

        with self._prestart_lock:
            wanted = (
                (self._index_enabled or indexing)
                and build_pool.BUILD_WORKERS >= 2
                # (no index, no indexer to end them)
                and MemoryConfig.from_settings(dict(self.config.memory)).enabled
                and not os.path.exists(os.path.join(str(self.config.index_dir), SNAPSHOT_FILE))
            )
            if not wanted:
                if self._builders_started:
                    build_pool.drop_spares()
                return 0
            if self._builders_started:
                return 0
            self._builders_started = True
            return build_pool.prestart(build_pool.BUILD_WORKERS)

    def resume_background_index(self) -> None:
        if not self._index_enabled:
            return
        try:
            engine = self.memory()
            with self._lock:
                if engine is self._memory:
                    self._start_indexer(engine)
        except Exception:
            log.exception("starting the background indexer failed")

    def compaction_options(self, overrides: CompactionOverrides | None = None) -> CompactionOptions:
        """The effective compaction options (engine/compaction/options.py) of the current
        settings and a request's overrides."""
        from fabric_lsp.engine.compaction.options import resolve_compaction_options

        return resolve_compaction_options(self.config.compaction_settings(), overrides)

    def _committed(self, session_path: str, record: dict[str, Any]) -> None:
        """The intents engine's on_committed callback → `fabric/compactionCommitted`."""
        if self._notify is not None:
            self._notify(protocol.COMPACTION_COMMITTED, {"session": str(session_path), "record": record})

    # -- face-neutral calls ---------------------------------------------------------

    def session_path(self, ref: str) -> Path:
        return resolve_session_path(ref, self.config.session_dir)

    def compaction_preview(
        self,
        p: protocol.CompactionPreviewParams,
        cancel: CancelToken | None = None,
        activity: ActivitySink | None = None,
    ) -> protocol.CompactionPreviewResult:
        from fabric_lsp.engine.compaction.options import CompactionOverrides
        from fabric_lsp.engine.compaction.task_names import COMPACTION_PREVIEW

        path = self.session_path(p.session)
        options = self.compaction_options(CompactionOverrides.of(p))
        leaf_id = p.leaf_id
        if leaf_id is None:
            leaf_id = self.leases().live_leaf(str(path))
        return self._preview(
            protocol.COMPACTION_PREVIEW,
            COMPACTION_PREVIEW,
            dict(
                source=str(path),  # the engine streams and hashes the same bytes (lower peak memory)
                session_path=str(path),
                instructions=p.instructions,
                preserve=p.preserve,
                reason=p.reason,
                tokens_before=p.tokens_before,
                leaf_id=leaf_id,
                include_qa=p.include_qa,
                **options.kwargs(),
            ),
            cancel,
            activity,
        )

    def branch_summary_preview(
        self,
        p: protocol.BranchSummaryPreviewParams,
        cancel: CancelToken | None = None,
        activity: ActivitySink | None = None,
    ) -> protocol.BranchSummaryPreviewResult:
        from fabric_lsp.engine.compaction.task_names import BRANCH_SUMMARY_PREVIEW

        path = self.session_path(p.session)
        from_id = p.from_id
        if from_id is None:
            from_id = self.leases().live_leaf(str(path))
        return self._preview(
            protocol.BRANCH_SUMMARY_PREVIEW,
            BRANCH_SUMMARY_PREVIEW,
            dict(
                source=str(path),
                session_path=str(path),
                target_id=p.target_id,
                from_id=from_id,
                instructions=p.instructions,
                preserve=p.preserve,
                replace_instructions=bool(p.replace_instructions),
                settings=dict(self.compaction_options().fabric),
            ),
            cancel,
            activity,
        )

    def warm_previews(self) -> None:
        """Import what a preview needs in this process — the options resolver, and the
        engine itself when previews run here rather than in worker processes — so the
        first preview after start does not pay for it (the server calls this after
        `initialized`)."""
        import fabric_lsp.engine.compaction.options  # noqa: F401

        if self.preview_runner is None:
            import fabric_lsp.engine.compaction.tasks  # noqa: F401

    def _preview(
        self,
        method: str,
        name: str,
        kwargs: dict[str, Any],
        cancel: CancelToken | None,
        activity: ActivitySink | None,
    ) -> Any:
        """The preview task (engine/compaction/tasks.py) with its resolved arguments, in
        `preview_runner` when one is set (the server's worker processes), else here."""
        runner = self.preview_runner
        if runner is None:
            from fabric_lsp.engine.compaction.tasks import run_task

            runner = run_task
        return protocol.result_from_json(method, runner(name, kwargs, cancel, activity))

    def recall(
        self,
        p: protocol.RecallParams,
        cwd: str | None,
        cancel: CancelToken | None = None,
        activity: ActivitySink | None = None,
    ) -> protocol.RecallResult:
        if p.scope == "team" or p.scope.startswith("team:"):
            return self.team().recall(p)
        return self.memory().recall(p, cwd=p.cwd or cwd, cancel=cancel, activity=activity)

    def team_members(self) -> protocol.TeamMembersResult:
        return self.team().members()

    def expand(
        self,
        p: protocol.ExpandParams,
        cwd: str | None,
        cancel: CancelToken | None = None,
        activity: ActivitySink | None = None,
    ) -> protocol.ExpandResult | protocol.ExpandErrorResult:
        if p.member is not None:  # a team item (docs/team.md)
            return self.team().expand(p)
        return self.memory().expand(p, cwd=cwd, cancel=cancel, activity=activity)

    def sessions(
        self,
        p: protocol.SessionsParams,
        cwd: str | None,
        cancel: CancelToken | None = None,
        activity: ActivitySink | None = None,
    ) -> protocol.SessionsResult:
        return self.memory().sessions(p, cwd=p.cwd or cwd, cancel=cancel, activity=activity)

    def file_history(
        self,
        p: protocol.FileHistoryParams,
        cwd: str | None,
        cancel: CancelToken | None = None,
        activity: ActivitySink | None = None,
    ) -> protocol.FileHistoryResult:
        return self.memory().file_history(p, cwd=p.cwd or cwd, cancel=cancel, activity=activity)

    def compact_request(
        self,
        p: protocol.CompactRequestParams,
        cancel: CancelToken | None = None,
        activity: ActivitySink | None = None,
    ) -> protocol.CompactRequestResult:
        return intent_request(self.intents(), str(self.session_path(p.session)), p)

    def compact_status(
        self,
        p: protocol.CompactSessionParams,
        cancel: CancelToken | None = None,
        activity: ActivitySink | None = None,
    ) -> protocol.CompactStatusResult:
        return intent_status(self.intents(), str(self.session_path(p.session)))

    def compact_cancel(
        self,
        p: protocol.CompactSessionParams,
        cancel: CancelToken | None = None,
        activity: ActivitySink | None = None,
    ) -> protocol.CompactCancelResult:
        return intent_cancel(self.intents(), str(self.session_path(p.session)))

    # -- lifecycle ------------------------------------------------------------------

    def notify_changed(self, paths: Iterable[str]) -> None:
        changed = sorted(set(paths))
        if not changed:
            return
        for engine in (self.memory_if_started(), self._intents):
            if engine is None:
                continue
            try:
                engine.notify_changed(changed)
            except Exception:
                log.exception("notify_changed failed")

    def drop_caches(self) -> None:
        engine = self.memory_if_started()
        if engine is not None:
            engine.drop_caches()

    def reset(self, *, wait: bool = False) -> None:
        """Forget engines built from an older configuration; they are closed through
        `submit` (closing may join threads), or here when `wait` or there is no submit."""
        with self._lock:
            old: list[Any] = [e for e in (self._autopush, self._memory, self._intents, self._team) if e is not None]
            self._autopush = None
            self._memory = None
            self._intents = None
            self._team = None
        for engine in old:
            if wait or self._submit is None:
                _close(engine)
            else:
                self._submit(lambda e=engine: _close(e))

    def close(self) -> None:
        self.reset(wait=True)


# The intents calls take the service, since the CLI's `compact` builds its own (its own
# state dir and quiet interval flags, no committer thread): one rule for both faces.


def intent_request(
    service: IntentsService, path: str, p: protocol.CompactRequestParams
) -> protocol.CompactRequestResult:
    try:
        return service.request(path, p)
    except ValueError as err:  # seed 001's bounds message (the Struct's bounds come first)
        raise protocol.InvalidParams(f"{protocol.COMPACT_REQUEST}: {err}") from None


def intent_status(service: IntentsService, path: str) -> protocol.CompactStatusResult:
    return service.status(path)


def intent_cancel(service: IntentsService, path: str) -> protocol.CompactCancelResult:
    return service.cancel(path)


def _close(engine: Any) -> None:
    try:
        engine.close()
    except Exception:
        log.exception("closing an engine failed")
