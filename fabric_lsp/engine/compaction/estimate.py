"""Pi's token estimate for the compactor's own message views.

The estimate itself is `fabric_lsp.engine.session.tokens` (Pi's rules, exactly). The
lean loader replaces a tool result's content by a `ToolOutput` that already knows its
character count, so the (large) text is never measured twice; everything else defers
to the session model.
"""

from __future__ import annotations

from typing import Any

from fabric_lsp.engine.session import tokens as _tokens

from .loader import ToolOutput


def message_chars(message: dict[str, Any]) -> int:
    if message.get("role") == "toolResult":
        content = message.get("content")
        if type(content) is ToolOutput:
            return content.chars
    return _tokens.message_chars(message)


def estimate_tokens(message: dict[str, Any]) -> int:
    """Pi's `estimateTokens` (ceil(chars / 4), UTF-16 counting)."""
    return -(-message_chars(message) // 4)
