"""The wire contract's shared pieces: value aliases and the Struct options of params,
results and activity events (fabric_lsp/protocol.py is the contract; this module and
protocol_results.py are its parts). Imports only msgspec."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

# ---------------------------------------------------------------------------------------
# Shared pieces
# ---------------------------------------------------------------------------------------

NonNegInt = Annotated[int, Meta(ge=0)]
Timestamp = int | float | str  # epoch milliseconds, or the session's ISO string
PositiveInt = Annotated[int, Meta(ge=1)]
NonEmptyStr = Annotated[str, Meta(min_length=1)]
ProgressToken = int | str
Branches = Literal["active", "all"]
Tier = Literal["hot", "cold"]
ListScope = Literal["session", "project", "global"]
# "session" | "project" | "global" | "session:<id-or-path>"; the id-or-path may hold any
# character (a newline too), exactly as `fabric/expand`'s `session` may; "team" |
# "team:<member>" search the team database (docs/team.md)
RecallScope = Annotated[str, Meta(pattern=r"^(session|project|global|team|session:[\s\S]+|team:[^\r\n]+)$")]

_PARAMS = dict(forbid_unknown_fields=True, rename="camel", kw_only=True, omit_defaults=True)
# Results are strict too: a key the Struct does not declare is a contract error, so the
# Structs are the whole wire (field order = the engines' key order; None defaults are
# omitted, as the engines omit absent optional keys).
_RESULT = dict(rename="camel", kw_only=True, omit_defaults=True, forbid_unknown_fields=True)
# `fabric/activity` events carry free metrics (indexedSessions, durations, ...): lenient.
_ACTIVITY = dict(rename="camel", kw_only=True, omit_defaults=True)
