"""The packed read-only file table answers exactly like the collector it was made from."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.memory.file_history import FileOp, FileOpsCollector, PackedFileOps, packed
from tests.support.examples import profile_examples

PATHS = ["/p/a.py", "/p/b.py", "/p/sub/c.ts", "/q/ü.md"]

timestamps = st.one_of(
    st.none(), st.integers(min_value=-(2**53), max_value=2**53), st.floats(allow_nan=False), st.text(max_size=4)
)
ops = st.builds(
    FileOp,
    path=st.sampled_from(PATHS),
    action=st.sampled_from(["read", "edit", "write"]),
    tool_name=st.sampled_from(["read", "edit", "write", "fabric_exec"]),
    outcome=st.sampled_from([None, "succeeded", "failed"]),
    index=st.integers(min_value=0, max_value=10**6),
    entry_id=st.one_of(st.none(), st.text(min_size=1, max_size=8)),
    operation_address=st.one_of(st.none(), st.text(max_size=10)),
    timestamp=timestamps,
    tool_call_id=st.one_of(st.none(), st.text(max_size=6)),
    operation_ref=st.one_of(st.none(), st.sampled_from(["pi.read", "pi.edit", "pi.write"])),
)


def _same(a: list[FileOp], b: list[FileOp]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        for f in FileOp.__struct_fields__:
            u, v = getattr(x, f), getattr(y, f)
            if isinstance(u, float) and isinstance(v, float):
                if not (u == v or (math.isnan(u) and math.isnan(v))) or math.copysign(1, u) != math.copysign(1, v):
                    return False
            elif type(u) is not type(v) or u != v:
                return False
    return True


@settings(max_examples=profile_examples(200), deadline=None)
@given(st.lists(ops, max_size=40), st.booleans(), st.integers(min_value=0, max_value=3))
def test_packed_answers_like_the_collector(rows, capped, unresolved):
    table = FileOpsCollector("/p", list(rows), capped=capped, unresolved=unresolved)
    small = packed(table)
    assert isinstance(small, PackedFileOps)
    assert small.reasons() == table.reasons()
    assert small.cwd == table.cwd and small.capped == table.capped and small.unresolved == table.unresolved
    assert _same(small.ops, table.ops)
    for path in PATHS + ["/nowhere"]:
        assert _same(small.lookup(path), table.lookup(path))


def test_infinite_timestamp_survives_packing():
    table = FileOpsCollector("/p", [FileOp("/p/a.py", "read", "read", "succeeded", 1, "e1", None, math.inf, "c", None)])
    assert packed(table).lookup("/p/a.py")[0].timestamp == math.inf


def test_packed_is_smaller_for_a_busy_session():
    rows = [
        FileOp(f"/p/f{i % 7}.py", "read", "read", "succeeded", i, f"e{i:07x}", None, 1.7e12 + i, f"call{i}", None)
        for i in range(5000)
    ]
    import pickle
    import sys

    table = FileOpsCollector("/p", rows)
    held = sum(
        sys.getsizeof(op) + sys.getsizeof(op.path) + sys.getsizeof(op.entry_id) + sys.getsizeof(op.tool_call_id)
        for op in rows
    )
    small = packed(table)
    assert sys.getsizeof(small.data) < held / 3
    assert pickle.loads(pickle.dumps(small.paths)) == {f"/p/f{i}.py" for i in range(7)}
