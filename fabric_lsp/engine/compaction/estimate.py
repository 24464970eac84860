"""Pi's token estimate for the compactor's own message views.

The estimate itself is `fabric_lsp.engine.session.tokens` (Pi's rules, exactly). The
lean loader replaces a tool result's content by a `ToolOutput` that already knows its
character count, so the (large) text is never measured twice; everything else defers
to the session model.
"""

from __future__ import annotations

from fabric_lsp.engine.session.tokens import message_chars as _session_message_chars

from .loader import ToolOutput


def message_chars(message: dict) -> int:
    if message.get("role") == "toolResult":
        content = message.get("content")
        if type(content) is ToolOutput:
            return content.chars
    return _session_message_chars(message)


def estimate_tokens(message: dict) -> int:
    """Pi's `estimateTokens` (ceil(chars / 4), UTF-16 counting)."""
    return -(-message_chars(message) // 4)
