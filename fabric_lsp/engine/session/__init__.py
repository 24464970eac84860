"""Pi session model: typed entries, streaming reader, tree, discovery, token estimate."""

from .context import build_context_messages, context_entries, context_tokens, entry_to_message
from .discovery import (
    MIN_SESSION_PREFIX,
    AmbiguousSession,
    SessionNotFound,
    SessionRef,
    by_recency,
    default_agent_dir,
    default_session_dir,
    encode_cwd,
    list_session_files,
    resolve_session,
    select_by_prefix,
    session_ref,
)
from .model import ENTRY_TYPES, OpaqueEntry, typed_entry, typed_header
from .reader import (
    DEFAULT_MAX_LINE_BYTES,
    MAX_JSON_DEPTH,
    EntryRecord,
    ReadStats,
    SessionLog,
    bytes_hash,
    exceeds_json_depth,
    iter_session,
    parse_json_line,
    parse_session_bytes,
    read_header,
    read_session,
    source_hash,
)
from .tokens import (
    calculate_context_tokens,
    estimate_context_tokens,
    estimate_tokens,
    js_number,
    js_stringify,
    utf16_len,
)
from .tree import INVALID_PARENT_GRAPH, Branch, SessionTree

# the public names of the session layer (its submodules stay reachable as attributes)
__all__ = [
    "AmbiguousSession", "Branch", "DEFAULT_MAX_LINE_BYTES", "ENTRY_TYPES", "EntryRecord",
    "INVALID_PARENT_GRAPH", "MAX_JSON_DEPTH", "MIN_SESSION_PREFIX", "OpaqueEntry", "ReadStats", "SessionLog",
    "SessionNotFound", "SessionRef", "SessionTree", "build_context_messages", "by_recency", "bytes_hash",
    "calculate_context_tokens", "context_entries", "context_tokens", "default_agent_dir",
    "default_session_dir", "encode_cwd", "entry_to_message", "estimate_context_tokens", "estimate_tokens",
    "exceeds_json_depth", "iter_session", "js_number", "js_stringify", "list_session_files",
    "parse_json_line", "parse_session_bytes", "read_header", "read_session", "resolve_session",
    "select_by_prefix", "session_ref", "source_hash", "typed_entry", "typed_header", "utf16_len",
]
