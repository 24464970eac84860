"""Typed views of Pi session entries (format v3, Pi 0.80–1.x; the header does not tell
the versions apart — `projection.session_rules` does, by content).

The engines read the raw dicts (JavaScript semantics matter there); these Structs are
the typed, documented view for code that wants one. Decoding is lenient: an entry whose
type is unknown, or whose fields do not fit, becomes an `OpaqueEntry` that keeps its
raw object — never an error. Unknown extra fields are ignored by the typed view and
stay available in the raw dict.
"""

from __future__ import annotations

from typing import Any, Optional, Union

import msgspec

# ---- content parts ----------------------------------------------------------------


class TextPart(msgspec.Struct, tag_field="type", tag="text", kw_only=True):
    text: str = ""
    textSignature: Optional[Any] = None


class ThinkingPart(msgspec.Struct, tag_field="type", tag="thinking", kw_only=True):
    thinking: str = ""
    thinkingSignature: Optional[Any] = None
    redacted: Optional[bool] = None


class ToolCallPart(msgspec.Struct, tag_field="type", tag="toolCall", kw_only=True):
    id: str
    name: str
    arguments: Any = None
    thoughtSignature: Optional[Any] = None
    namespace: Optional[str] = None


class ImagePart(msgspec.Struct, tag_field="type", tag="image", kw_only=True):
    data: str = ""
    mimeType: str = ""


Part = Union[TextPart, ThinkingPart, ToolCallPart, ImagePart]
UserPart = Union[TextPart, ImagePart]

# ---- messages (entry.message, tagged by role) ---------------------------------------


class Usage(msgspec.Struct, kw_only=True):
    input: float = 0
    output: float = 0
    cacheRead: float = 0
    cacheWrite: float = 0
    totalTokens: float = 0
    cacheWrite1h: Optional[float] = None
    reasoning: Optional[float] = None
    cost: Optional[dict[str, Any]] = None


class UserMessage(msgspec.Struct, tag_field="role", tag="user", kw_only=True):
    content: Union[str, list[UserPart], None] = None
    timestamp: Optional[float] = None


class AssistantMessage(msgspec.Struct, tag_field="role", tag="assistant", kw_only=True):
    content: Optional[list[Part]] = None
    api: Optional[str] = None
    provider: Optional[str] = None
    model: Optional[str] = None
    responseModel: Optional[str] = None
    responseId: Optional[str] = None
    usage: Optional[Usage] = None
    stopReason: Optional[str] = None
    errorMessage: Optional[str] = None
    timestamp: Optional[float] = None
    # Pi 1.x
    thinkingLevel: Optional[str] = None
    durationMs: Optional[float] = None
    rawStopReason: Optional[str] = None


class ToolResultMessage(msgspec.Struct, tag_field="role", tag="toolResult", kw_only=True):
    toolCallId: str = ""
    toolName: str = ""
    content: Optional[list[UserPart]] = None
    details: Any = None
    isError: Any = False  # only `=== true` counts; kept as written
    timestamp: Optional[float] = None
    # Pi 1.x: time taken, nested model usage (not context accounting), calls made from a script
    durationMs: Optional[float] = None
    usage: Any = None
    nestedCalls: Any = None


class BashExecutionMessage(msgspec.Struct, tag_field="role", tag="bashExecution", kw_only=True):
    command: str = ""
    output: str = ""
    exitCode: Optional[float] = None
    cancelled: Optional[bool] = None
    truncated: Optional[bool] = None
    fullOutputPath: Optional[str] = None
    excludeFromContext: Optional[bool] = None
    timestamp: Optional[float] = None


class CustomRoleMessage(msgspec.Struct, tag_field="role", tag="custom", kw_only=True):
    customType: Any = None
    content: Any = None
    display: Any = None
    details: Any = None
    timestamp: Optional[float] = None


class SystemMessage(msgspec.Struct, tag_field="role", tag="system", kw_only=True):
    """Pi 1.x persists the prompt and tool state as `system` messages: the first holds
    every section and tool, later ones patch `sections` by name (null removes one) and
    carry `toolsAdded` / `toolsRemoved` deltas. Never summarized; Pi 1.x counts them in
    its token estimates and replays them into one (`projection.current_system_message`)."""

    content: Any = ""
    sections: Optional[dict[str, Optional[str]]] = None
    toolsAdded: Optional[list[Any]] = None
    toolsRemoved: Optional[list[Any]] = None
    timestamp: Optional[float] = None


Message = Union[UserMessage, AssistantMessage, ToolResultMessage, BashExecutionMessage, CustomRoleMessage, SystemMessage]

# ---- entries (tagged by type) --------------------------------------------------------


class _Entry(msgspec.Struct, kw_only=True):
    id: str
    parentId: Optional[str]
    timestamp: Optional[str] = None


class SessionHeader(msgspec.Struct, tag_field="type", tag="session", kw_only=True):
    id: str
    version: Optional[int] = None
    timestamp: Optional[str] = None
    cwd: Optional[str] = None
    parentSession: Optional[str] = None


class MessageEntry(_Entry, tag_field="type", tag="message"):
    message: Message


class CompactionEntry(_Entry, tag_field="type", tag="compaction"):
    """`firstKeptEntryId`: the first kept entry; "" (Fabric) or the compaction's own id
    (Pi 1.x retain-none) keep nothing; Pi 0.80.6 stores a null it was given verbatim.
    Pi 1.x adds `systemMessage` (the prompt and tool state at the boundary, replayed
    before the summary) and `usage` (the summarizer's)."""

    summary: str = ""
    firstKeptEntryId: Optional[str] = ""
    tokensBefore: float = 0
    details: Any = None
    usage: Any = None
    fromHook: Optional[bool] = None
    systemMessage: Optional[SystemMessage] = None


class BranchSummaryEntry(_Entry, tag_field="type", tag="branch_summary"):
    """`fromId`: Pi 0.80.6 writes the navigation target (= `parentId`, "root" at the
    root); Pi >= 0.84.3 the abandoned leaf (`projection.branch_summary_origin` tells)."""

    fromId: Optional[str] = None
    summary: str = ""
    details: Any = None
    usage: Any = None
    fromHook: Optional[bool] = None


class CustomEntry(_Entry, tag_field="type", tag="custom"):
    customType: Any = None
    data: Any = None


class CustomMessageEntry(_Entry, tag_field="type", tag="custom_message"):
    customType: Any = None
    content: Any = None
    display: Any = None
    details: Any = None


class ModelChangeEntry(_Entry, tag_field="type", tag="model_change"):
    provider: Optional[str] = None
    modelId: Optional[str] = None


class ThinkingLevelChangeEntry(_Entry, tag_field="type", tag="thinking_level_change"):
    thinkingLevel: Optional[str] = None


class LabelEntry(_Entry, tag_field="type", tag="label"):
    targetId: Optional[str] = None
    label: Optional[str] = None


class SessionInfoEntry(_Entry, tag_field="type", tag="session_info"):
    name: Optional[str] = None


class ContextEditEntry(_Entry, tag_field="type", tag="context_edit"):
    """Pi 1.x: hides (`replacement` null) or replaces the `content` of an earlier entry
    of the branch in the model context; the latest edit of a target on the active branch
    wins, and the target entry itself stays as written. Pi writes one by itself for every
    failed attempt it retries (auto-retry, overflow recovery)."""

    targetId: Optional[str] = None
    replacement: Any = None


class UsageEntry(_Entry, tag_field="type", tag="usage"):
    """Pi 1.x usage record (e.g. `kind: "cache_warm"`): not in the model context; counts
    in session cost totals."""

    kind: Optional[str] = None
    provider: Optional[str] = None
    model: Optional[str] = None
    usage: Any = None
    note: Optional[str] = None


class OpaqueEntry(msgspec.Struct, kw_only=True):
    """An entry of an unknown type, or one whose fields do not fit its type."""

    type: Optional[str]
    id: Optional[str]
    parentId: Optional[str]
    raw: dict[str, Any]
    problem: str


Entry = Union[
    MessageEntry,
    CompactionEntry,
    BranchSummaryEntry,
    CustomEntry,
    CustomMessageEntry,
    ModelChangeEntry,
    ThinkingLevelChangeEntry,
    LabelEntry,
    SessionInfoEntry,
    ContextEditEntry,
    UsageEntry,
]

ENTRY_TYPES: frozenset[str] = frozenset(
    t.__struct_config__.tag for t in Entry.__args__  # type: ignore[attr-defined]
)


def typed_entry(raw: dict[str, Any]) -> Union[Entry, OpaqueEntry]:
    """The typed view of one raw entry; never raises."""
    try:
        return msgspec.convert(raw, Entry, strict=False)
    except (msgspec.ValidationError, TypeError, ValueError) as exc:
        eid, pid, etype = raw.get("id"), raw.get("parentId"), raw.get("type")
        return OpaqueEntry(
            type=etype if isinstance(etype, str) else None,
            id=eid if isinstance(eid, str) else None,
            parentId=pid if isinstance(pid, str) else None,
            raw=raw,
            problem=str(exc),
        )


def typed_header(raw: dict[str, Any]) -> Optional[SessionHeader]:
    try:
        return msgspec.convert(raw, SessionHeader, strict=False)
    except (msgspec.ValidationError, TypeError, ValueError):
        return None
