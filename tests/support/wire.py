"""Engines whose wire calls answer with plain JSON values, for tests that compare results
as dicts.

The engines build the result Structs of fabric_lsp/protocol.py; every face sends
`protocol.to_wire` of them. These subclasses return exactly that (the Struct's plain JSON
values: camelCase keys, unset optionals left out), so a test reads what a client reads.
The engine code under test is the real one: only the last step, the encoding, is added.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from fabric_lsp import protocol
from fabric_lsp.engine.intents.service import IntentsService
from fabric_lsp.engine.memory.api import MemoryEngine
from fabric_lsp.engine.team.api import TeamEngine


class WireMemoryEngine(MemoryEngine):
    """`MemoryEngine` whose `recall`, `expand`, `sessions` and `file_history` return the
    wire JSON of the result Struct the engine built."""

    def recall(self, params: Any, **kw: Any) -> Any:  # type: ignore[override]
        return protocol.to_wire(_struct(super().recall(params, **kw), protocol.RecallResult))

    def expand(self, params: Any, **kw: Any) -> Any:  # type: ignore[override]
        return protocol.to_wire(
            _struct(super().expand(params, **kw), protocol.ExpandResult, protocol.ExpandErrorResult)
        )

    def sessions(self, params: Any, **kw: Any) -> Any:  # type: ignore[override]
        return protocol.to_wire(_struct(super().sessions(params, **kw), protocol.SessionsResult))

    def file_history(self, params: Any, **kw: Any) -> Any:  # type: ignore[override]
        return protocol.to_wire(_struct(super().file_history(params, **kw), protocol.FileHistoryResult))


class WireIntentsService(IntentsService):
    """`IntentsService` taking `fabric/compact/request`'s fields as a Mapping (decoded by the
    wire contract, as a face decodes them) and answering with the wire JSON."""

    def request(self, session_path: str | os.PathLike[str], params: Any) -> Any:  # type: ignore[override]
        if isinstance(params, Mapping):
            params = compact_request(session_path, **params)
        return protocol.to_wire(_struct(super().request(session_path, params), protocol.CompactRequestResult))

    def status(self, session_path: str | os.PathLike[str]) -> Any:  # type: ignore[override]
        return protocol.to_wire(_struct(super().status(session_path), protocol.CompactStatusResult))

    def cancel(self, session_path: str | os.PathLike[str]) -> Any:  # type: ignore[override]
        return protocol.to_wire(_struct(super().cancel(session_path), protocol.CompactCancelResult))


def compact_request(session_path: str | os.PathLike[str], **fields: Any) -> protocol.CompactRequestParams:
    """`fabric/compact/request` params for the session, decoded by the wire contract."""
    return protocol.decode_params(protocol.COMPACT_REQUEST, {"session": os.fspath(session_path), **fields})


def _struct(value: Any, *kinds: type) -> Any:
    """`value`, which must be one of the result Structs `kinds` (the engine builds them)."""
    assert isinstance(value, kinds), f"the engine answered {type(value).__name__}, not {kinds}"
    return value


class WireTeamEngine(TeamEngine):
    """`TeamEngine` whose `recall` and `expand` return the wire JSON of the result Struct."""

    def recall(self, params: Any) -> Any:  # type: ignore[override]
        return protocol.to_wire(_struct(super().recall(params), protocol.RecallResult))

    def expand(self, params: Any) -> Any:  # type: ignore[override]
        return protocol.to_wire(_struct(super().expand(params), protocol.ExpandResult, protocol.ExpandErrorResult))
