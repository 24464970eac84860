"""`fabric/expand`: whole entries of one session, by index, range, entry id or operation
address, and the integrity check pointers carry (`expectedSourceHash`,
`expectedLineageFingerprint`: `stale_pointer`), shared with recall's hydrated scope.

Expansion streams the full source (expand_stream.py) and shares no derived state with
the index, so it never waits for the engine lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fabric_lsp.engine.activity import ActivitySink, CancelToken, check, report
from fabric_lsp.protocol import ExpandParams

from .catalog import Unresolved, all_refs, resolve_target, safe_nonneg_int, want_leaf
from .config import MemoryConfig
from .core import MemoryState
from .state import SessionState, SourceMissing

if TYPE_CHECKING:
    from ..json_types import JsonObject
    from .expand_stream import Expansion


def stale_pointer(state: SessionState | Expansion, exp_hash: Any, exp_fp: Any) -> JsonObject | None:
    hash_bad = exp_hash is not None and exp_hash != state.source_hash
    fp_bad = exp_fp is not None and exp_fp != state.lineage.fingerprint
    if not (hash_bad or fp_bad):
        return None
    msg = (
        "Session active lineage changed after the pointer was issued."
        if fp_bad
        else "Session source changed after the pointer was issued."
    )
    return {"code": "stale_pointer", "message": msg}


def expand(
    eng: MemoryState,
    params: ExpandParams,
    *,
    cwd: str | None = None,
    cancel: CancelToken | None = None,
    activity: ActivitySink | None = None,
) -> JsonObject:
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
        return expand_error(err.code, err.message, err.candidates)
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
        return expand_error("stale_pointer", stale["message"])
    n = state.entry_count
    for i in wanted:
        if int(i) >= n:
            return expand_error("index_out_of_bounds", f"Entry index {int(i)} is outside 0..{max(0, n - 1)}.")
    if rng is not None and rng.last >= n:
        return expand_error("index_out_of_bounds", f"Entry range ends at {rng.last}, but the session has {n} entries.")
    base: dict[str, Any] = {
        "session": ref.file,
        "sessionId": state.session_id,
        "sessionFile": ref.file,
        "sourceHash": state.source_hash,
        "branches": branches,
        "lineageFingerprint": state.lineage.fingerprint,
    }
    for kind_name, values, counts in (("Entry", entry_ids, state.id_counts), ("Operation", op_addrs, state.op_counts)):
        for value in dict.fromkeys(values):
            count = counts.get(value, 0)
            if count == 0:
                return expand_error("address_not_found", f'{kind_name} address "{value}" was not found.')
            if count > 1:
                return expand_error("ambiguous_address", f'{kind_name} address "{value}" resolves to {count} records.')
    selected = state.selected
    base["expanded"] = [_expanded_item(e) for e in selected]
    _mark_context_edits(
        eng, base["expanded"], ref.file, source_hash=state.source_hash, leaf=state.lineage.leaf_id, branches=branches
    )
    return base


def _mark_context_edits(
    eng: MemoryState, items: list[Any], file: str, *, source_hash: str, leaf: str | None, branches: str
) -> None:
    """`contextEdit` on the items Pi 1.x hides or replaces (session/projection.py)."""
    from ..session.projection import file_context_edit_marks, mark_records

    if items:
        if leaf is None:  # (all branches: the active branch still decides for its own entries)
            leaf = want_leaf(eng, file, "active")
        mark_records(items, file_context_edit_marks(file, source_hash=source_hash, leaf_id=leaf, branches=branches))


class ExpandConfig:
    """The engine config seen by expansion: full text, thinking and tool output."""

    def __init__(self, cfg: MemoryConfig) -> None:
        self.max_entry_chars = None
        self.index_thinking = True
        self.index_tool_output = True
        self.max_cold_vocabulary_bytes = cfg.max_cold_vocabulary_bytes
        self.max_cold_cache_bytes = cfg.max_cold_cache_bytes


def expand_error(code: str, message: str, candidates: list[str] | None = None) -> JsonObject:
    err: dict[str, Any] = {"code": code, "message": message}
    if candidates is not None:
        err["candidates"] = candidates
    return {"error": err}


def _expanded_item(e: JsonObject) -> JsonObject:
    item: dict[str, Any] = {"index": e["index"], "entryId": e.get("entryId")}
    if e.get("operationAddress") is not None:
        item["operationAddress"] = e["operationAddress"]
    item["role"] = e.get("role")
    if e.get("toolName"):
        item["toolName"] = e["toolName"]
    item["type"] = e.get("type")
    if e.get("timestamp") is not None:
        item["timestamp"] = e["timestamp"]
    item["isError"] = bool(e.get("isError"))
    item["text"] = e["text"]
    item["line"] = e.get("line", -1)
    # The reference's structural detail, when present (extra keys are allowed on results).
    for key in _EXPAND_EXTRAS:
        if key in e and e[key] is not None:
            item[key] = e[key]
    return item


_EXPAND_EXTRAS = (
    "parentEntryId",
    "ref",
    "provider",
    "action",
    "outcome",
    "filesTouched",
    "operation",
    "branchFact",
    "factAddress",
    "carrierEntryId",
    "carrierParentId",
    "carrierFromId",
)
