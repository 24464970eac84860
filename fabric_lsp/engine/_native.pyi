from collections.abc import Callable
from typing import Any

def pieces(data: bytes | bytearray | memoryview, /) -> tuple[set[str], set[bytes]]: ...
def index_text(
    data: bytes | bytearray | memoryview, postings: dict[str, Any], base: int, pack: Callable[[list[int]], Any], /
) -> int | dict[str | bytes, int]: ...
def add_counts(
    postings: dict[str, Any], counts: dict[str, int], base: int, pack: Callable[[list[int]], Any], /
) -> None: ...
