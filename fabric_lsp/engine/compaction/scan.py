"""Reading a session for a compaction preview without one dict per entry.

Pass 1 (`scan_session_file` / `scan_session_bytes`) reads every line once with the
loaders' line rules (`loader.read_node`: the same decoding, header, id and parent checks
and counts) and keeps of each entry its id (one 8-byte cell), where its line is, whether
its parent is the entry before it in the file, and its `facts.Facts` (kind, token
estimate, and for the few entries that have them usage, tool-call ids, compaction
fields). It also normalizes the entry at once, in file order (`_Speculative`), and drops
the dict: what stays grows with the normalized events (the same the compile step needs)
and by a few dozen bytes per entry.

The branch is then resolved on the id cells exactly as `Loaded.branch` does (the last
record of a duplicated id wins, an unknown leaf falls back to the persisted one, a parent
cycle stops the walk). Pass 1's events are the branch's own when the file is the branch,
or when the branch's entries are in file order and no tool result on it paired with a
call from another branch; otherwise `ScanFacts.entries` decodes the branch's entries
again, one at a time, when the compile step asks for them (pass 2). A file is read
through the same open file in both passes; a line whose bytes changed in between (an
in-place rewrite) raises `SourceChanged`.
"""

from __future__ import annotations

import operator
import os
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from itertools import accumulate, repeat
from typing import IO, TYPE_CHECKING, Any, cast

from fabric_lsp.engine.session.reader import DEFAULT_MAX_LINE_BYTES, parse_json_line

from ..jsstr import truncate_prefix_safe
from ..native import NATIVE
from .facts import COMPACTION, EVENT_TYPES, MESSAGE_KINDS, OTHER, SYSTEM_KIND, Facts, facts_of, message_facts
from .id_table import IdTable
from .loader import (
    INVALID_PARENT_GRAPH,
    LineFn,
    NodeFn,
    ToolOutput,
    decode_json,
    each_line,
    read_node,
    stream_hashed,
    stub_output,
)
from .normalize import Normalizer, number_events

if TYPE_CHECKING:
    from ..json_types import JsonValue

    Runs = list[tuple[int, int]]  # node ranges [a, b), root→leaf


# a common message node's stub, facts and events in one C call (`Scanned._sink`)
_message_node: Any = getattr(NATIVE, "message_node", None)


def _truncate_line(line: str) -> str:
    return truncate_prefix_safe(line, 100)  # (the stub's line, `stub_output`)


class SourceChanged(Exception):
    """The session file changed between the two passes of a preview."""


class _FileLines:
    """Lines of an open file by (offset, length), read forward in 1 MiB windows."""

    __slots__ = ("fd", "buf", "start")
    CHUNK = 1 << 20

    def __init__(self, fp: IO[bytes]) -> None:
        self.fd = fp.fileno()
        self.buf = b""
        self.start = 0

    def read(self, off: int, n: int) -> memoryview | bytes:
        b = self.start
        buf = self.buf
        if b <= off and off + n <= b + len(buf):
            return memoryview(buf)[off - b : off - b + n]
        if n >= self.CHUNK:
            data = os.pread(self.fd, n, off)
        else:
            self.buf = buf = os.pread(self.fd, self.CHUNK, off)
            self.start = off
            data = memoryview(buf)[:n]
        if len(data) != n:
            raise SourceChanged("the session file is shorter than when it was read")
        return data


class _BytesLines:
    __slots__ = ("mv",)

    def __init__(self, data: bytes) -> None:
        self.mv = memoryview(data)

    def read(self, off: int, n: int) -> memoryview:
        return self.mv[off : off + n]


def _stub(entry: dict[str, Any]) -> None:
    """A successful tool result's output becomes the loader's `ToolOutput` (its estimate
    characters and transcript line): its events then hold one line, not the output."""
    if entry.get("type") == "message":
        m: JsonValue = entry.get("message")
        if type(m) is dict and m.get("role") == "toolResult" and m.get("isError") is not True:
            stub_output(m)


def decode_again(line: memoryview | bytes) -> JsonValue:
    """The value pass 1 decoded from these bytes (they already passed its checks)."""
    try:
        return decode_json(line)
    except Exception:
        ok, value = parse_json_line(bytes(line))
        return value if ok else None


# dict's own methods (the map below overrides both), typed for a map of str keys
_dict_setitem = dict[str, Any].__setitem__
_dict_get = dict[str, Any].get


class _Calls(dict[str, Any]):
    """Normalization's pending-call map during pass 1, noting which node supplied each
    call a tool result paired with (so the pairing can be checked against the branch)."""

    __slots__ = ("node", "owners", "users", "suppliers")

    def __init__(self) -> None:
        super().__init__()
        self.node = 0
        self.owners: dict[str, int] = {}
        self.users = array("l")
        self.suppliers = array("l")

    def __setitem__(self, key: str, value: Any) -> None:
        _dict_setitem(self, key, value)
        self.owners[key] = self.node

    def get(self, key: Any, default: Any = None) -> Any:
        value = _dict_get(self, key, default)
        if value is not None:
            self.users.append(self.node)
            self.suppliers.append(self.owners[key])
        return value


class _Speculative:
    """Pass 1 normalizes every node in file order. For an unbranched file that is the
    branch's own normalization; for a branch whose nodes are in file order it is too,
    as long as no tool result paired with a call from outside the branch (`valid`).
    Otherwise pass 2 normalizes the branch from its lines."""

    __slots__ = ("nz", "calls", "starts", "thinking")

    def __init__(self) -> None:
        self.calls = _Calls()
        self.nz = Normalizer(calls=self.calls)
        self.starts = array("i")  # node -> index of its first event
        self.thinking: dict[int, int] = {}  # node -> erased thinking blocks

    def events(self, runs: Runs | None, stop: int, stats: dict[str, Any] | None) -> list[dict[str, Any]] | None:
        """The normalized events of branch positions [0, stop) (`runs` = their nodes as
        ranges, None when the branch is every node), or None when pass 1's normalization
        is not the branch's."""
        events = self.nz.events
        starts = self.starts
        n = len(starts)
        if runs is None:
            runs = [(0, n)]
        prefix: Runs = []
        left = stop
        for a, b in runs:  # the runs of positions [0, stop)
            if left <= 0:
                break
            b = min(b, a + left)
            prefix.append((a, b))
            left -= b - a
        if any(p[1] > q[0] for p, q in zip(prefix, prefix[1:])):
            return None  # not in file order
        on = bytearray(n)
        for a, b in prefix:
            on[a:b] = b"\x01" * (b - a)
        calls = self.calls
        for u, supplier in zip(calls.users, calls.suppliers):
            if on[u] and not on[supplier]:
                return None  # paired with a call from another branch
        out: list[Any] = []
        for a, b in prefix:
            out.extend(events[starts[a] : starts[b] if b < n else len(events)])
        if stats is not None:
            stats["thinking"] = sum(v for k, v in self.thinking.items() if on[k])
        return number_events(out)


class ScanFacts(Facts):
    """Facts of a scanned session's nodes (file order) or of one branch (root→leaf),
    with the ids and line positions to decode an entry again."""

    __slots__ = ("ids", "offsets", "lengths", "lines", "spec", "runs")

    def __init__(self) -> None:
        super().__init__()
        self.ids = IdTable()
        self.offsets: Any = array("q")
        self.lengths: Any = array("i")
        self.lines: Any = None  # a _FileLines or _BytesLines once the scan set it
        self.spec: _Speculative | None = None
        self.runs: Runs | None = None  # the positions' nodes as ranges (None: position = node)

    def id(self, i: int) -> str:
        return self.ids.get(i)

    def index(self, entry_id: Any, stop: int | None = None) -> int:
        return self.ids.find(entry_id, stop)

    def rindex(self, entry_id: Any, stop: int | None = None) -> int:
        return self.ids.rfind(entry_id, stop)

    def entry(self, i: int, stub: bool = False) -> dict[str, Any]:
        value = decode_again(self.lines.read(self.offsets[i], self.lengths[i]))
        if type(value) is not dict or value.get("id") != self.ids.get(i):
            raise SourceChanged("the session file changed while the preview read it")
        if stub:
            _stub(value)
        return value

    def entries(self, stop: int) -> Iterator[dict[str, Any]]:
        kinds = self.kinds
        for i in range(stop):
            if kinds[i][0] in EVENT_TYPES:
                yield self.entry(i, stub=True)

    def events(
        self, stop: int, check: Callable[[], object] | None = None, stats: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        spec = self.spec
        if spec is not None:
            out = spec.events(self.runs, stop, stats)
            if out is not None:
                return out
        return super().events(stop, check, stats)

    def gather(self, runs: Runs) -> ScanFacts:
        """The facts of the nodes in `runs` (disjoint node ranges (a, b), root→leaf), as
        positions 0..len-1."""
        out = ScanFacts()
        for a, b in runs:
            out.kinds += self.kinds[a:b]
            out.tokens += self.tokens[a:b]
            out.offsets += self.offsets[a:b]
            out.lengths += self.lengths[a:b]
        out.ids = self.ids.gather(runs)
        out.lines = self.lines
        out.spec = self.spec
        out.runs = runs
        # the sparse maps (keyed in node order): a node's position is its run's first
        # position plus its offset in the run
        firsts = list(accumulate([0] + [b - a for a, b in runs]))
        pairs: list[tuple[dict[int, Any], dict[int, Any]]] = [
            (self.usage, out.usage),
            (self.spans, out.spans),
            (self.compactions, out.compactions),
            (self.deferred, out.deferred),
            (self.systems, out.systems),
            (self.edits, out.edits),
            (self.checkpoints, out.checkpoints),
        ]
        out.pi1x = self.pi1x  # (a marker anywhere in the file)
        for src, dst in pairs:
            if not src:
                continue
            keys = sorted(src)  # (already in node order)
            for (a, b), pos in zip(runs, firsts):
                lo, hi = bisect_left(keys, a), bisect_left(keys, b)
                if lo < hi:
                    some = keys[lo:hi]
                    dst.update(zip(map(operator.add, some, repeat(pos - a)), map(src.__getitem__, some)))
        return out


class Scanned:
    """Pass 1 of a session: the header, the read counts and every node's facts."""

    __slots__ = (
        "header",
        "is_session",
        "nodes",
        "parents",
        "malformed",
        "oversize",
        "non_object",
        "no_id",
        "blank",
        "partial_tail_bytes",
        "size",
        "fp",
        "line",
        "node",
        "sink",
        "first",
    )

    def __init__(self) -> None:
        self.header: dict[str, Any] | None = None
        self.is_session = False
        self.nodes = ScanFacts()
        self.nodes.spec = _Speculative()
        # parentId of every node whose parent is not the node before it in file order
        self.parents: dict[int, str | None] = {}
        self.malformed = self.oversize = self.non_object = self.no_id = self.blank = 0
        self.partial_tail_bytes = 0
        self.size = 0
        self.fp: IO[bytes] | None = None
        self.first = True  # no value read yet (`read_node`'s `first`)
        self.line, self.node, self.sink = self._sink()

    def _sink(self) -> tuple[LineFn, NodeFn, tuple[Any, ...] | None]:
        """The pass-1 sink `line(data, pos, end, max_line_bytes, offset)`: the loaders'
        line rules (`loader.read_node`), then `node(value, id, parentId, offset, length)`:
        the node's id, line, facts and speculative events (the accelerator's line loop
        calls `node` itself for a line that is plainly a node: `loader.read_nodes`), and
        the columns and maps `node` fills, for the accelerator's loop to fill them itself
        for a node that is a common message (`_native.read_lines`' sink; None without the
        accelerator)."""
        nodes = self.nodes
        kinds = nodes.kinds
        kinds_append = kinds.append
        tokens_append = nodes.tokens.append
        usage, spans, comps, deferred_d = nodes.usage, nodes.spans, nodes.compactions, nodes.deferred
        ids_append = nodes.ids.append
        blob_extend = nodes.ids.blob.extend
        offsets_append = nodes.offsets.append
        lengths_append = nodes.lengths.append
        parents = self.parents
        spec = nodes.spec
        assert spec is not None
        nz = spec.nz
        events = nz.events
        feed = nz.feed
        calls = spec.calls
        starts_append = spec.starts.append
        thinking = spec.thinking
        add_pi1x = nodes.add_pi1x
        message_node = _message_node
        last: list[Any] = [None]  # the previous node's id

        def node(value: dict[str, Any], eid: str, pid: str | None, offset: int, length: int) -> None:
            i = len(kinds)
            if i == 0 or pid != last[0]:
                parents[i] = pid
            last[0] = eid
            if len(eid) == 8 and eid.isascii():  # IdTable.append
                blob_extend(eid.encode("ascii"))
            else:
                ids_append(eid)
            offsets_append(offset)
            lengths_append(length)
            # the node's facts (as Facts.add, with the tool-call argument lengths deferred)
            done: Any = None
            at = seen = 0
            if value.get("type") == "message":
                m: JsonValue = value.get("message")
                if message_node is not None and type(m) is dict:
                    # the stub, facts and events below in one C call (test_native_feed.py)
                    calls.node = i
                    at = len(events)
                    done = message_node(m, eid, calls, events, MESSAGE_KINDS, ToolOutput, _truncate_line)
                if done is not None:
                    kind, tokens, u, sp, deferred, seen = done
                    comp = None
                else:
                    if type(m) is dict and m.get("role") == "toolResult" and m.get("isError") is not True:
                        stub_output(m)  # as `_stub`: its events keep one line of the output
                    kind, tokens, u, sp, comp, deferred = message_facts(value, True)
            else:
                kind, tokens, u, sp, comp, deferred = facts_of(value, True)
            kinds_append(kind)
            tokens_append(tokens)
            if u is not None:
                usage[i] = u
            if sp is not None:
                spans[i] = sp
            if comp is not None:
                comps[i] = comp
            if deferred is not None:
                deferred_d[i] = deferred
            if done is not None:  # (its events are fed: a user, assistant or tool result message)
                starts_append(at)
                if seen:
                    nz.thinking += seen
                    thinking[i] = seen
                return
            if kind is SYSTEM_KIND or kind[0] is OTHER or kind[0] is COMPACTION:
                add_pi1x(i, value, kind)  # Pi 1.x markers, system estimates, context edits
            # speculative normalization (`_Speculative`; other entry types have no events)
            starts_append(len(events))
            if kind[0] in EVENT_TYPES:
                calls.node = i
                before = nz.thinking
                feed(value)
                if nz.thinking != before:
                    thinking[i] = nz.thinking - before

        def line(data: memoryview, pos: int, end: int, max_line_bytes: int, offset: int) -> None:
            value, eid, pid, self.first = read_node(self, self.first, data, pos, end, max_line_bytes=max_line_bytes)
            if value is not None:
                node(value, cast(str, eid), pid, offset, end - pos)  # (read_node: eid a str for a node)

        sink = None
        if message_node is not None:  # (in the order `_native.read_lines` reads them)
            columns = (kinds, nodes.tokens, usage, spans, deferred_d, nodes.ids.blob, ids_append, nodes.offsets)
            pairing = (nodes.lengths, parents, last, calls, calls.owners, calls.users, calls.suppliers, events)
            sink = columns + pairing + (spec.starts, thinking, nz, MESSAGE_KINDS, ToolOutput, _truncate_line)
        return line, node, sink

    # -- the branch
    @property
    def leaf_id(self) -> str | None:
        n = len(self.nodes)
        return self.nodes.ids.get(n - 1) if n else None

    def has_id(self, entry_id: Any) -> bool:
        return self.nodes.ids.find(entry_id) >= 0

    def branch(self, leaf_id: str | None = None) -> tuple[str | None, ScanFacts, str | None]:
        """(leaf used, the branch's facts root→leaf, error), as `Loaded.branch`."""
        nodes = self.nodes
        ids = nodes.ids
        n = len(nodes)
        persisted = self.leaf_id
        start_idx = ids.rfind(leaf_id) if leaf_id is not None else -1
        if start_idx < 0:
            if persisted is None:
                empty = ScanFacts()
                empty.lines = nodes.lines
                return None, empty, None
            start_idx = n - 1
            start = persisted
        else:
            start = leaf_id
        parents = self.parents
        dups = ids.has_duplicates()
        if start_idx == n - 1 and len(parents) == 1 and not dups:
            first_parent = parents[0]
            if first_parent is None or ids.find(first_parent) < 0:
                return start, nodes, None  # the walk visits every node, back to the first
        runs, cycle = self._walk_runs(start_idx) if not dups else self._walk(start_idx)
        return start, nodes.gather(runs), INVALID_PARENT_GRAPH if cycle else None

    def _walk_runs(self, start: int) -> tuple[Runs, bool]:
        """`_walk` when no id is duplicated: a node whose parent is the node before it in
        the file continues the current run, so the walk jumps run by run."""
        nodes = self.nodes
        ids = nodes.ids
        parents = self.parents
        keys = sorted(parents)  # node 0 is one: every run ends at a key
        seen = bytearray(len(nodes))
        runs: Runs = []
        scanned = 0  # cells the parent searches passed over
        by_cell: dict[int | None, int] | None = None
        n = len(nodes)
        cur = start
        cycle = False
        while True:
            k = keys[bisect_right(keys, cur) - 1]  # the run cur, cur - 1, ..., k
            j = seen.rfind(1, k, cur + 1)
            if j >= 0:  # the walk comes back to node j: stop before repeating it
                if j < cur:
                    runs.append((j + 1, cur + 1))
                cycle = True
                break
            seen[k : cur + 1] = b"\x01" * (cur + 1 - k)
            runs.append((k, cur + 1))
            pid = parents[k]
            if pid is None:
                break
            if by_cell is None:
                nxt = ids.find_near(pid, k)  # unique: first = last
                scanned += abs(k - nxt) if nxt >= 0 else n
                if scanned > 16 * n + 4096:  # far parents: one map of every cell instead
                    by_cell = dict(zip(ids.cell_numbers(), range(n)))
            else:
                nxt = by_cell.get(ids.cell_number(pid), -1)
            if nxt < 0:
                break
            cur = nxt
        runs.reverse()
        return runs, cycle

    def _walk(self, start: int) -> tuple[Runs, bool]:
        """(the nodes root→start as runs, whether the walk met a parent cycle and stopped
        before repeating). A parent id resolves to the last node with that id."""
        nodes = self.nodes
        ids = nodes.ids
        parents = self.parents
        n = len(nodes)
        by_id = {ids.get(j): j for j in range(n)}
        seen = bytearray(n)
        path: list[Any] = []
        cur = start
        cycle = False
        while True:
            if seen[cur]:
                cycle = True
                break
            seen[cur] = 1
            path.append(cur)
            pid = parents[cur] if cur in parents else ids.get(cur - 1)
            if pid is None:
                break
            cur = by_id.get(pid, -1)
            if cur < 0:
                break
        path.reverse()
        runs: Runs = []
        for j in path:
            if runs and runs[-1][1] == j:
                runs[-1] = (runs[-1][0], j + 1)
            else:
                runs.append((j, j + 1))
        return runs, cycle


def _pass_one_over(*_: Any) -> None:
    """A scan's sink once pass 1 is over. The sink's closures hold the scan, so keeping them
    would make the scan a reference cycle: it would outlive the preview until the cyclic
    GC traverses all its objects (12 ms for a 50 MB session) instead of being freed when
    the preview lets go of it."""
    raise RuntimeError("pass 1 of this scan is over")


def scan_session_bytes(
    data: bytes, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, check: Callable[[], object] | None = None
) -> Scanned:
    out = Scanned()
    out.nodes.lines = _BytesLines(data)
    try:
        out.size, out.partial_tail_bytes = each_line(
            data, out.line, max_line_bytes=max_line_bytes, check=check, nodes=(out.node, out, out.sink)
        )
    finally:
        out.line, out.node, out.sink = _pass_one_over, _pass_one_over, None
    return out


def scan_session_file(
    path: str,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    check: Callable[[], object] | None = None,
    chunk_size: int = 512 << 10,
) -> tuple[Scanned, str]:
    """Pass 1 over a file, hashing exactly the bytes read. The file stays open for pass 2
    (`Scanned.fp`); the caller closes it."""
    out = Scanned()
    fp = open(path, "rb")
    try:
        digest = stream_hashed(
            fp,
            out.line,
            out,
            max_line_bytes=max_line_bytes,
            check=check,
            chunk_size=chunk_size,
            node=out.node,
            sink=out.sink,
        )
    except BaseException:
        fp.close()
        raise
    finally:
        out.line, out.node, out.sink = _pass_one_over, _pass_one_over, None
    out.fp = fp
    out.nodes.lines = _FileLines(fp)
    return out, digest
