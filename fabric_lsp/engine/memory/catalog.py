"""Which sessions a call sees: discovery, scopes, the hot tier and the live leaves.

Sessions are the `*.jsonl` files one folder below the engine's session dir, newest first
(`Ref`: header id and cwd, cached per stat key). A scope (`session`, `project`,
`global`, `session:<id-or-path>`) picks some of them; the `hotSessions` newest are hot.
Also the request fields every memory call shares (`scope`, `branches`, safe integers).
"""

from __future__ import annotations

import logging
import math
import operator
import os
from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from fabric_lsp.engine.jsstr import js_string_of
from fabric_lsp.engine.session.discovery import (
    AmbiguousSession,
    SessionNotFound,
    encode_cwd,
    jsonl_stats,
    resolve_session,
)
from fabric_lsp.engine.session.reader import read_header

from . import disk_cache
from .core import MemoryState
from .source import StatKey, stat_key, stat_key_of
from .tokenize import utf16_key

_MAX_SAFE = 2**53 - 1

# the engine's logger since before the split into modules
log = logging.getLogger("fabric_lsp.engine.memory.api")


@dataclass
class Ref:
    id: str
    file: str
    cwd: str
    mtime: float
    key: StatKey | None
    order: tuple[float, bytes] = (0.0, b"")  # the recency sort key (set by ref_of)

    def __post_init__(self) -> None:
        self.order = (-self.mtime, utf16_key(self.file))


class Unresolved(Exception):
    def __init__(self, code: str, message: str, candidates: list[str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.candidates = candidates


# ---- request fields -------------------------------------------------------------------------


def scope_kind(scope: Any) -> tuple[str, str | None]:
    if scope is None:
        return "session", None
    if not isinstance(scope, str):
        raise ValueError("scope: must be a string")
    s = scope.strip()
    if s in ("session", "project", "global"):
        return s, None
    if s.startswith("session:"):
        target = s[len("session:") :].strip()
        if not target:
            raise ValueError('scope: "session:" needs a session id or path')
        return "target", target
    raise ValueError(f'scope: unknown scope "{scope}"; expected session, project, global or session:<id-or-path>')


def safe_nonneg_int(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return 0 <= v <= _MAX_SAFE
    if isinstance(v, float):
        return math.isfinite(v) and v.is_integer() and 0 <= v <= _MAX_SAFE
    return False


def path_of(target: str) -> str | None:
    if target.startswith("file://"):
        return unquote(urlparse(target).path)
    return None


# ---- discovery ------------------------------------------------------------------------------


def recency(refs: Iterable[Ref]) -> list[Ref]:
    """Newest first; ties in UTF-16 order of the path."""
    return sorted(refs, key=_ORDER)


_ORDER = attrgetter("order")


def ref_of(eng: MemoryState, path: str, key: StatKey | None = None) -> Ref:
    key = key or stat_key(path)
    hid, hcwd = header(eng, path, key)
    return Ref(
        id=hid if hid is not None else Path(path).stem,
        file=path,
        cwd=hcwd if hcwd is not None else "",
        mtime=key.mtime_ms if key else 0.0,
        key=key,
    )


def header(eng: MemoryState, path: str, key: StatKey | None) -> tuple[str | None, str | None]:
    ident = (key.ino, key.dev, key.mtime_ns, key.size) if key else None
    cached = eng.headers.get(path)
    if cached is not None and cached[0] == ident:
        return cached[1], cached[2]
    hid = hcwd = None
    value = read_header(path)  # the session layer's one header rule for memory
    if value is not None:
        hid = js_string_of(value.get("id")) if "id" in value else "undefined"
        hcwd = js_string_of(value.get("cwd")) if "cwd" in value else "undefined"
    eng.headers[path] = (ident, hid, hcwd)
    return hid, hcwd


def folder_refs(eng: MemoryState, folder: str) -> list[Ref]:
    out: list[Ref] = []
    known = eng.refs
    # the session layer's listing rule, with the one lstat it made per file (no second stat)
    for full, st in jsonl_stats(folder):
        # A file whose stat identity is unchanged keeps its Ref (header, StatKey, sort
        # key): a warm global call over thousands of sessions builds none of them again.
        ident = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
        cached = known.get(full)
        if cached is not None and cached[0] == ident:
            out.append(cached[1])
            continue
        key = stat_key_of(st)
        if key is None:
            continue
        ref = ref_of(eng, full, key)
        known[full] = (ident, ref)
        out.append(ref)
    return out


def all_refs(eng: MemoryState) -> list[Ref]:
    refresh_live(eng)  # every call lists the sessions first: the leases are read then
    if eng.dir_watch is not None:
        with eng.listing_lock:
            watch = eng.dir_watch
            if watch is not None and watch.watch(eng.session_dir):
                return _watched_refs(eng, watch)
            eng.listing = None  # (no notices for the session dir: everything by stat, as below)
    return recency(ref for folder in project_folders(eng.session_dir) for ref in folder_refs(eng, folder))


def project_folders(session_dir: str) -> list[str]:
    """The project folders under the session dir (a symlinked one followed, as isdir did);
    none when it cannot be listed."""
    try:
        entries = list(os.scandir(session_dir))
    except OSError:
        return []
    folders: list[str] = []
    for entry in entries:
        try:
            if entry.is_dir():
                folders.append(entry.path)
        except OSError:
            continue
    return folders


class FolderListing:
    """A long-lived engine's listing, kept between calls while inotify vouches for it
    (dir_watch.py): the project folders, each folder's Refs, the folders watched, the
    folders with notices not yet acted on, and the merged list (None: to be merged)."""

    __slots__ = ("folders", "merged", "pending", "subs", "watched")

    def __init__(self, subs: list[str]) -> None:
        self.subs = subs
        self.folders: dict[str, list[Ref]] = {}
        self.watched: set[str] = set()
        self.pending: set[str] = set()
        self.merged: list[Ref] | None = None


def _drain(eng: MemoryState, watch: Any) -> FolderListing | None:
    """Take the notices since the last call into the listing; None when there is no
    listing to keep (never made, track lost, or the session dir itself changed)."""
    changed = watch.changed()
    listing = eng.listing
    if listing is None or changed is None or eng.session_dir in changed:
        eng.listing = None
        return None
    listing.pending |= changed
    return listing


def _watched_refs(eng: MemoryState, watch: Any) -> list[Ref]:
    """`all_refs` with notices: a folder is listed and stat'ed again only when something
    happened in it since it was last listed (or it could not be watched)."""
    listing = _drain(eng, watch)
    if listing is None:
        # (the session dir is watched already: a folder made from here on is noticed)
        subs = project_folders(eng.session_dir)
        listing = eng.listing = FolderListing(subs)
        for folder in subs:
            if watch.watch(folder):  # watched before it is listed: no change falls between
                listing.watched.add(folder)
    for folder in listing.subs:
        _listed_folder(eng, listing, folder)
    if listing.merged is None:
        listing.merged = recency(ref for folder in listing.subs for ref in listing.folders[folder])
    return list(listing.merged)


def _listed_folder(eng: MemoryState, listing: FolderListing, folder: str) -> list[Ref]:
    refs = listing.folders.get(folder)
    if refs is None or folder in listing.pending or folder not in listing.watched:
        listing.pending.discard(folder)
        fresh = folder_refs(eng, folder)
        if refs is None or len(fresh) != len(refs) or not all(map(operator.is_, fresh, refs)):
            listing.folders[folder] = refs = fresh
            listing.merged = None
    return refs


def forget_vanished(eng: MemoryState, refs: list[Ref]) -> None:
    """Drop state (and cache records) of sessions that disappeared since last seen."""
    known = {r.file for r in refs}
    for slot in [k for k in eng.states if k[0] not in known]:
        if not os.path.exists(slot[0]):
            del eng.states[slot]
            for kind in disk_cache.RECORD_KINDS:
                disk_cache.remove(eng.index_dir, disk_cache.cache_name(slot[0], slot[1], kind))
    for cache in (eng.refs, eng.headers):
        if len(cache) > len(known):
            for path in [p for p in cache if p not in known and not os.path.exists(p)]:
                del cache[path]


def project_refs(eng: MemoryState, cwd: str | None) -> list[Ref]:
    if not cwd:
        return []
    folder = os.path.join(eng.session_dir, encode_cwd(cwd))
    if eng.listing is not None:
        with eng.listing_lock:
            watch, listing = eng.dir_watch, eng.listing
            if watch is not None and listing is not None and folder in listing.folders:
                listing = _drain(eng, watch)
                if listing is not None:
                    return recency(_listed_folder(eng, listing, folder))
    return recency(folder_refs(eng, folder))


def resolve_target(eng: MemoryState, target: str, refs: list[Ref]) -> Ref:
    """The session layer's one resolver (`discovery.resolve_session`: paths, `file://`
    URIs, header ids, file stems and the `<timestamp>_<id>` suffix, unique id
    prefixes), with its errors in memory's error shape (candidates in UTF-16 order)."""
    try:
        path = resolve_session(target, eng.session_dir)
    except AmbiguousSession as err:
        raise Unresolved(err.code, str(err), sorted(err.candidates, key=utf16_key)) from None
    except SessionNotFound as err:
        raise Unresolved("session_not_found", str(err)) from None
    known = next((r for r in refs if r.file == path), None)
    return known if known is not None else ref_of(eng, path)


def scope_refs(eng: MemoryState, kind: str, target: str | None, cwd: str | None, refs: list[Ref]) -> list[Ref]:
    if kind == "global":
        return list(refs)
    if kind == "project":
        return project_refs(eng, cwd)
    if kind == "target":
        assert target is not None
        return [resolve_target(eng, target, refs)]
    project = project_refs(eng, cwd)
    return project[:1]


def hot_files(eng: MemoryState, refs: list[Ref], scoped: list[Ref]) -> set[str]:
    tier_refs = list(refs)
    known = {r.file for r in refs}
    tier_refs.extend(r for r in scoped if r.file not in known)
    tier_refs = recency(tier_refs)
    return {r.file for r in tier_refs[: max(0, eng.config.hot_sessions)]}


# ---- live leaves ----------------------------------------------------------------------------


def want_leaf(eng: MemoryState, file: str, branches: str) -> str | None:
    """The live leaf the active branch of `file` follows, when a live Pi holds it."""
    if branches != "active" or not eng.live_snapshot:
        return None
    return eng.live_snapshot.get(os.path.realpath(file))


def refresh_live(eng: MemoryState) -> None:
    if eng.live_leaves is None:
        return
    try:
        eng.live_snapshot = dict(eng.live_leaves())
    except Exception:  # a broken lease dir must not break recall
        log.exception("reading the live leases failed")
        eng.live_snapshot = {}
