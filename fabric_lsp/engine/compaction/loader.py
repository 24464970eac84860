"""Lean loader for previews: session bytes -> header + active branch entry dicts.

Same rules as `fabric_lsp.engine.session.read_session` + `SessionTree` (Pi's loader:
LF-separated lines, blank and malformed lines skipped, a half-written last line ignored,
the first parsed object must be the `{type:"session", id}` header, tree nodes need a
string id and a null-or-string parentId, duplicate ids resolve to the last record, the
persisted leaf is the last node in file order, a parent cycle stops the walk), but it
keeps only the raw dicts and never copies line bytes. Branch-summary previews use it;
compaction previews use `scan.py`, which follows the same line rules (`_Sink.line`) and
keeps no dict per entry. `tests/engine/compaction/test_compaction_properties.py` checks
it against the session package.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, Protocol, cast

import msgspec

from fabric_lsp.engine.native import NATIVE
from fabric_lsp.engine.session.reader import DEFAULT_MAX_LINE_BYTES, MAX_JSON_DEPTH, exceeds_json_depth, parse_json_line

from ..jsstr import first_line, is_blank, truncate_prefix_safe, utf16_len

if TYPE_CHECKING:
    import queue

    from ..json_types import JsonValue

IMAGE_CHARS = 4800

INVALID_PARENT_GRAPH = "invalid_parent_graph"


class ToolOutput:
    """Stands in for a successful tool result's `content` list after loading: the two
    things the compactor reads from that output, Pi's estimate character count and the
    transcript text `truncate(firstLine(text), 100)`. It replaces the list in place (a new
    key would grow every tool-result dict), and it is never a list, so readers that walk
    `content` parts see none."""

    __slots__ = ("chars", "line")

    def __init__(self, chars: int, line: str) -> None:
        self.chars = chars
        self.line = line

    def __eq__(self, other: object) -> bool:
        return type(other) is ToolOutput and (self.chars, self.line) == (other.chars, other.line)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:  # pragma: no cover
        return f"<tool output: {self.chars} chars>"


decode_json = msgspec.json.Decoder().decode


class LineCounts(Protocol):
    """What the loaders count while reading lines (`Loaded`, `scan.ScanFacts`'s reader)."""

    header: dict[str, Any] | None
    is_session: bool
    malformed: int
    oversize: int
    non_object: int
    no_id: int
    blank: int
    partial_tail_bytes: int
    size: int


# `line(data, pos, end, max_line_bytes, offset)`: one line `data[pos:end]` at file offset
LineFn = Callable[[memoryview, int, int, int, int], None]
# `node(value, id, parentId, offset, length)`: what a sink does with a line `read_node`
# found a tree node (`scan.Scanned`); the accelerator's line loop calls it directly
NodeFn = Callable[[dict[str, Any], str, "str | None", int, int], None]
# The accelerator's line loop (None: no accelerator, or one built from an older source)
_read_lines: Any = getattr(NATIVE, "read_lines", None)
_tool_output: Any = getattr(NATIVE, "tool_output", None)


class Loaded:
    __slots__ = (
        "header",
        "is_session",
        "nodes",
        "by_id",
        "leaf_id",
        "malformed",
        "oversize",
        "non_object",
        "no_id",
        "blank",
        "partial_tail_bytes",
        "size",
        "linear",
    )

    def __init__(self) -> None:
        self.header: dict[str, Any] | None = None
        self.is_session = False
        self.nodes: list[dict[str, Any]] = []
        self.by_id: dict[str, dict[str, Any]] = {}
        self.leaf_id: str | None = None
        self.malformed = self.oversize = self.non_object = self.no_id = self.blank = 0
        self.partial_tail_bytes = 0
        self.size = 0
        # every node's parent is the node before it (the usual unbranched session)
        self.linear = True

    def branch(self, leaf_id: str | None = None) -> tuple[str | None, list[dict[str, Any]], str | None]:
        """(leaf used, entries root→leaf, error) — unknown leaf falls back to the persisted leaf."""
        start = leaf_id if leaf_id is not None and leaf_id in self.by_id else self.leaf_id
        if start is None:
            return None, [], None
        by_id = self.by_id
        nodes = self.nodes
        if self.linear and start == self.leaf_id and len(by_id) == len(nodes) and nodes[0].get("parentId") not in by_id:
            # the walk from the last node visits every node once, back to the first,
            # whose parent is absent: the path is the node list itself
            return start, list(nodes), None
        # fast walk: a path longer than the number of ids means a cycle
        path: list[dict[str, Any]] = []
        cur: Any = start
        limit = len(by_id)
        while cur is not None:
            e = by_id.get(cur)
            if e is None:
                break
            path.append(e)
            if len(path) > limit:
                break
            cur = e.get("parentId")
        else:
            path.reverse()
            return start, path, None
        if len(path) <= limit:
            path.reverse()
            return start, path, None
        path = []
        seen: set[str] = set()
        error = None
        cur = start
        while cur is not None:
            e = by_id.get(cur)
            if e is None:
                break
            if cur in seen:
                error = INVALID_PARENT_GRAPH
                break
            seen.add(cur)
            path.append(e)
            cur = e.get("parentId")
        path.reverse()
        return start, path, error


_SIGNATURES = ("thinkingSignature", "textSignature", "thoughtSignature")


def _slim(value: dict[str, Any]) -> None:
    """Drop fields the compactor never reads, so a large session costs less memory:
    non-`fabric_exec` tool-result `details` (Pi's truncation copy of the output), opaque
    part signatures, image payloads (Pi's estimate counts a fixed 4800 chars per image)
    and usage costs. Nothing read by normalization, the cut, the estimate or QA is touched."""
    msg: JsonValue = value.get("message")
    if type(msg) is not dict:
        return
    role = msg.get("role")
    if "timestamp" in msg:  # the message-level epoch ms; entries keep their own ISO time
        del msg["timestamp"]
    if role == "toolResult":
        if "details" in msg and msg.get("toolName") != "fabric_exec":
            del msg["details"]
        if msg.get("isError") is not True:
            stub_output(msg)
        return
    if role == "assistant":
        if "responseId" in msg:
            del msg["responseId"]
        if "api" in msg:
            del msg["api"]
        usage: JsonValue = msg.get("usage")
        if type(usage) is dict and "cost" in usage:
            # only these feed calculateContextTokens; a fresh 5-key dict is far smaller
            # than the 8-key original (measured: 7 MB on the 50 MB benchmark session)
            msg["usage"] = {k: usage[k] for k in _USAGE_KEYS if k in usage}
        content: JsonValue = msg.get("content")
        if type(content) is list:
            for part in content:
                if type(part) is dict:
                    if "thinkingSignature" in part:
                        del part["thinkingSignature"]
                    if "textSignature" in part:
                        del part["textSignature"]
                    if "thoughtSignature" in part:
                        del part["thoughtSignature"]


_intern = sys.intern
_USAGE_KEYS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")


def stub_output(msg: dict[str, Any]) -> None:
    """Replace a successful tool result's output by what the compactor reads from it:
    Pi's estimate character count and the one transcript line
    `truncate(firstLine(text), 100)`. Only plain text/image parts are stubbed."""
    content: JsonValue = msg.get("content")
    if type(content) is not list or not content:
        return
    if _tool_output is None:
        stub_output_py(msg)
        return
    out = _tool_output(content, 100)  # `stub_output_py` in C (test_native_stub.py)
    if out is not None:
        chars, line, done = out
        msg["content"] = ToolOutput(chars, line if done else truncate_prefix_safe(line, 100))


def stub_output_py(msg: dict[str, Any]) -> None:
    """`stub_output` without the accelerator."""
    content: JsonValue = msg.get("content")
    if type(content) is not list or not content:
        return
    chars = 0
    texts: list[str] = []
    for part in content:
        if type(part) is not dict:
            return
        t = part.get("type")
        if t == "text":
            s = part.get("text")
            if type(s) is not str:
                return
            texts.append(s)
            chars += utf16_len(s)
        elif t == "image":
            chars += IMAGE_CHARS
        else:
            return
    line = ""
    for s in texts:  # firstLine of the "\n"-joined text
        if not is_blank(s):
            line = first_line(s)
            break
    msg["content"] = ToolOutput(chars, truncate_prefix_safe(line, 100))


def read_node(
    out: LineCounts, first: bool, data: memoryview | bytes, pos: int, end: int, *, max_line_bytes: int
) -> tuple[dict[str, Any] | None, str | None, str | None, bool]:
    """The line rules of every loader here, for the line `data[pos:end]`:
    `(value, eid, pid)` for a tree node (a dict with a string id and a null-or-string
    parentId), else `(None, None, None)` with the line counted in `out` (oversize, blank,
    malformed, non-object, no id), or taken as the session header when it is the `first`
    parsed value (`out.header`, `out.is_session`). Returns `first` as 4th item: False once
    a value was parsed."""
    if end - pos > max_line_bytes:
        out.oversize += 1
        return None, None, None, first
    try:
        value: JsonValue = decode_json(data[pos:end])
        # (a line no longer than the limit cannot hold more brackets than it)
        if end - pos > MAX_JSON_DEPTH and exceeds_json_depth(
            data.obj if isinstance(data, memoryview) else data, value, start=pos, end=end
        ):
            raise ValueError("nested too deep")  # the reader's rule: malformed
    except Exception:
        line = bytes(data[pos:end])
        if not line.strip():
            out.blank += 1
            return None, None, None, first
        ok, value = parse_json_line(line)
        if not ok:
            out.malformed += 1
            return None, None, None, first
    if first:
        if isinstance(value, dict) and value.get("type") == "session" and isinstance(value.get("id"), str):
            out.header = value
            out.is_session = True
            return None, None, None, False
    if not isinstance(value, dict):
        out.non_object += 1
        return None, None, None, False
    eid = value.get("id")
    pid = value.get("parentId", 0)
    if isinstance(eid, str) and (pid is None or isinstance(pid, str)):
        return value, eid, pid, False
    out.no_id += 1
    return None, None, None, False


class _Sink:
    __slots__ = ("out", "first", "slim")

    def __init__(self, out: Loaded, slim: bool) -> None:
        self.out = out
        self.first = True
        self.slim = slim

    def line(self, data: memoryview, pos: int, end: int, max_line_bytes: int, offset: int = 0) -> None:
        out = self.out
        value, eid, pid, self.first = read_node(out, self.first, data, pos, end, max_line_bytes=max_line_bytes)
        if value is None:
            return
        eid = cast(str, eid)  # (read_node: a string whenever value is a node)
        if self.slim:
            # a parent id and a call id each appear twice in a session: share them
            eid = value["id"] = _intern(eid)
            if pid is not None:
                value["parentId"] = _intern(pid)
            _slim(value)
        if out.linear and pid != out.leaf_id:
            out.linear = out.leaf_id is None
        out.nodes.append(value)
        out.by_id[eid] = value
        out.leaf_id = eid


def each_line(
    data: bytes,
    line: LineFn,
    *,
    max_line_bytes: int,
    check: Callable[[], object] | None = None,
    nodes: tuple[NodeFn, LineCounts, tuple[Any, ...] | None] | None = None,
) -> tuple[int, int]:
    """Feed every newline-terminated line of `data` to `line(view, pos, end, max_line_bytes,
    pos)`, checking `check` every 4096 lines; returns (bytes consumed, bytes of a trailing
    line without a newline, which Pi does not read). The one line loop of both loaders.
    `nodes`: (the sink's `node`, the sink with its `first`, its columns for the
    accelerator or None): the accelerator's loop (`_native.read_lines`) then runs it,
    handing plain node lines to `node` (or, for a common message, to those columns)."""
    mv = memoryview(data)
    n = len(data)
    pos = 0
    find = data.find
    count = 0
    if nodes is not None and _read_lines is not None:
        # (offsets are positions here: consumed == pos)
        node, owner, sink = nodes
        pos, _, count = _read_lines(
            data, mv, 0, 0, 0, max_line_bytes, MAX_JSON_DEPTH, decode_json, node, line, check, owner, sink
        )
        return pos, n - pos
    while pos < n:
        nl = find(b"\n", pos)
        if nl < 0:
            return pos, n - pos
        count += 1
        if check is not None and (count & 4095) == 0:
            check()
        line(mv, pos, nl, max_line_bytes, pos)
        pos = nl + 1
    return pos, 0


def load_session_bytes(
    data: bytes,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    check: Callable[[], object] | None = None,
    slim: bool = True,
) -> Loaded:
    out = Loaded()
    out.size, out.partial_tail_bytes = each_line(
        data, _Sink(out, slim).line, max_line_bytes=max_line_bytes, check=check
    )
    return out


def load_session_file(
    path: str,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    check: Callable[[], object] | None = None,
    slim: bool = True,
    chunk_size: int = 512 << 10,
) -> tuple[Loaded, str]:
    """Stream a session file (never holding all its bytes) and hash exactly what was read.
    Returns (loaded, sha256 hex of every byte read, partial tail included)."""
    out = Loaded()
    with open(path, "rb") as fp:
        digest = stream_hashed(
            fp, _Sink(out, slim).line, out, max_line_bytes=max_line_bytes, check=check, chunk_size=chunk_size
        )
    return out, digest


def stream_hashed(
    fp: IO[bytes],
    line: LineFn,
    out: LineCounts,
    *,
    max_line_bytes: int,
    check: Callable[[], object] | None,
    chunk_size: int,
    node: NodeFn | None = None,
    sink: tuple[Any, ...] | None = None,
) -> str:
    """Feed every complete line of the open file `fp` to `line(data, pos, end,
    max_line_bytes, offset)` and set `out.partial_tail_bytes` / `out.size`; returns the
    sha256 hex of every byte read. `node`, `sink`: the sink's `node` and its columns for
    the accelerator (see `each_line`; `out` is then the sink)."""
    import hashlib
    import queue
    import threading

    h = hashlib.sha256()
    # hashing runs on a second thread (hashlib releases the GIL on large buffers), so the
    # digest of exactly the bytes read costs no wall time next to decoding
    # bounded, so the reader never runs far ahead of the hasher with chunks in memory
    chunks: queue.Queue[bytes | None] = queue.Queue(maxsize=2)

    def hasher() -> None:
        while True:
            c = chunks.get()
            if c is None:
                return
            h.update(c)

    worker = threading.Thread(target=hasher, name="fabric-preview-hash", daemon=True)
    worker.start()
    try:
        _stream_fp(
            fp,
            line,
            out,
            chunks,
            max_line_bytes=max_line_bytes,
            check=check,
            chunk_size=chunk_size,
            node=node,
            sink=sink,
        )
    finally:
        chunks.put(None)
        worker.join()
    return h.hexdigest()


def _stream_fp(
    fp: IO[bytes],
    line: LineFn,
    out: LineCounts,
    chunks: queue.Queue[bytes | None],
    *,
    max_line_bytes: int,
    check: Callable[[], object] | None,
    chunk_size: int,
    node: NodeFn | None = None,
    sink: tuple[Any, ...] | None = None,
) -> None:
    buf = b""
    consumed = 0  # file offset of data[pos]
    count = 0
    dropped = -1  # >= 0 while skipping an oversize line: bytes skipped so far
    read_lines = _read_lines if node is not None else None
    while True:
        chunk = fp.read(chunk_size)
        if not chunk:
            break
        chunks.put(chunk)
        data = buf + chunk if buf else chunk
        buf = b""
        mv = memoryview(data)
        pos = 0
        find = data.find
        while True:
            if read_lines is not None and dropped < 0:
                # every complete line left in this chunk, in C (the same calls: `each_line`)
                pos, consumed, count = read_lines(
                    data,
                    mv,
                    pos,
                    consumed,
                    count,
                    max_line_bytes,
                    MAX_JSON_DEPTH,
                    decode_json,
                    node,
                    line,
                    check,
                    out,
                    sink,
                )
                break
            nl = find(b"\n", pos)
            if nl < 0:
                break
            count += 1
            if check is not None and (count & 4095) == 0:
                check()
            if dropped >= 0:
                out.oversize += 1
                consumed += dropped + nl + 1 - pos
                dropped = -1
            else:
                line(mv, pos, nl, max_line_bytes, consumed)
                consumed += nl + 1 - pos
            pos = nl + 1
        del mv
        rest = len(data) - pos
        if dropped >= 0:
            dropped += rest
        elif rest > max_line_bytes:
            dropped = rest
        elif rest:
            buf = data[pos:]
    out.partial_tail_bytes = dropped if dropped >= 0 else len(buf)
    out.size = consumed
