from collections.abc import Callable
from typing import Any

def pieces(data: bytes | bytearray | memoryview, /) -> tuple[set[str], set[bytes]]: ...
def index_text(
    data: bytes | bytearray | memoryview, postings: dict[str, Any], base: int, pack: Callable[[list[int]], Any], /
) -> int | dict[str | bytes, int]: ...
def add_counts(
    postings: dict[str, Any], counts: dict[str, int], base: int, pack: Callable[[list[int]], Any], /
) -> None: ...
def hot_record(
    rec: dict[str, Any],
    base_keys: tuple[str, ...],
    kind_of: dict[tuple[Any, ...], int],
    kinds: list[tuple[Any, ...]],
    tbuf: bytearray,
    tend: Any,
    index: Any,
    line: Any,
    ts: Any,
    eid: Any,
    pid: Any,
    kind: Any,
    /,
) -> bool: ...
def gather_u32(values: Any, at: Any, /) -> bytes: ...
def count_newlines(data: bytes | bytearray | memoryview, /) -> int: ...
def tool_output(content: Any, max_units: int, /) -> tuple[int, str, bool] | None: ...
def feed_message(msg: Any, eid: Any, calls: Any, events: list[Any], tool_output: type, /) -> int | None: ...
def message_facts(msg: Any, kinds: dict[Any, tuple[Any, ...]], tool_output: type, /) -> tuple[Any, ...] | None: ...
def message_node(
    msg: Any,
    eid: Any,
    calls: Any,
    events: list[Any],
    kinds: dict[Any, tuple[Any, ...]],
    tool_output: type,
    truncate: Any,
    /,
) -> tuple[Any, ...] | None: ...
def plain_fields(
    raw: Any,
    message: Any,
    role: str,
    index_tool_output: bool,
    index_thinking: bool,
    limit: int | None,
    args_summary: Any,
    path_key: Any,
    entry_timestamp: Any,
    summary_limit: int,
    /,
) -> tuple[Any, ...] | None: ...
def args_summary(arguments: Any, limit: int, /) -> str | None: ...
def collect_paths(value: Any, out: dict[str, None], path_key: Any, /) -> bool: ...
def bm25_add(
    scores: dict[int, float], postings: Any, doc_len: Any, idf: float, k1p1: float, norm_a: float, norm_b: float, /
) -> bool: ...
def segment_keys(
    matched: dict[int, float],
    seg_of: Any,
    starts: list[int],
    neg_mtime: float,
    base_index: int,
    file_key: Any,
    vn: int,
    seq: int,
    /,
) -> list[tuple[Any, ...]] | None: ...
