"""`TeamEngine`: the team calls the server and the CLI make (recall, expand, status,
push), over one lazily opened connection; an unreachable database is an answer that
says so (coverage error `team_unavailable`), never a crash, and local recall is untouched."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from fabric_lsp.engine.memory.catalog import Ref
from fabric_lsp.engine.memory.config import MemoryConfig
from fabric_lsp.engine.memory.core import MemoryState
from fabric_lsp.protocol import (
    EXPAND,
    RECALL,
    CoverageError,
    ExpandErrorBody,
    ExpandErrorResult,
    ExpandParams,
    ExpandResult,
    RecallParams,
    RecallResult,
    TeamMembersResult,
    as_params,
)
from fabric_lsp.protocol_results import coverage_error

from .db import TeamUnavailable, connect
from .push import BRANCHES, Progress, PushReport, policy_of, push, stat_text
from .query import team_expand, team_members, team_recall, team_scope, team_status
from .schema import SCHEMA
from .settings import TeamSettings, TeamSettingsError, machine_name


def _error_result(params: RecallParams, code: str, message: str) -> RecallResult:
    return RecallResult(
        scope=params.scope,
        branches=params.branches,
        query=params.query,
        query_mode=params.query_mode,
        page=params.page,
        page_size=params.page_size,
        total_items=0,
        total_matches=0,
        has_next=False,
        authoritative=False,
        coverage=coverage_error(code, message),
        items=[],
        text=message,
    )


def _unavailable(message: str) -> ExpandErrorResult:
    return ExpandErrorResult(error=ExpandErrorBody(code="source_unavailable", message=message))


class TeamEngine:
    def __init__(
        self, settings: TeamSettings, memory: MemoryConfig, local: Callable[[], MemoryState] | None = None
    ) -> None:
        self.settings = settings
        self.memory_config = memory
        self._local = local  # the local memory engine (listing own sessions for staleness)
        self._conn: Any = None
        self._lock = threading.RLock()

    # -- connection ----------------------------------------------------------------------

    def connection(self) -> Any:
        with self._lock:
            conn = self._conn
            if conn is not None and not conn.closed and not conn.broken:
                return conn
            self._conn = connect(self.settings.require_url())
            return self._conn

    def _run(self, fn: Callable[[Any], Any]) -> Any:
        """`fn(connection)`, reconnecting once when the connection broke since last use."""
        import psycopg

        with self._lock:
            for attempt in (0, 1):
                conn = self.connection()
                try:
                    return fn(conn)
                except psycopg.OperationalError as err:
                    self.close()
                    if attempt == 1:
                        raise TeamUnavailable(
                            "team_unavailable",
                            f"the team database connection failed: {str(err).strip().splitlines()[0] if str(err).strip() else err}; "
                            "local recall keeps working",
                        ) from None
            raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    # -- calls ---------------------------------------------------------------------------

    def recall(self, params: RecallParams | Mapping[str, Any]) -> RecallResult:
        params = as_params(RECALL, RecallParams, params)
        member = team_scope(params.scope)  # ValueError for "team:" (invalid params)
        try:

            def run(conn: Any) -> RecallResult:
                stale = self._local_stale(conn) if member in ("", self.settings.member) else 0
                return team_recall(conn, params, local_stale=stale)

            return self._run(run)
        except TeamSettingsError as err:
            return _error_result(params, "team_not_configured", str(err))
        except TeamUnavailable as err:
            return _error_result(params, err.code, err.message)

    def expand(self, params: ExpandParams | Mapping[str, Any]) -> ExpandResult | ExpandErrorResult:
        params = as_params(EXPAND, ExpandParams, params)
        try:
            return self._run(lambda conn: team_expand(conn, params))
        except TeamSettingsError as err:
            return _unavailable(str(err))
        except TeamUnavailable as err:
            return _unavailable(err.message)

    def members(self) -> TeamMembersResult:
        """Who pushed what (`fabric/teamMembers`, `fabric-lsp team members`); a database
        that is not configured or not reachable is an answer that says so."""
        try:
            return TeamMembersResult(members=self._run(team_members))
        except TeamSettingsError as err:
            return TeamMembersResult(members=[], error=CoverageError(code="team_not_configured", message=str(err)))
        except TeamUnavailable as err:
            return TeamMembersResult(members=[], error=CoverageError(code=err.code, message=err.message))

    def status(self, member: str | None = None) -> list[dict[str, Any]]:
        return self._run(lambda conn: team_status(conn, member))

    def push(
        self,
        core: MemoryState,
        *,
        scope: str = "global",
        cwd: str | None = None,
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> PushReport:
        return self._run(
            lambda conn: push(
                conn, self.settings, self.memory_config, core, scope=scope, cwd=cwd, dry_run=dry_run, progress=progress
            )
        )

    def _local_stale(self, conn: Any) -> int:
        """This member's opted-in local sessions whose pushed copy is out of date (not
        pushed, changed since, or deleted locally but still pushed)."""
        if self._local is None:
            return 0
        core = self._local()
        from fabric_lsp.engine.memory.catalog import all_refs

        with core.lock:
            refs: list[Ref] = all_refs(core)
        rows = conn.execute(
            f"SELECT session_file, stat_key, policy FROM {SCHEMA}.sessions "
            "WHERE member = %s AND machine = %s AND branches = %s",
            (self.settings.member, machine_name(), BRANCHES),
        ).fetchall()
        pushed = {r[0]: (r[1], r[2]) for r in rows}
        policy = policy_of(self.memory_config)
        stale = 0
        local_files: set[str] = set()
        for ref in refs:
            if not self.settings.opted_in(ref.cwd):
                continue
            local_files.add(ref.file)
            if pushed.get(ref.file) != (stat_text(ref), policy):
                stale += 1
        stale += sum(1 for f in pushed if f not in local_files)
        return stale
