"""The text of Pi message content, the one rule every reader of session content uses
(compaction events, memory records, hover previews of text parts)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..json_types import JsonValue


def content_text(content: JsonValue) -> str:
    """A string content as is; for an array, the `text` of its typed text parts (string
    `text` only) joined with `\\n`; anything else is "". Other part kinds (images,
    thinking, tool calls) contribute nothing."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"]
            for p in content
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        )
    return ""
