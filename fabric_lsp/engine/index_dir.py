"""The memory index dir's ownership rules (engine/owned_dir.py applied to the disk cache).

Kept outside engine/memory so that the configuration (config.py, loaded at every server
start) can check an `indexDir` setting without importing the memory engine. disk_cache.py
writes exactly the names `is_record_name` accepts (`store.cache_name`, the snapshot).
"""

from __future__ import annotations

import re

from .owned_dir import DirRefused, OwnedDir, check_not_reserved, claim, refusal

SNAPSHOT_FILE = "cold-terms.snapshot"  # the cold term table's snapshot (cold_snapshot.SNAPSHOT_NAME)
_RECORD_NAME = re.compile(r"[0-9a-f]{16}-[a-zA-Z0-9._-]*\.json")


def is_record_name(name: str) -> bool:
    """A name disk_cache.py writes into the index dir: a record (`disk_cache.cache_name`) or the term
    table's snapshot. Nothing else there is ever read, rewritten or removed."""
    return name == SNAPSHOT_FILE or _RECORD_NAME.fullmatch(name) is not None


def owned(index_dir: str | None) -> OwnedDir:
    """The index dir's file operations; with None (no usable index dir) every one of them
    is refused."""
    return OwnedDir(index_dir if index_dir is not None else "", is_record_name)


def claim_index_dir(index_dir: str, *, agent_dir: str, session_dir: str, setting: str = "indexDir") -> str:
    """Check and claim the index dir (owned_dir.claim): refused (DirRefused, naming the
    setting, the path and what to do) when it is the agent dir, the sessions dir, $HOME,
    the root, an ancestor of the agent or sessions dir, inside the sessions dir, or an
    existing directory with files we did not write. A missing one is created 0700."""
    real = check_reserved_index_dir(index_dir, agent_dir=agent_dir, session_dir=session_dir, setting=setting)
    return claim(real, setting=setting, is_ours=is_record_name)


def index_dir_refusal(index_dir: str, *, agent_dir: str, session_dir: str, setting: str = "indexDir") -> str | None:
    """Why `claim_index_dir` would refuse `index_dir`, read-only (nothing is created), or None."""
    try:
        real = check_reserved_index_dir(index_dir, agent_dir=agent_dir, session_dir=session_dir, setting=setting)
    except DirRefused as err:
        return str(err)
    return refusal(real, setting=setting, is_ours=is_record_name)


def check_reserved_index_dir(index_dir: str, *, agent_dir: str, session_dir: str, setting: str = "indexDir") -> str:
    """The path-only part of `claim_index_dir` (touches nothing): its real path, or DirRefused."""
    return check_not_reserved(
        index_dir,
        setting=setting,
        reserved=(("the Pi agent dir", agent_dir), ("the Pi sessions dir", session_dir)),
        no_ancestor_of=(("the Pi agent dir", agent_dir), ("the Pi sessions dir", session_dir)),
        not_inside=(("the Pi sessions dir", session_dir),),
    )
