"""`fabric/expand`: whole entries of one session, by index, range, entry id or operation
address, and the integrity check pointers carry (`expectedSourceHash`,
`expectedLineageFingerprint`: `stale_pointer`), shared with recall's hydrated scope.

Expansion streams the full source (expand_stream.py) and shares no derived state with
the index, so it never waits for the engine lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from fabric_lsp.engine.activity import ActivitySink, CancelToken, check, report
from fabric_lsp.protocol import (
    ContextEditMark,
    ExpandedEntry,
    ExpandErrorBody,
    ExpandErrorCode,
    ExpandErrorResult,
    ExpandParams,
    ExpandResult,
    SegmentEntry,
)

from .catalog import Unresolved, all_refs, resolve_target, safe_nonneg_int, want_leaf
from .config import MemoryConfig
from .core import MemoryState
from .state import SessionState, SourceMissing

if TYPE_CHECKING:
    from ..json_types import JsonObject
    from .expand_stream import Expansion


def stale_pointer(state: SessionState | Expansion, exp_hash: Any, exp_fp: Any) -> str | None:
    """The `stale_pointer` message when the session no longer has the pointer's source
    hash or lineage fingerprint; None when it has both."""
    hash_bad = exp_hash is not None and exp_hash != state.source_hash
    fp_bad = exp_fp is not None and exp_fp != state.lineage.fingerprint
    if not (hash_bad or fp_bad):
        return None
    return (
        "Session active lineage changed after the pointer was issued."
        if fp_bad
        else "Session source changed after the pointer was issued."
    )


def expand(
    eng: MemoryState,
    params: ExpandParams,
    *,
    cwd: str | None = None,
    cancel: CancelToken | None = None,
    activity: ActivitySink | None = None,
) -> ExpandResult | ExpandErrorResult:
    """The entries `params` select, decoded and checked by the wire contract (protocol.py:
    types, bounds, exactly one selector), so only the domain's rules are checked here."""
    branches = params.branches or "active"
    wanted = params.indices or []
    if not all(safe_nonneg_int(i) for i in wanted):
        return expand_error("index_out_of_bounds", "Every entry index must be a non-negative safe integer.")
    rng = params.entry_range
    if rng is not None and not (safe_nonneg_int(rng.first) and safe_nonneg_int(rng.last)):
        return expand_error("index_out_of_bounds", "Entry range requires safe integers with 0 <= first <= last.")
    session = params.session
    if not session.strip():
        raise ValueError("session: expand requires a session")
    entry_ids, op_addrs = params.entry_ids or [], params.operation_addresses or []
    exp_hash, exp_fp = params.expected_source_hash, params.expected_lineage_fingerprint
    # Expand reads the source itself and shares no derived state: it does not wait for
    # the engine lock (a long first build of other sessions must not hold it up).
    check(cancel)
    try:
        ref = resolve_target(eng, session.strip(), all_refs(eng))
    except Unresolved as err:
        return expand_error(cast("ExpandErrorCode", err.code), err.message, err.candidates)  # catalog's codes
    report(activity, "Expanding session entries")
    from .expand_stream import Selection, expand_streaming

    want = Selection(set(wanted), set(entry_ids), set(op_addrs), (rng.first, rng.last) if rng is not None else None)
    try:
        # Expansion streams the full source (no truncation, thinking and output
        # included) and keeps only the requested records: bounded memory at any size.
        state = expand_streaming(
            ref.file, branches, ref.id, want, cancel=lambda: check(cancel), live_leaf=want_leaf(eng, ref.file, branches)
        )
    except SourceMissing as missing:
        if missing.reason == "source_changed_during_index":
            return expand_error("stale_pointer", "Session source changed after the pointer was issued.")
        return expand_error("source_unavailable", f"Session source is unavailable: {ref.file}")
    stale = stale_pointer(state, exp_hash, exp_fp)
    if stale is not None:
        return expand_error("stale_pointer", stale)
    n = state.entry_count
    for i in wanted:
        if int(i) >= n:
            return expand_error("index_out_of_bounds", f"Entry index {int(i)} is outside 0..{max(0, n - 1)}.")
    if rng is not None and rng.last >= n:
        return expand_error("index_out_of_bounds", f"Entry range ends at {rng.last}, but the session has {n} entries.")
    for kind_name, values, counts in (("Entry", entry_ids, state.id_counts), ("Operation", op_addrs, state.op_counts)):
        for value in dict.fromkeys(values):
            count = counts.get(value, 0)
            if count == 0:
                return expand_error("address_not_found", f'{kind_name} address "{value}" was not found.')
            if count > 1:
                return expand_error("ambiguous_address", f'{kind_name} address "{value}" resolves to {count} records.')
    expanded = [expanded_entry(e) for e in state.selected]
    _mark_file_context_edits(
        eng, expanded, ref.file, source_hash=state.source_hash, leaf=state.lineage.leaf_id, branches=branches
    )
    return ExpandResult(
        session=ref.file,
        session_id=state.session_id,
        session_file=ref.file,
        source_hash=state.source_hash,
        branches=branches,
        lineage_fingerprint=state.lineage.fingerprint,
        expanded=expanded,
    )


def _mark_file_context_edits(
    eng: MemoryState, items: list[ExpandedEntry], file: str, *, source_hash: str, leaf: str | None, branches: str
) -> None:
    """`contextEdit` on the items Pi 1.x hides or replaces (session/projection.py)."""
    from ..session.projection import file_context_edit_marks

    if items:
        if leaf is None:  # (all branches: the active branch still decides for its own entries)
            leaf = want_leaf(eng, file, "active")
        mark_context_edits(
            items, file_context_edit_marks(file, source_hash=source_hash, leaf_id=leaf, branches=branches)
        )


def mark_context_edits(items: Sequence[SegmentEntry | ExpandedEntry], marks: dict[str, dict[str, str]] | None) -> None:
    """Set `context_edit` on each recall segment entry or expand item whose entry Pi 1.x
    hides or replaces, by session/projection.py's rule (`mark_records`: a Fabric
    operation or branch fact is marked by its carrier entry)."""
    from ..session.projection import mark_records

    if not marks:
        return
    for item in items:
        probe: dict[str, Any] = {"entryId": item.entry_id, "type": item.type}
        if isinstance(item, ExpandedEntry) and item.parent_entry_id is not None:
            probe["parentEntryId"] = item.parent_entry_id
        mark_records((probe,), marks)
        mark = probe.get("contextEdit")
        if mark is not None:
            item.context_edit = ContextEditMark(edit_id=mark["editId"], state=mark["state"])


class ExpandConfig:
    """The engine config seen by expansion: full text, thinking and tool output."""

    def __init__(self, cfg: MemoryConfig) -> None:
        self.max_entry_chars = None
        self.index_thinking = True
        self.index_tool_output = True
        self.max_cold_vocabulary_bytes = cfg.max_cold_vocabulary_bytes
        self.max_cold_cache_bytes = cfg.max_cold_cache_bytes


def expand_error(code: ExpandErrorCode, message: str, candidates: list[str] | None = None) -> ExpandErrorResult:
    return ExpandErrorResult(error=ExpandErrorBody(code=code, message=message, candidates=candidates))


def expanded_entry(e: JsonObject) -> ExpandedEntry:
    """The wire `ExpandedEntry` of a memory record (the whole text, its structural detail)."""
    item = ExpandedEntry(
        index=e["index"],
        entry_id=e.get("entryId"),
        operation_address=e.get("operationAddress"),
        role=e.get("role"),
        tool_name=e.get("toolName") or None,
        type=e.get("type"),
        timestamp=e.get("timestamp"),
        is_error=bool(e.get("isError")),
        text=e["text"],
        line=e.get("line", -1),
    )
    # The reference's structural detail, when present
    for key, field in _EXPAND_EXTRAS:
        value = e.get(key)
        if value is not None:
            setattr(item, field, value)
    return item


_EXPAND_EXTRAS = (
    ("parentEntryId", "parent_entry_id"),
    ("ref", "ref"),
    ("provider", "provider"),
    ("action", "action"),
    ("outcome", "outcome"),
    ("filesTouched", "files_touched"),
    ("operation", "operation"),
    ("branchFact", "branch_fact"),
    ("factAddress", "fact_address"),
    ("carrierEntryId", "carrier_entry_id"),
    ("carrierParentId", "carrier_parent_id"),
    ("carrierFromId", "carrier_from_id"),
)
