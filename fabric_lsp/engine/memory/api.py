"""Memory engine API used by the server and the CLI: `recall`, `expand`, `sessions`.

Each call returns its method's result Struct of the wire contract (protocol.py), built by
the query module. The engine keeps a warm
in-memory index (one derived state per session and branch mode) that is kept fresh by
`stat` (size, mtime_ns, ctime_ns, inode): unchanged files are neither read nor hashed,
grown files are extended in place after their old tail is verified, and anything else
is rebuilt from source. The disk cache (V5 contents, atomic writes) only saves work
across processes; results are identical whether it is empty, warm or corrupted.

Thread-safe: one lock serialises calls. A cancelled call raises `Cancelled` between
sessions or every few hundred lines; it never leaves a partial cache record because
records are written whole (temp file + rename) only after a session is complete.

This module is the façade; the work is done by functions over the engine's state
(`core.MemoryState`):

* `catalog.py` — which sessions a call sees: discovery, headers, scopes, the hot tier,
  the live leaves of sessions a live Pi holds, and the request fields they share;
* `index.py` — the warm index: fresh states from memory, an in-place append, the disk
  cache or a build (process pool for large cold sets), tiers, budgets and coverage;
* `recall.py` — `fabric/recall`: query plan, hot and cold search, regex, paging;
* `expand.py` — `fabric/expand` and the pointers' integrity check (`stale_pointer`);
* `listing.py` — `fabric/sessions`;
* `file_history.py` — `fabric/fileHistory`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fabric_lsp import protocol
from fabric_lsp.engine.activity import ActivitySink, CancelToken

from . import expand as _expand
from . import file_history, index
from . import listing as _listing
from . import recall as _recall
from .catalog import Ref
from .config import MemoryConfig
from .core import MemoryState
from .listing import SESSIONS_LIST_CAP, SESSIONS_MAX_PAGE_SIZE
from .recall import RECALL_MAX_PAGE_SIZE
from .state import SessionState

__all__ = [
    "MemoryConfig",
    "MemoryEngine",
    "Ref",
    "RECALL_MAX_PAGE_SIZE",
    "SESSIONS_LIST_CAP",
    "SESSIONS_MAX_PAGE_SIZE",
]


class MemoryEngine(MemoryState):
    """`MemoryEngine(config, agent_dir=..., session_dir=None, index_dir=None)`; the state
    it holds is `MemoryState`'s."""

    # True while this process computes one answer and exits (the CLI without a server:
    # cli_parser.main sets it around a memory read's command, and clears it after). Such
    # an engine skips the disk cache's cleanup when there is nothing to clean by name and
    # leaves hot records undecoded until read (index.py `_nothing_to_clean`, pending.py
    # `PendingRecords`); answers are the same. Servers and `fabric-lsp index` never set it.
    one_shot = False

    # -- lifecycle ----------------------------------------------------------------------------

    def notify_changed(self, paths: Iterable[str]) -> None:
        """A watched-file event. Freshness is checked by stat on every call anyway; this
        only forgets state of files that are gone."""
        index.forget_gone(self, paths)
        indexer = self.background
        if indexer is not None:
            indexer.kick()

    def watch_folders(self) -> bool:
        """For an engine that lives as long as its server: list a project folder again only
        when inotify says something happened in it (dir_watch.py), not with one stat per
        session file per call. True when notices are available here; answers are the same
        either way. `close` ends the watch."""
        if self.dir_watch is None:
            from .dir_watch import DirWatch

            self.dir_watch = DirWatch.open()
        return self.dir_watch is not None

    def drop_caches(self) -> None:
        index.drop_caches(self)

    def close(self) -> None:
        indexer = self.background
        if indexer is not None:
            indexer.stop()
        self._regex.close()
        with self.listing_lock:  # (calls list under it: never on a closed watch)
            watch, self.dir_watch, self.listing = self.dir_watch, None, None
            if watch is not None:
                watch.close()

    # -- the calls ------------------------------------------------------------------------------

    # Each call takes its method's params Struct (protocol.py), decoded once by the face
    # that received the request. A Mapping (tests, benchmarks, scripts in process) is
    # decoded here by the same contract: the one rule for what a valid request is.

    def recall(
        self,
        params: protocol.RecallParams | Mapping[str, Any],
        *,
        cwd: str | None = None,
        cancel: CancelToken | None = None,
        activity: ActivitySink | None = None,
    ) -> protocol.RecallResult:
        p = protocol.as_params(protocol.RECALL, protocol.RecallParams, params)
        with self.call():
            return _recall.recall(self, p, cwd=cwd, cancel=cancel, activity=activity)

    def expand(
        self,
        params: protocol.ExpandParams | Mapping[str, Any],
        *,
        cwd: str | None = None,
        cancel: CancelToken | None = None,
        activity: ActivitySink | None = None,
    ) -> protocol.ExpandResult | protocol.ExpandErrorResult:
        p = protocol.as_params(protocol.EXPAND, protocol.ExpandParams, params)
        with self.call():
            return _expand.expand(self, p, cwd=cwd, cancel=cancel, activity=activity)

    def sessions(
        self,
        params: protocol.SessionsParams | Mapping[str, Any],
        *,
        cwd: str | None = None,
        cancel: CancelToken | None = None,
        activity: ActivitySink | None = None,
    ) -> protocol.SessionsResult:
        p = protocol.as_params(protocol.SESSIONS, protocol.SessionsParams, params)
        with self.call():
            return _listing.sessions(self, p, cwd=cwd, cancel=cancel, activity=activity)

    def file_history(
        self,
        params: protocol.FileHistoryParams | Mapping[str, Any],
        *,
        cwd: str | None = None,
        cancel: CancelToken | None = None,
        activity: ActivitySink | None = None,
    ) -> protocol.FileHistoryResult:
        """The `fabric/fileHistory` result (see file_history.py)."""
        p = protocol.as_params(protocol.FILE_HISTORY, protocol.FileHistoryParams, params)
        with self.call():
            return file_history.file_history(self, p, cwd=cwd, cancel=cancel, activity=activity)

    def indexed_states(
        self,
        scope: str,
        cwd: str | None,
        branches: str,
        cancel: CancelToken | None,
        activity: ActivitySink | None,
    ) -> tuple[list[SessionState], dict[str, Any]]:
        """Fresh hot and cold states (never hydrated) of the "project" or "global" scope in
        scope order, and the index coverage. The caller holds the engine lock."""
        return index.indexed_states(self, scope, cwd, branches, cancel=cancel, activity=activity)
