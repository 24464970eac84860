"""The state one memory engine holds, shared by the modules that serve its calls.

`MemoryState` is only data: where sessions and the disk cache live, the engine lock, the
in-memory index and its caches. `catalog.py`, `index.py`, `recall.py`, `expand.py` and
`listing.py` are functions over it; `api.MemoryEngine` (a `MemoryState`) is the façade.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from cachetools import LRUCache

from .build_pool import BUILD_WORKERS
from .cold_index import ColdTermTable, StateTable
from .config import MemoryConfig
from .state import SessionState

if TYPE_CHECKING:
    from .regex_worker import RegexRunner

# a session file's cached header: ((ino, dev, mtime_ns, size) or None, id, cwd)
HeaderEntry = tuple[tuple[int, int, int, int] | None, str | None, str | None]


class MemoryState:
    def __init__(
        self, config: MemoryConfig, *, agent_dir: str, session_dir: str | None = None, index_dir: str | None = None
    ) -> None:
        self.config = config
        self.agent_dir = os.path.abspath(os.path.expanduser(agent_dir))
        self.session_dir = (
            os.path.abspath(os.path.expanduser(session_dir))
            if session_dir
            else os.path.join(self.agent_dir, "sessions")
        )
        chosen = index_dir or config.index_dir or os.path.join(self.agent_dir, "fabric-lsp", "memory-index")
        # The index dir as configured; `index_dir` is where the disk cache lives once it is
        # claimed (index.cleanup_once: ours, marked), None while it is refused (then
        # `index_dir_error` says why and the index lives in memory only).
        self.index_dir_configured = os.path.abspath(os.path.expanduser(chosen))
        self.index_dir: str | None = self.index_dir_configured
        self.index_dir_error: str | None = None
        self._lock = threading.RLock()
        # Cold vocabularies live in one interned term table with an inverted term -> sessions
        # map (cold_index.py); the state map hands every cold state's vocabulary to it.
        self._cold = ColdTermTable()
        self._states: dict[tuple[str, str], SessionState] = StateTable(self._cold)
        # The background indexer (background.py) while one runs over this engine: requests
        # then leave cold builds to it instead of spending their per-call budget on them.
        self.background: Any = None
        # (file, branches) of the sessions a call is building now (index.load_index): the
        # background indexer leaves them to it and takes them from the call's result, never
        # building a session twice at once; `building_done` is notified when a call's set ends.
        self.building: set[tuple[str, str]] = set()
        # (file, branches) of the sessions the background indexer has in flight (handed to
        # a builder, not yet adopted): a call waits for those instead of building them too.
        self.indexer_building: set[tuple[str, str]] = set()
        # notified when a call's set ends and when the indexer adopts (or gives up) a session
        self.building_done = threading.Condition(self._lock)
        self._hydrated: LRUCache[tuple[str, str], SessionState] = LRUCache(maxsize=8)
        self._headers: dict[str, HeaderEntry] = {}
        # the Ref of each listed session file, by path, with the stat identity it was made for
        self._refs: dict[str, tuple[tuple[int, int, int, int, int], Any]] = {}
        self._cleanup_complete: bool | None = None
        # A one-shot engine's listing of the index dir (index._nothing_to_clean): a record
        # name it did not hold is not there to remove (index.remove_listed); None: unknown
        self.listed_names: frozenset[str] | None = None
        # the term table's version last restored from or written to its snapshot
        self.terms_persisted = -1
        # when a call last began or ended, or the engine was made (time.monotonic): see idle_seconds
        self.last_call = time.monotonic()
        self.calls = 0  # memory calls running now
        self._calls_lock = threading.Lock()
        self._no_call = threading.Condition(self._calls_lock)  # notified when `calls` drops to 0
        self._regex = _RegexOnDemand()
        # The live leaves of the sessions a live Pi holds ({realpath: leaf id}, from
        # engine/session/lease.py): their active branch follows Pi's leaf (seed 000: the
        # live session follows the live leaf), refreshed at every call (`live_snapshot`).
        self.live_leaves: Callable[[], dict[str, str]] | None = None
        self.live_snapshot: dict[str, str] = {}
        # First builds of large cold sets use a small process pool (0/1 = never).
        self.parallel_workers = BUILD_WORKERS
        self.parallel_min_bytes = 16 * 1024 * 1024
        # A long-lived engine's notices of changes in the session folders (dir_watch.py,
        # `MemoryEngine.watch_folders`) and the listing they keep (catalog.FolderListing);
        # None: every call stats every session file.
        # (`listing_lock` guards both: expand lists without the engine lock)
        self.dir_watch: Any = None
        self.listing: Any = None
        self.listing_lock = threading.Lock()
        # the last load_index answer that built nothing, with what it was for (index.py)
        self.load_memo: Any = None

    # -- the shared state, for the modules that are functions over this core -------------
    # (the same objects; tests still read the underscore names)

    @property
    def lock(self) -> threading.RLock:
        """The engine lock (one call at a time)."""
        return self._lock

    @property
    def states(self) -> dict[tuple[str, str], SessionState]:
        """The in-memory index: `(file, branches) -> SessionState` (a `StateTable`)."""
        return self._states

    @property
    def headers(self) -> dict[str, HeaderEntry]:
        """Session headers by file, cached per stat identity (catalog.header)."""
        return self._headers

    @property
    def refs(self) -> dict[str, tuple[tuple[int, int, int, int, int], Any]]:
        """`catalog.Ref`s by file, each with the (size, mtime_ns, ctime_ns, ino, dev) it
        was made for (catalog.folder_refs reuses one while the file's stat is unchanged)."""
        return self._refs

    @property
    def hydrated(self) -> LRUCache[tuple[str, str], SessionState]:
        """Hydrated cold sessions (index.hydrated_state): never persisted, never promoted."""
        return self._hydrated

    @property
    def cleanup_complete(self) -> bool | None:
        """Whether the disk cache cleanup inspected everything (None: not run yet)."""
        return self._cleanup_complete

    @cleanup_complete.setter
    def cleanup_complete(self, value: bool | None) -> None:
        self._cleanup_complete = value

    @property
    def cold(self) -> ColdTermTable:
        """The interned term table holding every cold state's vocabulary (cold_index.py)."""
        return self._cold

    @property
    def regex(self) -> RegexRunner:
        """The regex worker (regex_worker.py), made on first use."""
        return self._regex.runner()

    @contextmanager
    def call(self) -> Generator[None, None, None]:
        """Around every memory call (recall, expand, sessions, file history): counted, so
        background work can wait for an idle engine."""
        with self._calls_lock:
            self.calls += 1
            self.last_call = time.monotonic()
        try:
            yield
        finally:
            with self._calls_lock:
                self.calls -= 1
                self.last_call = time.monotonic()
                if self.calls == 0:
                    self._no_call.notify_all()

    def idle_seconds(self) -> float:
        """How long no memory call has been running (the background indexer writes its
        snapshot when the engine is idle)."""
        return time.monotonic() - self.last_call if self.calls == 0 else 0.0

    def wait_no_call(self, timeout: float | None = None) -> bool:
        """Wait until no memory call runs; False when `timeout` passed first."""
        with self._calls_lock:
            return self._no_call.wait_for(lambda: self.calls == 0, timeout)

    def background_pending(self) -> bool:
        """True while a background indexer has sessions left to index."""
        indexer = self.background
        return indexer is not None and indexer.pending


class _RegexOnDemand:
    """The engine's regex worker, made (and regex_worker.py with its process machinery
    imported) when a regex query first needs it: a process answering one literal query
    never loads it. `close` stops it when it was made."""

    def __init__(self) -> None:
        self._made: RegexRunner | None = None
        self._lock = threading.Lock()  # (regex queries run outside the engine lock)

    def runner(self) -> RegexRunner:
        made = self._made
        if made is None:
            with self._lock:
                made = self._made
                if made is None:
                    from .regex_worker import RegexRunner

                    made = self._made = RegexRunner()
        return made

    def close(self) -> None:
        made = self._made
        if made is not None:
            made.close()
