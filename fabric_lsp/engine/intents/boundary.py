"""Safe-boundary detection: is this session settled, so that a compaction may be appended?

A session is settled when

1. its active branch ends a finished turn: the last entry that carries context (skipping
   metadata-only entries a user can write while idle: `label`, `session_info`,
   `custom`, `model_change`, `thinking_level_change`) is an assistant message whose
   `stopReason` is not `toolUse`. A branch that ends with a `compaction` (ours or Pi's)
   is not a boundary: like the seed's host, whose next `agent_settled` comes after the
   next turn, an intent recorded meanwhile waits for the next finished turn instead of
   being dropped as "Already compacted";
2. no tool call of the last turn lacks its result (calls of `error`/`aborted` assistant
   messages are ignored: the provider transform drops those messages); and
3. the file has been quiet (mtime unchanged) for the interval; after an assistant
   message that ended in `error`, for at least `ERROR_QUIET_S`, because Pi may still be
   waiting to auto-retry.

The verdict depends only on the bytes and the mtime, so it is cached per
(size, mtime_ns, inode) by the caller.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Protocol

from fabric_lsp.engine.jsstr import is_json_array, is_json_object
from fabric_lsp.engine.session import SessionLog, SessionTree, parse_session_bytes

ERROR_QUIET_S = 30.0
METADATA_TYPES = frozenset({"label", "session_info", "custom", "model_change", "thinking_level_change"})
TURN_START_ROLES = frozenset({"user", "bashExecution", "custom"})


@dataclass(frozen=True)
class TurnVerdict:
    """Whether the branch ends a finished turn; `min_quiet_s` is the quiet time it needs."""

    finished: bool
    why: str
    leaf_id: str | None = None
    min_quiet_s: float = 0.0


class _Entry(Protocol):
    """A session entry record (`session.EntryRecord`) as read here: its raw JSON object."""

    @property
    def raw(self) -> dict[str, Any]: ...


def _message(rec: _Entry) -> dict[str, Any] | None:
    msg = rec.raw.get("message")
    return msg if is_json_object(msg) else None


def _tool_call_ids(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if not is_json_array(content):
        return []
    return [
        part["id"]
        for part in content
        if is_json_object(part) and part.get("type") == "toolCall" and isinstance(part.get("id"), str)
    ]


def finished_turn(log: SessionLog, quiet_interval_s: float = 0.0) -> TurnVerdict:
    """Rules 1 and 2 above on the persisted leaf's branch of `log`."""
    verdict = _verdict(log, quiet_interval_s, partial=False)
    assert verdict is not None
    return verdict


def _verdict(log: SessionLog, quiet_interval_s: float, *, partial: bool) -> TurnVerdict | None:
    """The verdict, or None when `partial` (only the file's tail was parsed) and the
    answer depends on entries before the tail."""
    if not log.is_session:
        return TurnVerdict(False, "not a Pi session file")
    tree = SessionTree.from_records(log.records)
    if tree.leaf_id is None:
        return None if partial else TurnVerdict(False, "no entries")
    branch = tree.branch()
    if branch.error is not None:
        return None if partial else TurnVerdict(False, f"parent graph is invalid ({branch.error})", tree.leaf_id)
    entries = branch.entries
    # In a tail, a walk that ends at an entry with a parent may continue before the tail.
    truncated = partial and (not entries or entries[0].parent_id is not None)
    i = len(entries) - 1
    while i >= 0 and entries[i].type in METADATA_TYPES:
        i -= 1
    if i < 0:
        return None if truncated else TurnVerdict(False, "no turn yet", tree.leaf_id)
    last = entries[i]
    if last.type == "compaction":
        return TurnVerdict(False, "the branch ends with a compaction: waiting for the next turn", tree.leaf_id)
    msg = _message(last) if last.type == "message" else None
    if msg is None or msg.get("role") != "assistant":
        return TurnVerdict(False, f"the branch ends with {last.type}/{(msg or {}).get('role')}", tree.leaf_id)
    stop = msg.get("stopReason")
    if stop == "toolUse":
        return TurnVerdict(
            False, "the last assistant message waits for tool results (stopReason toolUse)", tree.leaf_id
        )
    # Rule 2 over the last turn: from the last turn start to the end.
    start = i
    while start >= 0:
        m = _message(entries[start]) if entries[start].type == "message" else None
        if m is not None and m.get("role") in TURN_START_ROLES:
            break
        if entries[start].type in ("compaction", "branch_summary", "custom_message"):
            break
        start -= 1
    if start < 0 and truncated:
        return None
    open_calls: dict[str, None] = {}
    for rec in entries[max(start, 0) : i + 1]:
        m = _message(rec) if rec.type == "message" else None
        if m is None:
            continue
        role = m.get("role")
        if role == "assistant" and m.get("stopReason") not in ("error", "aborted"):
            for call_id in _tool_call_ids(m):
                open_calls[call_id] = None
        elif role == "toolResult" and isinstance(m.get("toolCallId"), str):
            open_calls.pop(m["toolCallId"], None)
    if open_calls:
        first = next(iter(open_calls))
        return TurnVerdict(False, f"tool call {first} has no result yet", tree.leaf_id)
    quiet = max(quiet_interval_s, ERROR_QUIET_S) if stop == "error" else quiet_interval_s
    return TurnVerdict(True, f"finished turn (stopReason {stop})", tree.leaf_id, quiet)


TAIL_WINDOW = 1 << 20


def tail_verdict(fd: int, size: int, quiet_interval_s: float = 0.0, window: int = TAIL_WINDOW) -> TurnVerdict | None:
    """The verdict from the header line plus the last `window` bytes of a file, without
    reading the rest; None when the file is small (parse it whole) or when the answer
    depends on entries before the tail. Reads with pread on `fd` (no seek)."""
    if size <= 2 * window:
        return None
    head = os.pread(fd, min(window, size), 0)
    nl = head.find(b"\n")
    if nl < 0:
        return None
    tail = os.pread(fd, window, size - window)
    cut = tail.find(b"\n")
    if cut < 0:
        return None
    log = parse_session_bytes(head[: nl + 1] + tail[cut + 1 :])
    return _verdict(log, quiet_interval_s, partial=True)
