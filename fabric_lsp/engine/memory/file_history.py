"""Code-aware recall: what past Pi sessions did to one source file (`fabric/fileHistory`).

While a session is indexed (hot or cold, built, appended or derived), its `Normalizer`
feeds a `FileOpsCollector` every entry and the records it emitted. The collector keeps a
per-session table of typed file operations:

* a Pi `read` / `edit` / `write` tool call (an assistant `toolCall` part with a string
  `id` and a string `arguments.path`), completed by the `toolResult` with the same
  `toolCallId` (`isError === true` → failed);
* a Fabric execution-trace operation `pi.read` / `pi.edit` / `pi.write` (the records
  `entry_text.py` built through `fabric_payloads.read_execution_trace`, with typed
  `args.path` and the operation's own outcome).

Nothing is read from prose. A call whose result has not been written is pending and is
never answered. Paths are resolved against the session header's `cwd` and normalized
(`normalize_path`); they are compared whole, never by substring.

The table is persisted beside the V5 records (`<base>[.all].files.json`, sealed, with the
session's stat key and source hash) and trusted only for exactly that source, so a
cold session answers without reading its source and nothing stale is ever returned. It
has a bound of its own (`MAX_FILE_OPERATIONS` per session); reaching it is reported as
the coverage reason `max_file_operations`, never silently.
"""

from __future__ import annotations

import os
import posixpath
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote, urlparse

import msgspec

from fabric_lsp.engine.activity import ActivitySink, CancelToken, check, report
from fabric_lsp.engine.references import format_reference
from fabric_lsp.protocol import (
    FileHistoryParams,
    FileHistoryResult,
    FileHistorySession,
    FileOperation,
)
from fabric_lsp.protocol_results import index_coverage

from . import disk_cache, seal
from .tokenize import sort_lexical, utf16_key

if TYPE_CHECKING:
    from ..json_types import JsonObject, JsonValue
    from .state import SessionState


PI_FILE_TOOLS = frozenset({"read", "edit", "write"})
FABRIC_FILE_REFS = {"pi.read": "read", "pi.edit": "edit", "pi.write": "write"}
MAX_FILE_OPERATIONS = 100_000  # per session and branch mode
_RESOLVED_CACHE = 4096  # distinct path values a collector remembers the normalized form of
FILE_HISTORY_MAX_PAGE_SIZE = 200
FILE_HISTORY_DEFAULT_PAGE_SIZE = 50
RECORD_KIND = "fileOperations"


# ---- paths ------------------------------------------------------------------------------


def normalize_path(path: object, cwd: str | None = None) -> str | None:
    """The absolute, normalized form of `path` (relative paths are joined to `cwd`), or
    None when it cannot be made absolute (relative with no absolute `cwd`, or blank).

    `os.path.normpath` semantics (`.`, `..`, duplicate separators, trailing separator),
    plus: a leading `//` is one separator (POSIX lets it mean something else; Pi never
    does). Pure string work: no file system access, no symlink resolution, no `~`."""
    if not isinstance(path, str):
        return None
    path = path.strip()
    if not path or "\0" in path:
        return None
    if not posixpath.isabs(path):
        if not isinstance(cwd, str) or not posixpath.isabs(cwd.strip()):
            return None
        path = posixpath.join(cwd.strip(), path)
    out = posixpath.normpath(path)
    if out.startswith("//"):
        out = "/" + out.lstrip("/")
    return out


def path_of_target(path: object, uri: object) -> str:
    """The normalized absolute path a request names by `path` or `file:` `uri`; ValueError
    (naming the field) otherwise."""
    if (path is None) == (uri is None):
        raise ValueError("exactly one of `path` and `uri` is required")
    if uri is not None:
        if not isinstance(uri, str):
            raise ValueError("uri: must be a string")
        parsed = urlparse(uri)
        if parsed.scheme != "file":
            raise ValueError("uri: must be a file: URI")
        if parsed.netloc not in ("", "localhost"):
            raise ValueError("uri: must name a local file (no host)")
        raw = unquote(parsed.path)
        field = "uri"
    else:
        if not isinstance(path, str):
            raise ValueError("path: must be a string")
        raw = path
        field = "path"
    if not posixpath.isabs(raw.strip()):
        raise ValueError(f"{field}: must be an absolute path")
    out = normalize_path(raw)
    if out is None:
        raise ValueError(f"{field}: must be an absolute path")
    return out


# ---- the per-session table ----------------------------------------------------------------


class FileOp(msgspec.Struct, array_like=True):
    """One typed file operation (a row of the persisted table)."""

    path: str  # normalized, absolute
    action: str  # read | edit | write
    tool_name: str  # the Pi tool that carried it: read/edit/write or fabric_exec
    outcome: str | None  # succeeded | failed; None while the result is missing
    index: int  # the memory record's index (fabric/expand `indices`)
    entry_id: str | None  # the call's entry (a trace operation: its carrier)
    operation_address: str | None
    timestamp: Any
    tool_call_id: str | None
    operation_ref: str | None  # pi.read / pi.edit / pi.write for trace operations
    # the 0-based line of the entry in the session file (None: not known). A row of a
    # cache record written before this field has one element less: `load_record` rejects
    # it, so the table is rebuilt rather than read without lines.
    line: int | None = None


class FileOpsCollector:
    """The file operations of one session and branch mode, in record order. Fed by the
    `Normalizer` (see the module doc); extended in place on appends."""

    def __init__(
        self, cwd: str | None, ops: list[FileOp] | None = None, *, capped: bool = False, unresolved: int = 0
    ) -> None:
        self.cwd = cwd
        self.ops: list[FileOp] = ops or []
        self.capped = capped
        self.unresolved = unresolved  # relative paths with no absolute cwd
        # calls still waiting for their result (the latest call of an id wins, as Pi's map)
        self.pending: dict[str, FileOp] = {
            op.tool_call_id: op for op in self.ops if op.outcome is None and op.tool_call_id is not None
        }
        self._version = 0
        self._by_path: dict[str, list[FileOp]] | None = None
        self._by_path_version = -1
        # path value -> its normalized form (a session names the same few files again and
        # again); not part of the state: never pickled
        self._resolved: dict[str, str | None] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_resolved"] = {}
        return state

    # -- feeding ----------------------------------------------------------------------------

    def _add(self, op: FileOp) -> bool:
        if len(self.ops) >= MAX_FILE_OPERATIONS:
            self.capped = True
            return False
        self.ops.append(op)
        self._version += 1
        return True

    def _resolve(self, value: Any) -> str | None:
        if not isinstance(value, str) or not value.strip():
            return None
        resolved = self._resolved
        if value in resolved:
            out = resolved[value]
        else:
            out = normalize_path(value, self.cwd)
            if len(resolved) < _RESOLVED_CACHE:
                resolved[value] = out
        if out is None:
            self.unresolved += 1
        return out

    def observe(self, raw: JsonObject, message: JsonObject | None, records: list[JsonObject]) -> None:
        """Take what `raw` (one lineage-selected entry) says about files; `records` are the
        memory records the normalizer emitted for it (the entry's own first)."""
        if not records:
            return
        head = records[0]
        self.observe_entry(
            message,
            head.get("role"),
            head["index"],
            head.get("entryId"),
            head.get("timestamp"),
            children=records[1:] if len(records) > 1 else (),
            line=head.get("line"),
        )

    def observe_entry(
        self,
        message: JsonObject | None,
        role: Any,
        index: int,
        entry_id: str | None,
        ts: Any,
        *,
        children: Sequence[JsonObject] = (),
        line: int | None = None,
    ) -> None:
        """`observe` of an entry given as its own record's fields (role, index, entryId,
        timestamp, line) and its child records (a Fabric trace's operations)."""
        args: JsonValue
        if role == "assistant" and isinstance(message, dict):
            content: JsonValue = message.get("content")
            if not isinstance(content, list):
                return
            part: JsonValue
            for part in content:
                if not isinstance(part, dict) or part.get("type") != "toolCall":
                    continue
                name, call_id, args = part.get("name"), part.get("id"), part.get("arguments")
                if (
                    not isinstance(name, str)
                    or name not in PI_FILE_TOOLS
                    or not isinstance(call_id, str)
                    or not isinstance(args, dict)
                ):  # (a name may be any JSON value: a list is unhashable)
                    continue
                path = self._resolve(args.get("path"))
                if path is None:
                    continue
                op = FileOp(path, name, name, None, index, entry_id, None, ts, call_id, None, _line(line))
                if self._add(op):
                    self.pending[call_id] = op
        elif role == "toolResult" and isinstance(message, dict):
            call_id = message.get("toolCallId")
            if isinstance(call_id, str):
                op = self.pending.pop(call_id, None)
                if op is not None:
                    op.outcome = "failed" if message.get("isError") is True else "succeeded"
                    self._version += 1
            for rec in children:
                self._trace_operation(rec)

    def _trace_operation(self, rec: JsonObject) -> None:
        if rec.get("type") != "fabric_operation":
            return
        ref = rec.get("ref")
        action = FABRIC_FILE_REFS.get(ref) if isinstance(ref, str) else None
        if action is None or rec.get("toolName") != action:
            return
        op_obj: JsonValue = rec.get("operation")
        args: JsonValue = op_obj.get("args") if isinstance(op_obj, dict) else None
        if not isinstance(args, dict):
            return
        path = self._resolve(args.get("path"))
        if path is None:
            return
        outcome = "succeeded" if rec.get("outcome") == "succeeded" else "failed"
        self._add(
            FileOp(
                path,
                action,
                "fabric_exec",
                outcome,
                rec["index"],
                rec.get("parentEntryId"),
                rec.get("operationAddress"),
                rec.get("timestamp"),
                None,
                ref,
                _line(rec.get("line")),
            )
        )

    # -- reading ------------------------------------------------------------------------------

    def lookup(self, path: str) -> list[FileOp]:
        """Completed operations on exactly `path` (normalized), in record order."""
        if self._by_path is None or self._by_path_version != self._version:
            by_path: dict[str, list[FileOp]] = {}
            for op in self.ops:
                if op.outcome is not None:
                    by_path.setdefault(op.path, []).append(op)
            self._by_path, self._by_path_version = by_path, self._version
        return self._by_path.get(path, [])

    def reasons(self) -> set[str]:
        out: set[str] = set()
        if self.capped:
            out.add("max_file_operations")
        if self.unresolved:
            out.add("unresolved_relative_path")
        return out


def _line(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def c_observer(ops: FileOpsCollector | None) -> tuple[Any, Any, frozenset[str]]:
    """What the C feed and fold calls observe file operations with (`observe_entry`, the
    pending calls; None, None without a collector) and the file tools."""
    return (ops.observe_entry if ops is not None else None, ops.pending if ops is not None else None, PI_FILE_TOOLS)


def new_collector(cwd: str | None) -> FileOpsCollector:
    return FileOpsCollector(cwd)


class PackedFileOps:
    """The read-only table of a session that is never extended in place (a cold state
    built detached or loaded from the disk cache): its operations held as one encoded
    bytes object plus the set of paths they touch, instead of one Struct per operation.
    `lookup` decodes only for a path the session touched. Same answers as the collector
    it was made from (tests/engine/memory/test_file_history_packed.py)."""

    __slots__ = ("cwd", "capped", "unresolved", "paths", "data")

    def __init__(self, source: FileOpsCollector) -> None:
        self.cwd = source.cwd
        self.capped = source.capped
        self.unresolved = source.unresolved
        # interned: thousands of sessions touch the same few hundred paths
        self.paths = frozenset(sys.intern(op.path) for op in source.ops if op.outcome is not None)
        self.data = _packed_encoder.encode(source.ops)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # A builder child packs a cold table before sending it: the paths are interned
        # again on arrival (interning is per process).
        return (_unpickle_packed, (self.cwd, self.capped, self.unresolved, tuple(self.paths), self.data))

    @property
    def ops(self) -> list[FileOp]:
        return _packed_decoder.decode(self.data)

    def lookup(self, path: str) -> list[FileOp]:
        """Completed operations on exactly `path` (normalized), in record order."""
        if path not in self.paths:
            return []
        return [op for op in _packed_decoder.decode(self.data) if op.outcome is not None and op.path == path]

    def reasons(self) -> set[str]:
        out: set[str] = set()
        if self.capped:
            out.add("max_file_operations")
        if self.unresolved:
            out.add("unresolved_relative_path")
        return out


def _unpickle_packed(cwd: str, capped: bool, unresolved: int, paths: tuple[str, ...], data: bytes) -> PackedFileOps:
    table = PackedFileOps.__new__(PackedFileOps)
    table.cwd, table.capped, table.unresolved, table.data = cwd, capped, unresolved, data
    table.paths = frozenset(map(sys.intern, paths))
    return table


def packed(table: Any) -> Any:
    """`table` in its compact read-only form (a collector with no ops stays as it is)."""
    if isinstance(table, FileOpsCollector):
        return PackedFileOps(table)
    return table


# ---- the persisted table ------------------------------------------------------------------

_ops_decoder = msgspec.json.Decoder(list[FileOp])
# the packed in-memory form: MessagePack keeps every float exactly (inf included)
_packed_encoder = msgspec.msgpack.Encoder()
_packed_decoder = msgspec.msgpack.Decoder(list[FileOp])


def cache_name(session_file: str, branches: str) -> str:
    return disk_cache.cache_name(session_file, branches, RECORD_KIND)


def encode_record(state: SessionState) -> bytes:
    """The sealed cache record of `state.file_ops`, bound to the state's source identity."""
    ops = state.file_ops
    assert ops is not None
    key = state.key
    record: dict[str, Any] = {
        "cacheVersion": disk_cache.CACHE_VERSION,
        "kind": RECORD_KIND,
        "sessionFile": state.file,
        "branches": state.branches,
        "sourceHash": state.source_hash,
        "lineageFingerprint": state.lineage.fingerprint,
        "engine": disk_cache.ENGINE_FORMAT,
        "cacheBytes": 0,
        "cacheSourceRatio": 0,
        "statKey": key.as_list(),
        "cwd": ops.cwd,
        "capped": ops.capped,
        "unresolved": ops.unresolved,
        "operations": msgspec.Raw(msgspec.json.encode(ops.ops)),
    }
    return seal.apply_cache_metrics(record, state.size)


def load_record(data: bytes, state: SessionState) -> FileOpsCollector | None:
    """The table in `data` when it is a sealed record of ours for exactly `state`'s source
    (path, branch mode, stat key, source hash, lineage); None otherwise."""
    if not disk_cache.sealed(data):
        return None
    rec = disk_cache.decode_record(data)
    if rec is None:
        return None
    key = state.key
    expected = {
        "cacheVersion": disk_cache.CACHE_VERSION,
        "kind": RECORD_KIND,
        "sessionFile": state.file,
        "branches": state.branches,
        "sourceHash": state.source_hash,
        "lineageFingerprint": state.lineage.fingerprint,
        "engine": disk_cache.ENGINE_FORMAT,
        "cacheBytes": len(data),
        "statKey": key.as_list(),
    }
    for name, value in expected.items():
        if rec.get(name) != value or isinstance(rec.get(name), bool) != isinstance(value, bool):
            return None
    cwd, capped, unresolved = rec.get("cwd"), rec.get("capped"), rec.get("unresolved")
    if not (cwd is None or isinstance(cwd, str)) or not isinstance(capped, bool):
        return None
    if isinstance(unresolved, bool) or not isinstance(unresolved, int) or unresolved < 0:
        return None
    rows: JsonValue = rec.get("operations")
    width = len(FileOp.__struct_fields__)
    if not isinstance(rows, list):
        return None
    row: JsonValue
    for row in rows:
        if not isinstance(row, list) or len(row) != width:
            return None  # (a row of an older format: rebuilt, never read with fields missing)
    try:
        ops = msgspec.convert(rows, list[FileOp], strict=True)
    except msgspec.ValidationError:
        return None
    if len(ops) > MAX_FILE_OPERATIONS:
        return None
    return FileOpsCollector(cwd, ops, capped=capped, unresolved=unresolved)


# ---- the request --------------------------------------------------------------------------


# Reasons that only concern searchable text (truncated records, a cut vocabulary or
# digest): the file-operation tables are complete regardless.
TEXT_ONLY_REASONS = frozenset({"max_entry_chars", "max_cold_vocabulary_bytes", "max_cold_cache_bytes"})


def _session_reasons(coverage: dict[str, Any]) -> tuple[set[str], int]:
    """The index coverage's reasons that are not about one indexed session (those are
    taken per session), with no incomplete session counted yet."""
    per_session = {
        "invalid_parent_graph",
        "duplicate_entry_id",
        "duplicate_operation_address",
        "duplicate_branch_fact_address",
    } | TEXT_ONLY_REASONS
    return {r for r in coverage["reasons"] if r not in per_session}, 0


def _timestamp_key(ts: Any) -> tuple[int, float]:
    # newest first; entries without a usable timestamp sort last
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        return 0, -float(ts)
    return 1, 0.0


def _ref(session_id: str, entry_id: str | None) -> str | None:
    if entry_id is None:
        return None
    try:
        return format_reference(session_id, entry_id)
    except ValueError:
        return None


def _item(state: SessionState, op: FileOp) -> FileOperation:
    return FileOperation(
        session_id=state.session_id,
        session_file=state.file,
        cwd=state.cwd,
        entry_id=op.entry_id,
        index=op.index,
        line=op.line,
        operation_address=op.operation_address,
        action=op.action,  # type: ignore[arg-type]  # read | edit | write (the collector's)
        tool_name=op.tool_name,
        outcome=op.outcome,  # type: ignore[arg-type]  # lookup: completed operations only
        timestamp=op.timestamp,
        ref=_ref(state.session_id, op.entry_id),
        tool_call_id=op.tool_call_id,
        operation_ref=op.operation_ref,
    )


class IndexedSessions(Protocol):
    """What the file-history query asks of the memory engine (api.MemoryEngine)."""

    @property
    def lock(self) -> Any: ...

    def indexed_states(
        self, scope: str, cwd: str | None, branches: str, cancel: CancelToken | None, activity: ActivitySink | None
    ) -> tuple[list[SessionState], dict[str, Any]]: ...


def file_history(
    engine: IndexedSessions,
    params: FileHistoryParams,
    *,
    cwd: str | None = None,
    cancel: CancelToken | None = None,
    activity: ActivitySink | None = None,
) -> FileHistoryResult:
    """The `fabric/fileHistory` result: every completed read/edit/write of one path in the
    scoped sessions, newest first (timestamp, then session file, then record index),
    paged, with per-session counts and the index coverage (plus this table's reasons).
    `params` is decoded and checked by the wire contract (protocol.py)."""
    path = path_of_target(params.path, params.uri)
    scope, branches = params.scope, params.branches
    cwd = params.cwd or cwd
    page, page_size = params.page, params.page_size
    check(cancel)
    report(activity, "Reading file history")
    found: list[tuple[SessionState, FileOp, int]] = []
    with engine.lock:
        states, coverage = engine.indexed_states(scope, cwd, branches, cancel, activity)
        reasons, incomplete = _session_reasons(coverage)
        for st in states:
            table = st.file_ops
            mine: set[str] = set(st.coverage.get("reasons", ())) - TEXT_ONLY_REASONS
            if table is None:  # cannot happen for indexed states; never answer from nothing
                mine.add("index_error")
            else:
                mine |= table.reasons()
                for seq, op in enumerate(table.lookup(path)):
                    found.append((st, op, seq))
            if mine:
                incomplete += 1
                reasons |= mine
    found.sort(key=lambda t: (_timestamp_key(t[1].timestamp), utf16_key(t[0].file), -t[1].index, -t[2]))
    sessions: dict[str, FileHistorySession] = {}
    for st, op, _seq in found:
        row = sessions.get(st.file)
        if row is None:  # the first one seen is the session's newest operation
            sessions[st.file] = FileHistorySession(
                session_id=st.session_id,
                session_file=st.file,
                cwd=st.cwd,
                count=1,
                last_action=op.action,  # type: ignore[arg-type]  # read | edit | write
                last_timestamp=op.timestamp,
            )
        else:
            row.count += 1
    start = (page - 1) * page_size
    return FileHistoryResult(
        path=path,
        scope=scope,
        branches=branches,
        page=page,
        page_size=page_size,
        total_sessions=len(sessions),
        total_items=len(found),
        has_next=start + page_size < len(found),
        items=[_item(st, op) for st, op, _ in found[start : start + page_size]],
        sessions=list(sessions.values()),
        coverage=index_coverage(
            coverage,
            complete=coverage["staleSessions"] == 0 and not reasons,
            reasons=sort_lexical(reasons),
            incomplete_sessions=incomplete,
        ),
    )


def is_under(path: str, folder: str | None) -> bool:
    """Whether normalized `path` lies inside `folder` (whole path components)."""
    if not folder:
        return False
    root = normalize_path(os.fspath(folder))
    if root is None:
        return False
    return path == root or path.startswith(root.rstrip("/") + "/")
