"""Expansion of a few entries of a session of any size, in bounded memory.

`build_state` keeps every record of a session (the whole file's text, decoded); expand
needs only the requested ones. So the file is streamed twice in blocks (`sessions.scan_streaming` / `records_streaming`,
the same passes a large session's build uses): the first pass
scans line envelopes and hashes the bytes (the active lineage needs the last entry before
any record can be numbered), the second normalizes the lineage's lines in order through
one normalizer (numbering and session-wide state exactly as `build_state` has them) and
keeps only the selected records, counting how many records carry each requested id.

Memory: one block of the file, one scanned-line tuple per line, the selected records.
Invariant: the same records (same `index`, text and fields) as `build_state(…, "hot",
full config)` selects, for an unchanged file; a file that changes between or during the
passes raises SourceMissing("source_changed_during_index").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .entry_rows import records_streaming, scan_streaming
from .entry_text import Normalizer
from .source import Lineage, StatKey, lineage_from_lines, stat_key
from .state import SourceMissing

BLOCK_BYTES = 8 * 1024 * 1024


@dataclass
class Selection:
    indices: set[int] = field(default_factory=set[int])
    entry_ids: set[str] = field(default_factory=set[str])
    operation_addresses: set[str] = field(default_factory=set[str])
    entry_range: tuple[int, int] | None = None

    def wants(self, rec: dict[str, Any]) -> bool:
        rng = self.entry_range
        return (
            rec["index"] in self.indices
            or rec.get("entryId") in self.entry_ids
            or rec.get("operationAddress") in self.operation_addresses
            or (rng is not None and rng[0] <= rec["index"] <= rng[1])
        )


@dataclass
class Expansion:
    session_id: str
    source_hash: str
    lineage: Lineage
    key: StatKey
    entry_count: int
    selected: list[dict[str, Any]]
    id_counts: dict[str, int]
    op_counts: dict[str, int]


def expand_streaming(
    file: str,
    branches: str,
    ref_id: str,
    selection: Selection,
    *,
    cancel: Callable[[], None] | None = None,
    live_leaf: str | None = None,
    block_bytes: int = BLOCK_BYTES,
) -> Expansion:
    key = stat_key(file)
    if key is None:
        raise SourceMissing("source_unavailable")
    try:
        with open(file, "rb") as fh:
            scan, hasher, read = scan_streaming(fh, cancel, block_bytes)
    except OSError:
        raise SourceMissing("source_unavailable") from None
    if read != key.size or stat_key(file) != key:
        raise SourceMissing("source_changed_during_index")
    lineage = lineage_from_lines(scan.lines, branches, live_leaf)[0]  # (path ordinals: append bookkeeping only)
    session_id = scan.header_id if scan.header_id is not None else ref_id
    norm = Normalizer(file, scan.header_id or "", max_entry_chars=None, index_thinking=True, index_tool_output=True)
    selected: list[dict[str, Any]] = []
    id_counts: dict[str, int] = dict.fromkeys(selection.entry_ids, 0)
    op_counts: dict[str, int] = dict.fromkeys(selection.operation_addresses, 0)
    count = 0
    try:
        with open(file, "rb") as fh:
            for rec in records_streaming(
                fh, scan.lines, lineage.ordinals, norm, cancel=cancel, chunk_bytes=block_bytes
            ):
                count += 1
                eid, op = rec.get("entryId"), rec.get("operationAddress")
                if eid in id_counts:
                    id_counts[eid] += 1
                if op in op_counts:
                    op_counts[op] += 1
                if selection.wants(rec):
                    selected.append(rec)
    except OSError:
        raise SourceMissing("source_unavailable") from None
    del scan
    if stat_key(file) != key:
        raise SourceMissing("source_changed_during_index")
    return Expansion(session_id, hasher.hexdigest(), lineage, key, count, selected, id_counts, op_counts)
