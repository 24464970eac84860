"""The fabric-lsp wire contract: method names and msgspec Structs for every custom
params and result type (see docs/protocol.md).

Params are strict: `decode_params` rejects unknown keys, wrong types, out-of-range values
and two selectors where one is allowed, with a message that names the field and the
rule. The engines take the params Structs and build the result Structs here themselves
(docs/protocol.schema.json is generated from them); `result_from_json` checks a result that
crossed a process edge as plain JSON. This module (with its parts protocol_types.py and protocol_results.py) imports only
msgspec, so the CLI and the engines may use it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar, cast

import msgspec
from msgspec import Meta, Struct

from fabric_lsp.protocol_results import (
    ActivityEntity as ActivityEntity,
)
from fabric_lsp.protocol_results import (
    ActivityMetrics as ActivityMetrics,
)
from fabric_lsp.protocol_results import (
    ActivityParams as ActivityParams,
)
from fabric_lsp.protocol_results import (
    ActivityProgress as ActivityProgress,
)
from fabric_lsp.protocol_results import (
    BranchSummaryPreviewResult as BranchSummaryPreviewResult,
)
from fabric_lsp.protocol_results import (
    CommitRecord as CommitRecord,
)
from fabric_lsp.protocol_results import (
    CompactCancelResult as CompactCancelResult,
)
from fabric_lsp.protocol_results import (
    CompactionCommittedParams as CompactionCommittedParams,
)
from fabric_lsp.protocol_results import (
    CompactionPreviewResult as CompactionPreviewResult,
)
from fabric_lsp.protocol_results import (
    CompactRequestResult as CompactRequestResult,
)
from fabric_lsp.protocol_results import (
    CompactStatusResult as CompactStatusResult,
)
from fabric_lsp.protocol_results import (
    ContextEditMark as ContextEditMark,
)
from fabric_lsp.protocol_results import (
    Coverage as Coverage,
)
from fabric_lsp.protocol_results import (  # (the contract's results: protocol.RecallResult, ...)
    CoverageError as CoverageError,
)
from fabric_lsp.protocol_results import (
    ExactMatch as ExactMatch,
)
from fabric_lsp.protocol_results import (
    ExpandedEntry as ExpandedEntry,
)
from fabric_lsp.protocol_results import (
    ExpandErrorBody as ExpandErrorBody,
)
from fabric_lsp.protocol_results import (
    ExpandErrorCode as ExpandErrorCode,
)
from fabric_lsp.protocol_results import (
    ExpandErrorResult as ExpandErrorResult,
)
from fabric_lsp.protocol_results import (
    ExpandResult as ExpandResult,
)
from fabric_lsp.protocol_results import (
    FileHistoryResult as FileHistoryResult,
)
from fabric_lsp.protocol_results import (
    FileHistorySession as FileHistorySession,
)
from fabric_lsp.protocol_results import (
    FileOperation as FileOperation,
)
from fabric_lsp.protocol_results import (
    Intent as Intent,
)
from fabric_lsp.protocol_results import (
    LeaseHolder as LeaseHolder,
)
from fabric_lsp.protocol_results import (
    Pointer as Pointer,
)
from fabric_lsp.protocol_results import (
    PointerItem as PointerItem,
)
from fabric_lsp.protocol_results import (
    RecallResult as RecallResult,
)
from fabric_lsp.protocol_results import (
    ResultEntryRange as ResultEntryRange,
)
from fabric_lsp.protocol_results import (
    Segment as Segment,
)
from fabric_lsp.protocol_results import (
    SegmentEntry as SegmentEntry,
)
from fabric_lsp.protocol_results import (
    SegmentItem as SegmentItem,
)
from fabric_lsp.protocol_results import (
    SessionInfo as SessionInfo,
)
from fabric_lsp.protocol_results import (
    SessionsResult as SessionsResult,
)
from fabric_lsp.protocol_results import (
    TeamMembersResult as TeamMembersResult,
)
from fabric_lsp.protocol_types import (
    _ACTIVITY as _ACTIVITY,
)
from fabric_lsp.protocol_types import (
    _PARAMS as _PARAMS,
)
from fabric_lsp.protocol_types import (
    _RESULT as _RESULT,
)
from fabric_lsp.protocol_types import (
    Branches as Branches,
)
from fabric_lsp.protocol_types import (
    ListScope as ListScope,
)
from fabric_lsp.protocol_types import (
    NonEmptyStr as NonEmptyStr,
)
from fabric_lsp.protocol_types import (  # (re-exported: the contract's shared aliases)
    NonNegInt as NonNegInt,
)
from fabric_lsp.protocol_types import (
    PositiveInt as PositiveInt,
)
from fabric_lsp.protocol_types import (
    ProgressToken as ProgressToken,
)
from fabric_lsp.protocol_types import (
    RecallScope as RecallScope,
)
from fabric_lsp.protocol_types import (
    Tier as Tier,
)
from fabric_lsp.protocol_types import (
    Timestamp as Timestamp,
)

# ---------------------------------------------------------------------------------------
# Method names
# ---------------------------------------------------------------------------------------

SESSIONS = "fabric/sessions"
RECALL = "fabric/recall"
EXPAND = "fabric/expand"
COMPACTION_PREVIEW = "fabric/compactionPreview"
BRANCH_SUMMARY_PREVIEW = "fabric/branchSummaryPreview"
COMPACT_REQUEST = "fabric/compact/request"
COMPACT_STATUS = "fabric/compact/status"
COMPACT_CANCEL = "fabric/compact/cancel"
FILE_HISTORY = "fabric/fileHistory"
TEAM_MEMBERS = "fabric/teamMembers"

# server -> client notifications
ACTIVITY = "fabric/activity"
COMPACTION_COMMITTED = "fabric/compactionCommitted"

# workspace/executeCommand names -> the request each one mirrors
COMMANDS: dict[str, str | None] = {
    "fabric.recall": RECALL,
    "fabric.expand": EXPAND,
    "fabric.compactionPreview": COMPACTION_PREVIEW,
    "fabric.branchSummaryPreview": BRANCH_SUMMARY_PREVIEW,
    "fabric.compact.request": COMPACT_REQUEST,
    "fabric.compact.status": COMPACT_STATUS,
    "fabric.compact.cancel": COMPACT_CANCEL,
    "fabric.sessions": SESSIONS,
    "fabric.fileHistory": FILE_HISTORY,
    "fabric.reload": None,  # drop caches, re-read configuration
}

# The entry reference syntax used in rendered recall text, hover and definition.
ENTRY_REFERENCE_PATTERN = r"pi-entry:([A-Za-z0-9][A-Za-z0-9_.-]*)/([A-Za-z0-9][A-Za-z0-9_.:-]*)"


class EntryRange(Struct, **_PARAMS):
    """An inclusive range of raw entry ordinals; `first <= last`."""

    first: NonNegInt
    last: NonNegInt

    def __post_init__(self) -> None:
        if self.first > self.last:
            raise ValueError("`first` must be <= `last`")


# ---------------------------------------------------------------------------------------
# Params
# ---------------------------------------------------------------------------------------


class TeamMembersParams(Struct, **_PARAMS):
    """`fabric/teamMembers`: no parameters but the optional `workDoneToken`."""

    work_done_token: ProgressToken | None = None


class SessionsParams(Struct, **_PARAMS):
    scope: ListScope = "project"
    branches: Branches = "active"  # the entry counts and lineages of which branch mode
    cwd: str | None = None
    page: PositiveInt = 1
    page_size: Annotated[int, Meta(ge=1, le=200)] = 50
    work_done_token: ProgressToken | None = None


class RecallParams(Struct, **_PARAMS):
    query: str | None = None
    query_mode: Literal["literal", "regex"] = "literal"
    scope: RecallScope = "session"
    branches: Branches = "active"
    page: PositiveInt = 1
    page_size: Annotated[int, Meta(ge=1, le=100)] = 25
    expected_source_hash: str | None = None
    expected_lineage_fingerprint: str | None = None
    entry_range: EntryRange | None = None
    cwd: str | None = None
    work_done_token: ProgressToken | None = None

    def __post_init__(self) -> None:
        # the schema's `$` also matches before a final newline: keep the keywords exact;
        # a `session:` target may hold any character, as `fabric/expand`'s `session` may
        if not self.scope.startswith("session:") and ("\n" in self.scope or "\r" in self.scope):
            raise ValueError("`scope` must not contain line breaks")
        # the cross-field rules: what only a hydrated session (or only a local index) has
        team = self.scope == "team" or self.scope.startswith("team:")
        if team and self.query_mode == "regex":
            raise ValueError('`queryMode` "regex" is not available for a team scope; use a literal query')
        if self.scope.strip().startswith("session:"):
            return
        for name, value in (
            ("expectedSourceHash", self.expected_source_hash),
            ("expectedLineageFingerprint", self.expected_lineage_fingerprint),
            ("entryRange", self.entry_range),
        ):
            if value is not None:
                where = "not available for a team scope" if team else "only with scope session:<id-or-path>"
                raise ValueError(f"`{name}`: {where} (integrity expectations and ranges need one hydrated session)")


EXPAND_SELECTORS = ("indices", "entryIds", "operationAddresses", "entryRange")


class ExpandParams(Struct, **_PARAMS):
    session: NonEmptyStr
    # a team item's member: expand from the team database (docs/team.md)
    member: NonEmptyStr | None = None
    branches: Branches | None = None
    expected_source_hash: str | None = None
    expected_lineage_fingerprint: str | None = None
    indices: list[NonNegInt] | None = None
    entry_ids: list[NonEmptyStr] | None = None
    operation_addresses: list[NonEmptyStr] | None = None
    entry_range: EntryRange | None = None
    work_done_token: ProgressToken | None = None

    def __post_init__(self) -> None:
        given = [
            name
            for name, value in zip(
                EXPAND_SELECTORS,
                (self.indices, self.entry_ids, self.operation_addresses, self.entry_range),
            )
            if value is not None
        ]
        if len(given) != 1:
            shown = ", ".join(f"`{g}`" for g in given) if given else "none"
            raise ValueError(
                "exactly one selector of `indices`, `entryIds`, `operationAddresses`, "
                f"`entryRange` is required (got {shown})"
            )


# The intents engine's limits (engine/intents/limits.py; a test keeps them equal), so the
# schema states every bound the engine enforces.
Instructions = Annotated[str, Meta(max_length=8192)]
PreserveList = Annotated[list[Annotated[str, Meta(max_length=2048)]], Meta(max_length=16)]
IntentReason = Annotated[str, Meta(max_length=1024)]
RequestedBy = Annotated[str, Meta(min_length=1, max_length=256)]


class CompactionPreviewParams(Struct, **_PARAMS):
    session: NonEmptyStr
    instructions: str | None = None
    preserve: list[str] | None = None
    reason: Literal["manual", "threshold", "overflow"] = "manual"
    context_window: NonNegInt | None = None
    reserve_tokens: NonNegInt | None = None
    keep_recent_tokens: NonNegInt | None = None
    target_context_ratio: Annotated[float, Meta(ge=0.25, le=0.85)] | None = None
    tokens_before: NonNegInt | None = None
    leaf_id: NonEmptyStr | None = None
    include_qa: bool = False
    work_done_token: ProgressToken | None = None


class BranchSummaryPreviewParams(Struct, **_PARAMS):
    session: NonEmptyStr
    target_id: NonEmptyStr
    from_id: NonEmptyStr | None = None
    instructions: str | None = None
    preserve: list[str] | None = None
    replace_instructions: bool | None = None
    work_done_token: ProgressToken | None = None


class CompactRequestParams(Struct, **_PARAMS):
    session: NonEmptyStr
    reason: IntentReason | None = None
    instructions: Instructions | None = None
    preserve: PreserveList | None = None
    requested_by: RequestedBy = "user"
    work_done_token: ProgressToken | None = None


class CompactSessionParams(Struct, **_PARAMS):
    """Params of `fabric/compact/status` and `fabric/compact/cancel`."""

    session: NonEmptyStr
    work_done_token: ProgressToken | None = None


class FileHistoryParams(Struct, **_PARAMS):
    """Exactly one of `path` (absolute) and `uri` (`file:`)."""

    path: NonEmptyStr | None = None
    uri: NonEmptyStr | None = None
    scope: Literal["project", "global"] = "global"
    branches: Branches = "active"
    page: PositiveInt = 1
    page_size: Annotated[int, Meta(ge=1, le=200)] = 50
    cwd: str | None = None
    work_done_token: ProgressToken | None = None

    def __post_init__(self) -> None:
        if (self.path is None) == (self.uri is None):
            raise ValueError("exactly one of `path` and `uri` is required")
        if self.path is not None and not self.path.startswith("/"):
            raise ValueError("`path` must be an absolute path")
        if self.uri is not None and not self.uri.startswith("file:"):
            raise ValueError("`uri` must be a file: URI")


# ---------------------------------------------------------------------------------------
# Method table and strict decoding
# ---------------------------------------------------------------------------------------

PARAMS_TYPES: dict[str, type[Struct]] = {
    SESSIONS: SessionsParams,
    RECALL: RecallParams,
    EXPAND: ExpandParams,
    COMPACTION_PREVIEW: CompactionPreviewParams,
    BRANCH_SUMMARY_PREVIEW: BranchSummaryPreviewParams,
    COMPACT_REQUEST: CompactRequestParams,
    COMPACT_STATUS: CompactSessionParams,
    COMPACT_CANCEL: CompactSessionParams,
    FILE_HISTORY: FileHistoryParams,
    TEAM_MEMBERS: TeamMembersParams,
}

RESULT_TYPES: dict[str, Any] = {
    SESSIONS: SessionsResult,
    RECALL: RecallResult,
    EXPAND: ExpandResult,  # or ExpandErrorResult on a domain error
    COMPACTION_PREVIEW: CompactionPreviewResult,
    BRANCH_SUMMARY_PREVIEW: BranchSummaryPreviewResult,
    COMPACT_REQUEST: CompactRequestResult,
    COMPACT_STATUS: CompactStatusResult,
    COMPACT_CANCEL: CompactCancelResult,
    FILE_HISTORY: FileHistoryResult,
    TEAM_MEMBERS: TeamMembersResult,
}

NOTIFICATION_TYPES: dict[str, Any] = {
    ACTIVITY: ActivityParams,
    COMPACTION_COMMITTED: CompactionCommittedParams,
}


class InvalidParams(ValueError):
    """Params that do not match the wire contract; the message names field and rule."""


_AT_PATH = re.compile(r"^(?P<rule>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)


def _describe(method: str, err: msgspec.ValidationError) -> str:
    m = _AT_PATH.match(str(err))
    assert m is not None  # the pattern matches every string
    rule, path = m.group("rule"), m.group("path")
    # msgspec says "Object contains unknown field `x`" at the parent's path
    unknown = re.match(r"Object contains unknown field `([^`]*)`", rule)
    if unknown:
        field = (path or "") + "." + unknown.group(1)
        return f"{method}: unknown field `{field.lstrip('.')}` (unknown keys are rejected)"
    missing = re.match(r"Object missing required field `([^`]*)`", rule)
    if missing:
        field = (path or "") + "." + missing.group(1)
        return f"{method}: missing required field `{field.lstrip('.')}`"
    where = f"field `{path.lstrip('.')}`" if path else "params"
    rule = rule[:1].lower() + rule[1:]
    return f"{method}: {where}: {rule}"


def decode_params(method: str, params: Any) -> Any:
    """Convert raw JSON params to the method's params Struct, strictly.

    Raises `InvalidParams` whose message names the method, the field and the rule.
    A missing params object is treated as `{}`.
    """
    typ = PARAMS_TYPES[method]
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise InvalidParams(f"{method}: params must be an object, got {type(params).__name__}")
    try:
        return msgspec.convert(params, typ, strict=True)
    except msgspec.ValidationError as err:
        raise InvalidParams(_describe(method, err)) from None
    except UnicodeEncodeError:
        # msgspec cannot match a string holding a lone surrogate against an enum, a
        # literal or a number: find the field with the surrogates replaced.
        try:
            msgspec.convert(_without_surrogates(params), typ, strict=True)
        except msgspec.ValidationError as err:
            raise InvalidParams(_describe(method, err) + " (the params hold a lone surrogate)") from None
        raise InvalidParams(f"{method}: params: a string holds a lone surrogate") from None


_P = TypeVar("_P")


def as_params(method: str, typ: type[_P], params: _P | Mapping[str, Any] | None) -> _P:
    """`params` as `method`'s params Struct `typ`: as given, or decoded from a Mapping by
    `decode_params` (tests, benchmarks and scripts that call an engine in process)."""
    if isinstance(params, typ):
        return params
    return decode_params(method, dict(cast("Mapping[str, Any]", params or {})))


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # a pair is one code point in a str


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_surrogates(v) for v in value]
    return value


def params_json(params: Struct) -> dict[str, Any]:
    """The JSON params object a client sends for decoded `params`: camelCase keys, values
    left at their default and the progress token left out. `decode_params` of it gives
    back an equal Struct (without the token): how the CLI asks a running server."""
    out: dict[str, Any] = msgspec.to_builtins(params)
    out.pop("workDoneToken", None)
    return out


class ResultContractError(RuntimeError):
    """A result read as plain JSON from another process that does not fit its method's
    result type (a bug there, never input)."""


def result_from_json(method: str, value: Any) -> Any:
    """The method's result Struct (`RESULT_TYPES[method]`; a domain error `{error: {...}}`
    of expand: `ExpandErrorResult`) of a result that crossed a process edge as plain JSON
    (a preview worker process's answer, a running server's answer on the local socket);
    ResultContractError naming the method and the field when it does not fit (a wrong
    type, a key the Struct does not declare). In-process engines build the result Structs
    themselves; nothing reaches a client that the schema does not describe."""
    kind = RESULT_TYPES[method]
    if method == EXPAND and isinstance(value, dict) and "error" in value:
        kind = ExpandErrorResult
    return struct_from_json(kind, value, method)


_S = TypeVar("_S")


def struct_from_json(kind: type[_S], value: Any, method: str) -> _S:
    """`value` (plain JSON from another process: a worker's answer, a state file another
    process wrote) as the wire Struct `kind`; ResultContractError naming `method` and the
    field when it does not fit."""
    if isinstance(value, kind):
        return value
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as err:
        m = _AT_PATH.match(str(err))
        where = (m.group("path") or "").lstrip(".") if m else ""
        rule = m.group("rule") if m else str(err)
        raise ResultContractError(
            f"{method}: the result does not fit the wire contract{' at ' + where if where else ''}: {rule}"
        ) from None


def to_wire(value: Any) -> Any:
    """Plain JSON values of a result Struct (what pygls sends and the CLI prints)."""
    return msgspec.to_builtins(value)


def json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12 components) of every params, result and notification
    type, keyed by method name; deterministic."""
    methods = sorted(PARAMS_TYPES)
    types_: list[Any] = [PARAMS_TYPES[m] for m in methods] + [RESULT_TYPES[m] for m in methods]
    notes = sorted(NOTIFICATION_TYPES)
    types_ += [NOTIFICATION_TYPES[n] for n in notes]
    types_.append(ExpandErrorResult)
    schemas, components = msgspec.json.schema_components(types_, ref_template="#/$defs/{name}")
    n = len(methods)
    method_schemas = {m: {"params": schemas[i], "result": schemas[n + i]} for i, m in enumerate(methods)}
    method_schemas[EXPAND]["result"] = {"oneOf": [schemas[n + methods.index(EXPAND)], schemas[-1]]}
    out: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "fabric-lsp wire contract v1",
        "methods": method_schemas,
        "notifications": {note: schemas[2 * n + i] for i, note in enumerate(notes)},
        "commands": sorted(COMMANDS),
        "entryReferencePattern": ENTRY_REFERENCE_PATTERN,
        "$defs": {k: components[k] for k in sorted(components)},
    }
    return out


def json_schema_text() -> str:
    """docs/protocol.schema.json, byte for byte (`python -m fabric_lsp.protocol > docs/protocol.schema.json`)."""
    import json

    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    import sys

    sys.stdout.write(json_schema_text())
