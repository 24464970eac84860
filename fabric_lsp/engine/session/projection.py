"""Pi 1.x's model context: the projection (context edits applied, system messages as
Pi 1.x keeps them), its token estimate, and which Pi's rules a session follows.

Pi 0.80.6 and Pi 1.x (1.6.0) write the same header (`version: 3`), so the rules are
chosen by content (`session_rules`): a persisted `system` message, a `context_edit` or
`usage` entry, or a compaction carrying a `systemMessage` checkpoint is written only by
Pi 1.x (a 0.80.6 file that Pi 1.x continued gets a system message at its first new
request), so any of them selects the 1.x rules; otherwise the 0.80.6 rules apply,
byte-identical to what they were before Pi 1.x existed. The compaction setting
`piRules` ("auto" | "0.80" | "1.x") overrides the choice.

Everything here follows Pi 1.6.0's `buildContextEntries` / `buildSessionProjection`
(session-manager.js), `getCurrentSystemMessage` (pi-ai transcript.js) and
`estimateProjectedContextTokens` (compaction.js) over raw entry dicts root→leaf. The
compaction engine reads the same rules from its per-entry facts
(engine/compaction/pigate.py); this module is their plain reference and what every
other reader (commit, memory marks) uses.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from ..jsstr import js_keys
from .tokens import calculate_context_tokens, estimate_tokens_1x, js_truthy

if TYPE_CHECKING:
    from ..json_types import JsonValue

RULES_AUTO = "auto"
RULES_080 = "0.80"
RULES_1X = "1.x"
PI_RULES = (RULES_AUTO, RULES_080, RULES_1X)

# roles whose content a context edit's replacement replaces (others stay as they are)
EDITABLE_ROLES = frozenset(("user", "assistant", "toolResult", "custom"))
# entry types that end Pi 1.x's trust in an earlier assistant usage
_INVALIDATING = ("context_edit", "compaction")


# ---------------------------------------------------------------------------- rules


def is_pi1x_marker(entry: dict[str, Any]) -> bool:
    """Whether only Pi 1.x writes an entry like this one: a `system` message, a
    well-formed `context_edit` (string `targetId`, `replacement` null or an object) or
    `usage` entry (string `kind`, `usage` object), a compaction whose `systemMessage` is
    a system message. (A misshapen entry of those types proves nothing.)"""
    t = entry.get("type")
    if t == "message":
        m: JsonValue = entry.get("message")
        return isinstance(m, dict) and m.get("role") == "system"
    if t == "context_edit":
        return isinstance(entry.get("targetId"), str) and edit_action(entry) is not None
    if t == "usage":
        return isinstance(entry.get("kind"), str) and isinstance(entry.get("usage"), dict)
    if t == "compaction":
        sm: JsonValue = entry.get("systemMessage")
        return isinstance(sm, dict) and sm.get("role") == "system"
    return False


def resolve_rules(override: Any, marked: bool) -> str:
    """ "0.80" or "1.x": the override when it names one, else by content (`marked`: the
    session holds a Pi 1.x marker). ValueError for an override that is none of
    `PI_RULES` (None means "auto")."""
    if override is None or override == RULES_AUTO:
        return RULES_1X if marked else RULES_080
    if override in (RULES_080, RULES_1X):
        return str(override)
    raise ValueError(f'piRules must be "auto", "0.80" or "1.x", not {override!r}')


def session_rules(entries: Iterable[Any], override: Any = None) -> str:
    """The rules of a session (all its entries, any branch) — see `resolve_rules`."""
    if override is not None and override != RULES_AUTO:
        return resolve_rules(override, False)
    e: JsonValue
    marked = False
    for e in entries:
        if isinstance(e, dict) and is_pi1x_marker(e):
            marked = True
            break
    return resolve_rules(None, marked)


# ---------------------------------------------------------------------- context edits


def edit_action(entry: dict[str, Any]) -> str | None:
    """ "hide" for a `context_edit` whose replacement is null, "replace" for one whose
    replacement is an object, None otherwise (not an edit, or a replacement Pi could not
    apply: a missing one makes Pi throw, so it is ignored here)."""
    if entry.get("type") != "context_edit" or "replacement" not in entry:
        return None
    r: JsonValue = entry["replacement"]
    if r is None:
        return "hide"
    if isinstance(r, dict):
        return "replace"
    return None


def latest_edits(entries: Iterable[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    """targetId → the latest applicable `context_edit` among `entries` (in their order):
    Pi's `Map.set(targetId, edit)` over the context entries."""
    out: dict[Any, dict[str, Any]] = {}
    for e in entries:
        if edit_action(e) is None:
            continue
        target = e.get("targetId")
        try:
            out[target] = e
        except TypeError:  # an array/object targetId names no entry
            continue
    return out


def project_messages(messages: list[dict[str, Any]], edit: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Pi 1.x's `projectContextEntry`: no edit → the messages; a null replacement → none;
    otherwise each user/assistant/toolResult/custom message with its `content` replaced
    (a string becomes one text part for assistant and tool results)."""
    if edit is None:
        return messages
    action = edit_action(edit)
    if action is None:
        return messages
    if action == "hide":
        return []
    replacement: dict[str, Any] = edit["replacement"]
    content: JsonValue = replacement.get("content")
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role not in EDITABLE_ROLES:
            out.append(m)
            continue
        c: JsonValue = content
        if role in ("assistant", "toolResult") and isinstance(c, str):
            c = [{"type": "text", "text": c}]
        out.append({**m, "content": c})
    return out


# -------------------------------------------------------------------------- context


def entry_messages_1x(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Pi 1.x's `sessionEntryToContextMessages` for one entry."""
    etype = entry.get("type")
    if etype == "message":
        msg: JsonValue = entry.get("message")
        if not isinstance(msg, dict):
            return []
        role = msg.get("role")
        if msg.get("content") is None:
            if role == "system":
                return [{**msg, "content": ""}]
            if role in ("user", "assistant", "toolResult"):
                return [{**msg, "content": []}]
        return [msg]
    if etype == "custom_message":
        content: JsonValue = entry.get("content")
        return [
            {
                "role": "custom",
                "customType": entry.get("customType"),
                "content": content if content is not None else [],
                "display": entry.get("display"),
                "details": entry.get("details"),
                "timestamp": entry.get("timestamp"),
            }
        ]
    if etype == "branch_summary":
        if not js_truthy(entry.get("summary")):
            return []
        return [
            {
                "role": "branchSummary",
                "summary": entry.get("summary"),
                "fromId": entry.get("fromId"),
                "timestamp": entry.get("timestamp"),
            }
        ]
    if etype == "compaction":
        summary = {
            "role": "compactionSummary",
            "summary": entry.get("summary"),
            "tokensBefore": entry.get("tokensBefore"),
            "timestamp": entry.get("timestamp"),
        }
        checkpoint: JsonValue = entry.get("systemMessage")
        return [checkpoint, summary] if js_truthy(checkpoint) and isinstance(checkpoint, dict) else [summary]
    return []


def _is_system_entry(entry: dict[str, Any]) -> bool:
    m: JsonValue = entry.get("message") if entry.get("type") == "message" else None
    return isinstance(m, dict) and m.get("role") == "system"


def context_entries_1x(path: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pi 1.x's `buildContextEntries`: the latest compaction, the kept entries from its
    `firstKeptEntryId` without their system messages (the compaction's checkpoint holds
    them; none when the id is not found before it: "", its own id), then everything
    after it."""
    comp_idx = -1
    for i in range(len(path) - 1, -1, -1):
        if path[i].get("type") == "compaction":
            comp_idx = i
            break
    if comp_idx < 0:
        return list(path)
    comp = path[comp_idx]
    first_kept = comp.get("firstKeptEntryId")
    out = [comp]
    found = False
    for e in path[:comp_idx]:
        if e.get("id") == first_kept:
            found = True
        if found and not _is_system_entry(e):
            out.append(e)
    out.extend(path[comp_idx + 1 :])
    return out


class ProjectedEntry(NamedTuple):
    entry: dict[str, Any]  # the source entry, as written
    messages: list[dict[str, Any]]  # what it contributes to the model context


def build_projection(path: list[dict[str, Any]]) -> list[ProjectedEntry]:
    """Pi 1.x's `buildSessionProjection(path).entries`: each context entry with the
    messages it contributes after the latest edit of it (among the context entries) is
    applied; a compaction other than the latest one contributes nothing."""
    ctx = context_entries_1x(path)
    edits = latest_edits(ctx)
    out: list[ProjectedEntry] = []
    for k, e in enumerate(ctx):
        if e.get("type") == "compaction" and k > 0:
            out.append(ProjectedEntry(e, []))
            continue
        eid = e.get("id")
        try:
            edit = edits.get(eid)
        except TypeError:
            edit = None
        out.append(ProjectedEntry(e, project_messages(entry_messages_1x(e), edit)))
    return out


def projected_messages(path: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What Pi 1.x sends to the model for this branch (its `buildSessionContext`)."""
    return [m for pe in build_projection(path) for m in pe.messages]


# ------------------------------------------------------------------- system messages


def _content_text(content: JsonValue) -> str:
    """pi-ai's `contentText` (text parts joined with "\\n")."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        for p in content:
            if isinstance(p, dict) and p.get("type") == "text":
                t: JsonValue = p.get("text")
                texts.append(t if isinstance(t, str) else "")
        return "\n".join(texts)
    return ""


def current_system_message(messages: Iterable[Any]) -> dict[str, Any] | None:
    """pi-ai's `getCurrentSystemMessage`: every system message replayed into one —
    non-empty contents joined with a blank line, sections patched by name (null
    removes), tools resolved by name (removals, then additions, per message); the first
    system message's timestamp. None when there is no system message and no tool."""
    content: list[str] = []
    sections: dict[str, Any] = {}
    tools: dict[Any, Any] = {}
    timestamp: Any = None
    seen_ts = False
    m: JsonValue
    for m in messages:
        if not isinstance(m, dict) or m.get("role") != "system":
            continue
        if not seen_ts and m.get("timestamp") is not None:
            timestamp, seen_ts = m.get("timestamp"), True
        text = _content_text(m.get("content"))
        if text:
            content.append(text)
        secs: JsonValue = m.get("sections")
        if isinstance(secs, dict):
            for name in js_keys(secs):
                value = secs[name]
                if value is None:
                    sections.pop(name, None)
                else:
                    sections[name] = value
        removed: JsonValue = m.get("toolsRemoved")
        if isinstance(removed, list):
            for tool in removed:
                name = tool.get("name") if isinstance(tool, dict) else None
                try:
                    tools.pop(name, None)
                except TypeError:
                    pass
        added: JsonValue = m.get("toolsAdded")
        if isinstance(added, list):
            for tool in added:
                name = tool.get("name") if isinstance(tool, dict) else None
                try:
                    tools[name] = tool
                except TypeError:
                    pass
    if not seen_ts and not tools:
        return None
    out: dict[str, Any] = {"role": "system", "content": "\n\n".join(content)}
    if sections:
        out["sections"] = sections
    if tools:
        out["toolsAdded"] = list(tools.values())
    out["timestamp"] = timestamp if seen_ts else 0
    return out


def compaction_checkpoint(path: list[dict[str, Any]], timestamp_ms: int) -> dict[str, Any] | None:
    """The `systemMessage` Pi 1.x stores in a compaction appended at the end of `path`
    (the replayed system state before the append, stamped with the compaction's time);
    None when the branch has no system state (then Pi stores none either)."""
    current = current_system_message(projected_messages(path))
    if current is None:
        return None
    current["timestamp"] = timestamp_ms
    return current


# ----------------------------------------------------------------------- estimates


def _usage_of(m: dict[str, Any]) -> Any:
    """The context tokens of a valid assistant usage (Pi's getAssistantUsage), else None."""
    if m.get("role") != "assistant" or "usage" not in m:
        return None
    if m.get("stopReason") in ("aborted", "error"):
        return None
    u: JsonValue = m.get("usage")
    if not isinstance(u, dict) or not js_truthy(u):
        return None
    t = calculate_context_tokens(u)
    return t if t > 0 else None


def estimate_projected_context_tokens(path: list[dict[str, Any]]) -> Any:
    """Pi 1.x's `tokensBefore` (`estimateProjectedContextTokens`): the last valid
    assistant usage plus the estimates of the messages after it, when that usage was
    captured after the branch's last `context_edit` / `compaction`; otherwise a full
    estimate with the system messages counted once, replayed into one."""
    proj = build_projection(path)
    messages = [m for pe in proj for m in pe.messages]
    last = None
    for i in range(len(messages) - 1, -1, -1):
        if _usage_of(messages[i]) is not None:
            last = i
            break
    if last is not None:
        k = 0
        source_id: Any = None
        for pe in proj:
            nxt = k + len(pe.messages)
            if last < nxt:
                source_id = pe.entry.get("id")
                break
            k = nxt
        usage_at = -1
        if source_id:
            for i, e in enumerate(path):
                if e.get("id") == source_id:
                    usage_at = i
                    break
        invalid_at = -1
        for i in range(len(path) - 1, -1, -1):
            if path[i].get("type") in _INVALIDATING:
                invalid_at = i
                break
        if usage_at > invalid_at:
            total = _usage_of(messages[last]) + sum(estimate_tokens_1x(m) for m in messages[last + 1 :])
            return int(total) if float(total).is_integer() else total
    current = current_system_message(messages)
    tokens = estimate_tokens_1x(current) if current is not None else 0
    tokens += sum(estimate_tokens_1x(m) for m in messages if m.get("role") != "system")
    return tokens


# ----------------------------------------------------------------- branch summaries


def branch_summary_origin(entry: dict[str, Any], known_ids: Any) -> dict[str, str | None]:
    """What a `branch_summary`'s `fromId` says, under both meanings Pi gave it.

    Pi 0.80.6 writes the navigation target (= the entry's `parentId`, `"root"` when that
    is null); Pi ≥ 0.84.3 writes the leaf that was abandoned. So: `fromId` equal to the
    parent (or `"root"` with no parent) is the old meaning and says nothing about the
    abandoned leaf; a different `fromId` naming an entry of the session (`known_ids`
    supports `in`) is that abandoned leaf. Returns `{"targetId", "abandonedLeafId"}`
    (`targetId` = where the navigation went: the parent, None for the root)."""
    parent = entry.get("parentId")
    from_id = entry.get("fromId")
    target = parent if isinstance(parent, str) else None
    abandoned: str | None = None
    if isinstance(from_id, str) and from_id != (parent if parent is not None else "root"):
        try:
            if from_id in known_ids:
                abandoned = from_id
        except TypeError:
            pass
    return {"targetId": target, "abandonedLeafId": abandoned}


# ------------------------------------------------------------- marks for readers


class _EditEnvelope(msgspec.Struct):
    """The few fields `context_edit_marks` reads of a line (the rest is skipped)."""

    type: Any = None
    id: Any = None
    parentId: Any = None
    targetId: Any = None
    replacement: msgspec.Raw = msgspec.Raw(b"")


_edit_envelope = msgspec.json.Decoder(_EditEnvelope)
EDIT_NEEDLE = b'"context_edit"'


def context_edit_marks(
    data: bytes, *, leaf_id: str | None = None, branches: str = "active"
) -> dict[str, dict[str, str]]:
    """entry id → `{"editId", "state": "hidden" | "replaced"}` for every entry of the
    session in `data` that Pi 1.x hides (latest edit's replacement null) or whose content
    it replaces: what recall, expand and hovers show beside the entry, which they keep
    as written.

    The edits that count for an entry on the active branch (walked from `leaf_id` when it
    is an entry, else from the last entry, as Pi reads a file) are the edits on that
    branch, the latest winning; with `branches="all"`, an entry off the active branch
    takes the latest edit of it in file order. A session without the text
    `"context_edit"` costs one byte search."""
    if EDIT_NEEDLE not in data:
        return {}
    by_id: dict[str, tuple[Any, int]] = {}  # id -> (parentId, node number)
    edits: list[tuple[int, str, Any, str]] = []  # (node, edit id, target, state)
    last: str | None = None
    node = 0
    lines = data.split(b"\n")
    lines.pop()  # (the piece after the last newline is not an entry yet)
    for raw in lines:
        if not raw.strip():
            continue
        try:
            env = _edit_envelope.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            continue
        eid, pid = env.id, env.parentId
        if not isinstance(eid, str) or not (pid is None or isinstance(pid, str)) or env.type == "session":
            continue
        by_id[eid] = (pid, node)
        last = eid
        if env.type == "context_edit":
            r = bytes(env.replacement)
            state = "hidden" if r == b"null" else "replaced" if r[:1] == b"{" else None
            if state is not None and isinstance(env.targetId, str):
                edits.append((node, eid, env.targetId, state))
        node += 1
    if not edits:
        return {}
    start = leaf_id if leaf_id is not None and leaf_id in by_id else last
    on_path: dict[str, int] = {}  # id -> node of the record the walk took
    cur = start
    while cur is not None and cur in by_id and cur not in on_path:
        parent, n = by_id[cur]
        on_path[cur] = n
        cur = parent
    out: dict[str, dict[str, str]] = {}
    for n, eid, target, state in edits:  # file order: the latest wins
        if eid in on_path and on_path[eid] == n:
            if target in on_path:
                out[target] = {"editId": eid, "state": state}
        elif branches == "all" and target not in on_path:
            out[target] = {"editId": eid, "state": state}
    return out


_marks_cache: dict[tuple[Any, ...], dict[str, dict[str, str]]] = {}
_MARKS_CACHE_SIZE = 64


def file_context_edit_marks(
    path: str, *, source_hash: str | None = None, leaf_id: str | None = None, branches: str = "active"
) -> dict[str, dict[str, str]] | None:
    """`context_edit_marks` of a session file, remembered per (file identity, leaf,
    branches). None when the file cannot be read or no longer hashes to `source_hash`
    (the reader's view is older than the file: no marks rather than wrong ones); a file
    without the text `"context_edit"` has no marks whatever its bytes, so it is not
    hashed (the first recall over many sessions reads each shown one)."""
    import hashlib
    import os

    try:
        st = os.stat(path)
    except OSError:
        return None
    # the path as given (no `realpath`: a lstat per path component on every recall) and
    # the file's identity and version
    key = (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, leaf_id, branches, source_hash)
    hit = _marks_cache.get(key)
    if hit is not None:
        return hit
    try:
        with open(path, "rb") as fp:
            data = fp.read()
    except OSError:
        return None
    if EDIT_NEEDLE not in data:
        marks: dict[str, dict[str, str]] = {}
    elif source_hash is not None and hashlib.sha256(data).hexdigest() != source_hash:
        return None
    else:
        marks = context_edit_marks(data, leaf_id=leaf_id, branches=branches)
    if len(_marks_cache) >= _MARKS_CACHE_SIZE:
        _marks_cache.pop(next(iter(_marks_cache)))
    _marks_cache[key] = marks
    return marks


_CHILD_TYPES = ("fabric_operation", "fabric_branch_fact")


def mark_records(records: Iterable[dict[str, Any]], marks: dict[str, dict[str, str]] | None) -> None:
    """Add `contextEdit` to each memory record dict (recall segment entry, expand item)
    whose entry — for a Fabric operation or branch fact, its carrier entry — Pi 1.x
    hides or replaces (`context_edit_marks`). The record is otherwise unchanged."""
    if not marks:
        return
    for rec in records:
        eid = rec.get("entryId")
        if rec.get("type") in _CHILD_TYPES:
            carrier = rec.get("parentEntryId")
            eid = carrier if isinstance(carrier, str) else eid.split("/", 1)[0] if isinstance(eid, str) else None
        mark = marks.get(eid) if isinstance(eid, str) else None
        if mark is not None:
            rec["contextEdit"] = dict(mark)
