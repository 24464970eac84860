"""Extending a hot or cold state in place after its session file grew (Pi appends): the
new lines are read, the active lineage extended, the records and index updated; what
cannot be extended (another leaf, a rewrite) is rebuilt by the caller."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .entry_rows import records_from
from .entry_text import Normalizer
from .persist import finish_state
from .source import (
    Lineage,
    ScanLines,
    ScannedLine,
    SourceScan,
    StatKey,
    lineage_fingerprint,
    lineage_from_lines,
    scan_source,
    stat_key,
)
from .state import SessionState

if TYPE_CHECKING:
    from ..json_types import JsonObject, JsonValue

    Cancel = Callable[[], None] | None
    EntriesOf = Callable[[Lineage, bool], Iterable[tuple[JsonValue, int]]]  # (lineage, share_ids)


# Up to this size a file is read whole and each content line decoded once, its value kept
# until the lineage is known; that costs ~9x the file while it lasts (for small entries),
# and at this size is no faster than the streaming build (measured: 1.80 vs 1.89 s CPU for
# a 24 MB session of small entries), so the bound is low.
def try_append(state: SessionState, key: StatKey, cfg: Any) -> bool:
    """Extend `state` in place when the file only grew: same inode, the old bytes hash to
    the old `sourceHash` (a rewrite anywhere, even of the same size and followed by an
    append, is caught), and the old lineage is a prefix of the new one. Only the appended
    lines are parsed and normalized. False means: rebuild from source."""
    if state.scan is None and state.tier == "hot" and key.size > state.size:
        _restore_bookkeeping(state, cfg)
    scan = state.scan
    if scan is None or state.normalizer is None or state.hasher is None:
        return False
    if not scan.ends_complete or key.ino != state.key.ino or key.dev != state.key.dev or key.size <= state.size:
        return False
    old_size = state.size
    try:
        with open(state.file, "rb") as fh:
            data = fh.read(key.size)
    except OSError:
        return False
    after = stat_key(state.file)
    if after != key or len(data) != key.size:
        return False
    # Hashing the old prefix (GB/s) is what makes "only appended" a fact, not a guess.
    prefix_hasher = hashlib.sha256(memoryview(data)[:old_size])
    if prefix_hasher.hexdigest() != state.source_hash:
        return False
    new_bytes = data[old_size:]
    part = SourceScan(next_ordinal=scan.next_ordinal, next_line=scan.next_line, end_offset=scan.end_offset)
    scan_source(new_bytes, part, base=old_size)
    if part.header_id is not None:
        return False
    all_lines = scan.lines + part.lines
    if state.branches == "active":
        extended = _extend_active_lineage(state, part.lines, scan.next_ordinal)
        if extended is None:
            return False
        lineage, ordinals = extended
    else:
        lineage, ordinals = lineage_from_lines(all_lines, state.branches)
    hasher = prefix_hasher
    hasher.update(new_bytes)
    new_records = list(records_from(new_bytes, old_size, part.lines, lineage.ordinals, state.normalizer))
    # Commit (nothing below can fail part-way).
    scan.lines = all_lines
    scan.next_ordinal, scan.next_line, scan.end_offset = part.next_ordinal, part.next_line, part.end_offset
    scan.ends_complete = part.ends_complete
    state.path_ordinals = ordinals
    state.lineage = lineage
    state.hasher = hasher
    state.source_hash = hasher.hexdigest()
    state.key, state.size, state.mtime = key, key.size, key.mtime_ms
    if state.tier == "hot":
        assert state.entries is not None and state.hot_index is not None
        for rec in new_records:
            state.entries.append(rec)
            state.hot_index.add(rec)
    else:
        assert state.folder is not None
        for rec in new_records:
            state.folder.add(rec)
    finish_state(state, cfg, state.encode)
    return True


def _restore_bookkeeping(state: SessionState, cfg: Any) -> None:
    """Give a hot state loaded from the disk cache what an in-place append needs: the
    line scan, the hash state and the normalizer's session-wide sets, rebuilt from the
    old bytes (verified against `sourceHash`) and the records, without re-normalizing."""
    try:
        with open(state.file, "rb") as fh:
            old = fh.read(state.size)
    except OSError:
        return
    if len(old) != state.size:
        return
    hasher = hashlib.sha256(old)
    if hasher.hexdigest() != state.source_hash:
        return
    scan = scan_source(old)
    lineage, ordinals = lineage_from_lines(scan.lines, state.branches)
    if lineage.fingerprint != state.lineage.fingerprint:
        return
    if state.file_ops is None:
        return  # an append must extend the file operations too: rebuild instead
    entries: Sequence[JsonObject] = state.entries or []
    header_sid = scan.header_id or ""
    norm = Normalizer(
        state.file,
        header_sid,
        max_entry_chars=cfg.max_entry_chars,
        index_thinking=cfg.index_thinking,
        index_tool_output=cfg.index_tool_output,
    )
    norm.file_ops = state.file_ops
    norm.next_index = len(entries)
    norm.reasons = set(state.coverage.get("reasons", ())) - {"invalid_parent_graph"}
    for e in entries:
        if e.get("entryId") is not None:
            norm.entry_ids.add(e["entryId"])
        if e.get("operationAddress") is not None:
            norm.op_addresses.add(e["operationAddress"])
        if e.get("type") == "fabric_branch_fact" and e.get("factAddress") is not None:
            norm.fact_addresses.add(e["factAddress"])
    state.scan, state.path_ordinals, state.lineage = scan, ordinals, lineage
    state.normalizer, state.hasher = norm, hasher


def _extend_active_lineage(
    state: SessionState, new_lines: ScanLines, first_new: int
) -> tuple[Lineage, Sequence[int]] | None:
    """(lineage, path ordinals) when the new leaf's path is the old path plus new nodes
    only; None otherwise (the caller rebuilds)."""
    old_path = state.path_ordinals
    old_ids = state.lineage.ids
    if state.lineage.reasons or len(old_ids) != len(old_path):
        return None
    known = set(old_ids)
    new_nodes: dict[str, ScannedLine] = {}
    leaf: str | None = None
    for ln in new_lines:
        if ln.is_node:
            if ln.id in known or ln.id in new_nodes:
                return None  # a re-used id can move an old path node: rebuild
            new_nodes[ln.id] = ln
            leaf = ln.id
    if leaf is None:
        return state.lineage, old_path
    chain: list[ScannedLine] = []
    cur = new_nodes.get(leaf)
    while cur is not None:
        chain.append(cur)
        parent = cur.parent_id
        if parent is None:
            return None if old_ids else _finish_chain(chain, [], [])
        if parent in new_nodes:
            cur = new_nodes[parent]
            if len(chain) > len(new_nodes):
                return None  # a cycle among the new nodes
            continue
        if old_ids and parent == old_ids[-1]:
            return _finish_chain(chain, old_ids, old_path)
        return None
    return None


def _finish_chain(chain: list[ScannedLine], old_ids: list[str], old_path: Sequence[int]) -> tuple[Lineage, list[int]]:
    chain.reverse()
    ids = list(old_ids) + [c.id for c in chain]
    ordinals = list(old_path) + [c.ordinal for c in chain]
    leaf = ids[-1]
    return Lineage("active", leaf, ids, set(ordinals), lineage_fingerprint("active", leaf, ids), []), ordinals
