"""LSP handlers. Each module exposes `register(server)`; handlers are thin: decode params
→ run the engine in the executor → return plain JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fabric_lsp.server import FabricServer


def register_all(server: "FabricServer") -> None:
    from fabric_lsp.handlers import (
        commands,
        compaction,
        documents,
        expand,
        file_history,
        intents,
        lifecycle,
        recall,
        sessions,
    )

    for module in (lifecycle, sessions, recall, expand, compaction, intents, documents, file_history, commands):
        module.register(server)
