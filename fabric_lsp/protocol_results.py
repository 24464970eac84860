"""The result and notification Structs of the wire contract (fabric_lsp/protocol.py):
what the engines return and the server sends, and the two builders of an answer's
coverage (`coverage_error`, `index_coverage`). Imports only msgspec."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from msgspec import Struct

from fabric_lsp.protocol_types import _ACTIVITY, _RESULT, Branches, Tier, Timestamp

# ---------------------------------------------------------------------------------------
# Results (the engine entry points in fabric_lsp/engine_owner.py return these)
# ---------------------------------------------------------------------------------------


class CoverageError(Struct, **_RESULT):
    code: str
    message: str


class Coverage(Struct, **_RESULT):
    complete: bool
    indexed_sessions: int
    eligible_sessions: int
    stale_sessions: int
    incomplete_sessions: int
    reasons: list[str]
    error: CoverageError | None = None


class SessionInfo(Struct, **_RESULT):
    session_id: str
    session_file: str
    uri: str
    cwd: str | None
    entry_count: int
    size_bytes: int
    mtime: int | float
    tier: Tier
    first_ts: Timestamp | None = None
    last_ts: Timestamp | None = None
    leaf_id: str | None = None


class SessionsResult(Struct, **_RESULT):
    sessions: list[SessionInfo]
    total_items: int
    page: int
    page_size: int
    has_next: bool
    coverage: Coverage


class ResultEntryRange(Struct, **_RESULT):
    first: int
    last: int


class ExactMatch(Struct, **_RESULT):
    index: int
    entry_id: str | None
    operation_address: str | None


class ContextEditMark(Struct, **_RESULT):
    """Pi 1.x hides (`hidden`: the latest edit's replacement is null) or replaces
    (`replaced`: new content) this entry — or, for a Fabric operation or branch fact, its
    carrier entry — in the model context with the `context_edit` entry `editId`; the
    entry shown is still the one written (docs/session-model.md)."""

    edit_id: str
    state: Literal["hidden", "replaced"]


class SegmentEntry(Struct, **_RESULT):
    index: int
    entry_id: str | None
    parent_id: str | None
    type: str | None
    role: str | None
    tool_name: str | None
    timestamp: Any
    is_error: bool
    truncated: bool
    text: str
    matched: bool
    line: int
    context_edit: ContextEditMark | None = None


class Segment(Struct, **_RESULT):
    tier: Tier
    session_id: str
    session_file: str
    source_hash: str
    branches: Branches
    lineage_fingerprint: str
    entry_range: ResultEntryRange
    score: int | float
    matched_count: int
    exact_matches: list[ExactMatch]
    entries: list[SegmentEntry]
    # team recall (docs/team.md): who pushed the session, from which machine
    member: str | None = None
    machine: str | None = None


class Pointer(Struct, **_RESULT):
    tier: Literal["cold"]
    session_id: str
    session_file: str
    source_hash: str
    branches: Branches
    lineage_fingerprint: str
    matched_terms: list[str]
    score: int | float
    cwd: str | None
    last_ts: Any


class SegmentItem(Struct, tag_field="kind", tag="segment", **_RESULT):
    segment: Segment


class PointerItem(Struct, tag_field="kind", tag="pointer", **_RESULT):
    pointer: Pointer


class RecallResult(Struct, **_RESULT):
    scope: str
    branches: Branches
    query: str | None
    query_mode: str
    page: int
    page_size: int
    total_items: int
    total_matches: int
    has_next: bool
    authoritative: bool
    coverage: Coverage
    items: list[SegmentItem | PointerItem]
    text: str


class ExpandedEntry(
    Struct, rename="camel", kw_only=True, omit_defaults=True, forbid_unknown_fields=True
):  # = _RESULT, spelled out for pyright (key order)
    index: int
    entry_id: str | None
    operation_address: str | None = None
    role: str | None
    tool_name: str | None = None
    type: str | None
    timestamp: Any = None
    is_error: bool
    text: str
    line: int
    # the reference's structural detail of trace operations and branch facts, when present
    parent_entry_id: str | None = None
    ref: Any = None
    provider: str | None = None
    action: str | None = None
    outcome: Any = None
    files_touched: list[str] | None = None
    operation: dict[str, Any] | None = None
    branch_fact: dict[str, Any] | None = None
    fact_address: str | None = None
    carrier_entry_id: str | None = None
    carrier_parent_id: str | None = None
    carrier_from_id: str | None = None
    context_edit: ContextEditMark | None = None


class ExpandResult(Struct, **_RESULT):
    session: str
    session_id: str
    session_file: str
    source_hash: str
    branches: Branches
    lineage_fingerprint: str
    expanded: list[ExpandedEntry]
    # a team expand (docs/team.md): the stored records, and where the full source is
    member: str | None = None
    machine: str | None = None
    note: str | None = None


ExpandErrorCode = Literal[
    "stale_pointer",
    "address_not_found",
    "ambiguous_address",
    "ambiguous_session",
    "index_out_of_bounds",
    "session_not_found",
    "source_unavailable",
]


class ExpandErrorBody(Struct, **_RESULT):
    code: ExpandErrorCode
    message: str
    candidates: list[str] | None = None


class ExpandErrorResult(Struct, **_RESULT):
    error: ExpandErrorBody


class FileOperation(
    Struct, rename="camel", kw_only=True, omit_defaults=True, forbid_unknown_fields=True
):  # = _RESULT, spelled out for pyright (key order)
    """One typed read/edit/write of the file (a Pi tool call or a Fabric trace operation)."""

    session_id: str
    session_file: str
    cwd: str | None
    entry_id: str | None
    index: int
    line: int | None = None  # the 0-based line of the operation's entry in session_file
    operation_address: str | None = None
    action: Literal["read", "edit", "write"]
    tool_name: str
    outcome: Literal["succeeded", "failed"]
    timestamp: Any
    ref: str | None
    tool_call_id: str | None = None
    operation_ref: str | None = None


class FileHistorySession(Struct, **_RESULT):
    session_id: str
    session_file: str
    cwd: str | None
    count: int
    last_action: Literal["read", "edit", "write"]
    last_timestamp: Any


class FileHistoryResult(Struct, **_RESULT):
    path: str
    scope: Literal["project", "global"]
    branches: Branches
    page: int
    page_size: int
    total_sessions: int
    total_items: int
    has_next: bool
    items: list[FileOperation]
    sessions: list[FileHistorySession]
    coverage: Coverage


class TeamMember(Struct, **_RESULT):
    """One member of the team database: the machines it pushed from, its pushed sessions
    and entries (active branches), and its last push."""

    member: str
    machines: list[str]
    sessions: int
    entries: int
    last_pushed_at: str  # ISO 8601, the database's clock


class TeamMembersResult(Struct, **_RESULT):
    members: list[TeamMember]  # by member name (code point order)
    error: CoverageError | None = None  # team_not_configured | team_unavailable: members is []


class CompactionPreviewResult(Struct, **_RESULT):
    session_id: str
    session_file: str
    source_hash: str
    leaf_id: str | None
    outcome: Literal["compacted", "cancelled", "skipped"]
    tokens_before: int | None  # null when the usage is not a finite number (JSON.stringify(Infinity))
    # what the session held that the engine skipped (malformed lines, a parent cycle, ...)
    warnings: list[str] | None = None
    # "1.x" when Pi 1.x's rules applied (docs/session-model.md); absent for Pi 0.80.6's
    pi_rules: Literal["1.x"] | None = None
    reason: str | None = None
    # on "cancelled": the engine's or decoder's code and message (beside `reason`)
    error: CoverageError | None = None
    summary: str | None = None
    first_kept_entry_id: str | None = None
    details: dict[str, Any] | None = None
    qa: dict[str, Any] | None = None


class BranchSummaryPreviewResult(Struct, **_RESULT):
    outcome: Literal["summarized", "deferred", "none"]
    entries_summarized: int
    common_ancestor_id: str | None = None
    reason: str | None = None  # why nothing was summarized
    error: CoverageError | None = None
    summary: str | None = None
    details: dict[str, Any] | None = None


class Intent(Struct, **_RESULT):
    requested_by: str
    requested_at: Any
    reason: str | None = None
    instructions: str | None = None
    preserve: list[str] | None = None


class CommitRecord(Struct, **_RESULT):
    at: Any
    requested_by: str
    status: Literal["committed", "failed"]
    summary: str | None = None
    tokens_before: int | None = None
    estimated_tokens_after: int | None = None  # Pi's chars/4 estimate of the context after the append
    projected_tokens_after: int | None = None  # the preview's figure (details.budget.projectedTokensAfter)
    error: str | None = None
    entry_id: str | None = None
    committed_by: Literal["pi", "fabric-lsp"] | None = None  # "pi": the live Pi committed it (editors/pi)


class CompactRequestResult(Struct, **_RESULT):
    pending: Intent


class LeaseHolder(Struct, **_RESULT):
    """The live Pi that holds a session (editors/pi): it commits, nobody else appends."""

    pid: int
    since: int  # ms epoch when its hold began
    leaf_id: str | None = None  # Pi's live leaf (the active branch every answer uses)
    pi_version: str | None = None  # in `holders` only: the holding Pi's version, when it said


class CompactStatusResult(
    Struct, rename="camel", kw_only=True, omit_defaults=True, forbid_unknown_fields=True
):  # = _RESULT, spelled out for pyright (key order)
    pending: Intent | None = None
    last: CommitRecord | None = None
    settled: bool
    held_by: LeaseHolder | None = None
    holders: list[LeaseHolder] | None = None  # every live Pi that holds the session, oldest hold first


class CompactCancelResult(Struct, **_RESULT):
    cancelled: bool


class CompactionCommittedParams(Struct, **_RESULT):
    session: str
    record: CommitRecord


class ActivityEntity(Struct, tag_field="type", tag="entity", **_ACTIVITY):
    id: str
    kind: str
    name: str | None = None
    request: str | None = None


class ActivityProgress(Struct, tag_field="type", tag="progress", **_ACTIVITY):
    message: str
    percentage: int | None = None
    milestone: bool | None = None  # a phase began (sent even within the 50 ms throttle)
    request: str | None = None


class ActivityMetrics(Struct, tag_field="type", tag="metrics", **_ACTIVITY):
    request: str | None = None


ActivityParams = ActivityEntity | ActivityProgress | ActivityMetrics


# ---- the coverage objects the engines build


def coverage_error(code: str, message: str) -> Coverage:
    """The coverage of an answer that stopped at `code` before any session was read."""
    return Coverage(
        complete=False,
        indexed_sessions=0,
        eligible_sessions=0,
        stale_sessions=0,
        incomplete_sessions=0,
        reasons=[code],
        error=CoverageError(code=code, message=message),
    )


def index_coverage(
    index: Mapping[str, Any],
    *,
    complete: bool | None = None,
    reasons: list[str] | None = None,
    incomplete_sessions: int | None = None,
    error: CoverageError | None = None,
) -> Coverage:
    """An answer's coverage from the memory index's coverage record (engine/memory/index.py
    keeps it with the wire's keys: `complete`, `indexedSessions`, ..., `reasons`, `error?`),
    with the answer's own `complete`, `reasons`, `incompleteSessions` and `error` where
    given (else the index's)."""
    index_error = index.get("error")
    if error is None and index_error is not None:
        error = CoverageError(code=index_error["code"], message=index_error["message"])
    return Coverage(
        complete=bool(index["complete"]) if complete is None else complete,
        indexed_sessions=index["indexedSessions"],
        eligible_sessions=index["eligibleSessions"],
        stale_sessions=index["staleSessions"],
        incomplete_sessions=index["incompleteSessions"] if incomplete_sessions is None else incomplete_sessions,
        reasons=list(index["reasons"]) if reasons is None else reasons,
        error=error,
    )
