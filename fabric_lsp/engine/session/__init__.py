"""Pi session model: typed entries, streaming reader, tree, discovery, token estimate."""

from .context import build_context_messages, context_entries, context_messages, context_tokens, entry_to_message
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
from .projection import (
    PI_RULES,
    RULES_080,
    RULES_1X,
    RULES_AUTO,
    branch_summary_origin,
    build_projection,
    compaction_checkpoint,
    context_edit_marks,
    current_system_message,
    estimate_projected_context_tokens,
    file_context_edit_marks,
    is_pi1x_marker,
    latest_edits,
    mark_records,
    projected_messages,
    resolve_rules,
    session_rules,
)
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
    estimate_context_tokens_1x,
    estimate_tokens,
    estimate_tokens_1x,
    js_number,
    js_stringify,
    utf16_len,
)
from .tree import INVALID_PARENT_GRAPH, Branch, SessionTree

# the public names of the session layer (its submodules stay reachable as attributes)
__all__ = [
    "AmbiguousSession", "Branch", "DEFAULT_MAX_LINE_BYTES", "EntryRecord",
    "INVALID_PARENT_GRAPH", "MAX_JSON_DEPTH", "MIN_SESSION_PREFIX", "PI_RULES", "RULES_080",
    "RULES_1X", "RULES_AUTO", "ReadStats", "SessionLog",
    "SessionNotFound", "SessionRef", "SessionTree", "branch_summary_origin", "build_context_messages",
    "build_projection", "by_recency", "bytes_hash",
    "calculate_context_tokens", "compaction_checkpoint", "context_edit_marks", "context_entries", "context_messages", "context_tokens",
    "current_system_message", "default_agent_dir",
    "default_session_dir", "encode_cwd", "entry_to_message", "estimate_context_tokens", "estimate_context_tokens_1x",
    "estimate_projected_context_tokens", "estimate_tokens", "estimate_tokens_1x",
    "exceeds_json_depth", "file_context_edit_marks", "is_pi1x_marker", "iter_session", "js_number", "js_stringify", "latest_edits",
    "list_session_files", "mark_records", "parse_json_line", "parse_session_bytes", "projected_messages", "read_header",
    "read_session", "resolve_rules", "resolve_session",
    "select_by_prefix", "session_ref", "session_rules", "source_hash", "utf16_len",
]
