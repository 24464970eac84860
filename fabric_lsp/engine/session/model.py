"""Typed views of Pi session entries (format v3, Pi 0.80–1.x).

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


class ToolResultMessage(msgspec.Struct, tag_field="role", tag="toolResult", kw_only=True):
    toolCallId: str = ""
    toolName: str = ""
    content: Optional[list[UserPart]] = None
    details: Any = None
    isError: Any = False  # only `=== true` counts; kept as written
    timestamp: Optional[float] = None


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


Message = Union[UserMessage, AssistantMessage, ToolResultMessage, BashExecutionMessage, CustomRoleMessage]

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
    summary: str = ""
    firstKeptEntryId: str = ""
    tokensBefore: float = 0
    details: Any = None
    usage: Any = None
    fromHook: Optional[bool] = None


class BranchSummaryEntry(_Entry, tag_field="type", tag="branch_summary"):
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
    """Newer Pi (1.x): parsed and kept; plays no part in compaction."""

    targetId: Optional[str] = None
    replacement: Any = None


class UsageEntry(_Entry, tag_field="type", tag="usage"):
    """Newer Pi (1.x) usage record."""

    kind: Optional[str] = None
    provider: Optional[str] = None
    model: Optional[str] = None
    usage: Any = None


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
