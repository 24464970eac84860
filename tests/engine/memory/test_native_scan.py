"""The line scan in C (`_native.scan_lines`, driven by `source._scan_native`) gives
exactly the Python loop's scan (`source._scan_python`): every column, the kept values,
the headers, the counters, the end offset and completeness, for any mix of lines —
blank and whitespace-only lines, session headers, non-objects, invalid JSON, lone
surrogate escapes, lines nested deeper than the limit, lines over the line limit, CRLF,
a partial last line — scanned whole or from any base and stop, with and without `keep`.
And the accelerator's `js_float` is the Python float hook's function, its `deeper_than` the
session reader's depth walk, its `utf16_len` JavaScript's string length, its `iso_ms` the
reading of JavaScript's ISO dates."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memory_kit import REAL_SESSIONS

from fabric_lsp.engine import jsstr
from fabric_lsp.engine.memory import json_line, source
from fabric_lsp.engine.session import reader
from tests.support.examples import profile_examples

needs_native = pytest.mark.skipif(source._scan_lines is None, reason="the C accelerator is not built")

_ids = st.one_of(st.none(), st.text(alphabet="0123456789abcdef", min_size=8, max_size=8), st.integers(), st.just([1]))
_types = st.one_of(
    st.sampled_from(
        ["message", "compaction", "branch_summary", "custom_message", "custom", "label", "session", "other"]
    ),
    st.none(),
    st.integers(),
    st.just(["message"]),
)


_part = st.one_of(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "thinking", "toolCall", "image"])},
        optional={
            "text": st.text(max_size=6),
            "thinking": st.text(max_size=6),
            "thinkingSignature": st.text(max_size=6),
            "name": st.sampled_from(["read", "bash", 3]),
            "arguments": st.dictionaries(st.sampled_from(["path", "command", "x"]), st.text(max_size=4), max_size=2),
            "data": st.text(max_size=6),
        },
    ),
    st.integers(),
    st.text(max_size=3),
)
# (the message of a message entry: kept whole, or as json_line.kept_decoder reads it)
_message = st.fixed_dictionaries(
    {},
    optional={
        "role": st.sampled_from(["user", "assistant", "toolResult", "bashExecution", "custom"]) | st.integers(),
        "content": st.one_of(st.text(max_size=10), st.lists(_part, max_size=3), st.none(), st.integers()),
        "toolName": st.sampled_from(["read", "fabric_exec"]),
        "isError": st.booleans(),
        "details": st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
        "usage": st.fixed_dictionaries(
            {"totalTokens": st.integers(), "cost": st.fixed_dictionaries({"total": st.floats(allow_nan=False)})}
        ),
        "n": st.floats(allow_nan=False),
        "api": st.text(max_size=4),
    },
)


@st.composite
def _entry_line(draw: st.DrawFn) -> bytes:
    obj: dict[str, object] = {}
    for key, values in (("type", _types), ("id", _ids), ("parentId", _ids)):
        if draw(st.booleans()):
            obj[key] = draw(values)
    if obj.get("type") == "session" and draw(st.booleans()):
        obj["cwd"] = draw(st.text(max_size=6))
    if draw(st.booleans()):
        obj["message"] = draw(_message)
    return json.dumps(obj, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


def _deep(depth: int) -> bytes:
    return b'{"type":"message","id":"aaaaaaaa","x":' + b"[" * depth + b"]" * depth + b"}"


def _deep_skipped(depth: int) -> bytes:
    """A message entry nesting `depth` deep in a member `kept_decoder` skips: only the
    line's bracket count keeps the typed decode from taking it (that nesting is never
    built), so one too deep is refused as the Python loop refuses it."""
    return (
        b'{"type":"message","id":"aaaaaaab","message":{"role":"user","content":"x","deep":'
        + b"[" * (depth - 2)
        + b"]" * (depth - 2)
        + b"}}"
    )


_odd = st.sampled_from(
    [
        b"",
        b"   ",
        b" \t\x0b\x0c\r",
        b"\r",
        b"not json",
        b"[]",
        b"3",
        b'"text"',
        b"null",
        b'{"type":"message","id":"abc\\ud800"}',  # a lone surrogate: msgspec refuses, JSON.parse reads it
        b'{"type":"message","id":"abcdefab","x":NaN}',
        b'{"type":"message","id":"abcdefab","parentId":null}\r',
        b'{"type":"session","id":"s1","cwd":"/w"}',
        b'{"type": 1e400, "id": 1.5e3}',
        b"\xff\xfe",
        _deep(511),
        _deep(512),
        _deep(513),
        _deep_skipped(512),
        _deep_skipped(513),
        b'{"a":' + b"[" * 600 + b"]" * 600 + b', "type":"message"}',
        b'{"type":"message","id":"abcdefab","text":"' + b"x" * 300 + b'"}',
    ]
)
_lines = st.lists(st.one_of(_entry_line(), _odd), max_size=25)


def kept_shape(value: object) -> bool:
    """Whether `value` is an entry the C scan may keep as `kept_decoder` reads it."""
    if not isinstance(value, dict) or value.get("type") != "message":
        return False
    message = value.get("message")
    return isinstance(message, dict) and message.get("role") in json_line.KEPT_ROLES


def kept_members(value: object) -> object:
    """`value` as `json_line.kept_decoder` reads it, when it has the shape the C scan keeps
    that way (the members `_KeptEntry`, `_KeptMessage` and `_KeptPart` name), else as is."""
    if not kept_shape(value):
        return value
    assert isinstance(value, dict)
    hints = json_line._KeptEntry.__annotations__, json_line._KeptMessage.__annotations__
    out = {k: v for k, v in value.items() if k in hints[0]}
    message = {k: v for k, v in value["message"].items() if k in hints[1]}
    content = message.get("content")
    if isinstance(content, list):
        parts = json_line._KeptPart.__annotations__
        message["content"] = [{k: v for k, v in p.items() if k in parts} if isinstance(p, dict) else p for p in content]
    out["message"] = message
    return out


def _scan(native: bool, data: bytes, base: int, keep: dict[int, object] | None, stop: int | None) -> source.SourceScan:
    scan = source.SourceScan()
    n = len(data) if stop is None else stop
    (source._scan_native if native else source._scan_python)(data, scan, base, keep, n)
    return scan


def _same(data: bytes, *, base: int = 0, keep: bool, stop: int | None = None) -> None:
    kept = ({} if keep else None), ({} if keep else None)
    a = _scan(False, data, base, kept[0], stop)
    b = _scan(True, data, base, kept[1], stop)
    for name in source.ScanLines.__slots__:
        assert getattr(a.lines, name) == getattr(b.lines, name), name
    for name in source.SourceScan.__dataclass_fields__:
        if name != "lines":
            assert getattr(a, name) == getattr(b, name), name
    assert kept[0].keys() == kept[1].keys() if keep else kept[0] is kept[1] is None
    for ordinal, value in (kept[0] or {}).items():
        # a user, assistant or tool result message entry: the C scan may keep only the
        # members memory reads (json_line.kept_decoder); every other value is kept whole
        assert kept_members(value) == kept_members(kept[1][ordinal])
        if not kept_shape(value):
            assert value == kept[1][ordinal]
    if keep:
        # the same objects for the known types (one string per type, as the Python loop)
        assert [t is source._TYPE_NAMES.get(t) for t in a.lines.type if t in source._TYPE_NAMES] == [
            t is source._TYPE_NAMES.get(t) for t in b.lines.type if t in source._TYPE_NAMES
        ]


@needs_native
@settings(max_examples=profile_examples(400), deadline=None)
@given(_lines, st.booleans(), st.booleans(), st.integers(0, 1 << 40), st.data())
def test_native_scan_equals_the_python_loop(lines, keep, partial, base, data):
    blob = b"\n".join(lines) + (b"" if partial else b"\n")
    stop = data.draw(st.one_of(st.none(), st.integers(0, len(blob))))
    if stop is not None:
        stop = blob.rfind(b"\n", 0, stop) + 1  # (scan_streaming stops after a newline)
    _same(blob, base=base, keep=keep, stop=stop)


@needs_native
@settings(max_examples=profile_examples(100), deadline=None)
@given(_lines, st.booleans())
def test_native_scan_with_a_small_line_limit(lines, keep):
    """Lines over the line limit (here 64 bytes) are left to the Python code, which cuts
    them (`cut_json`) and names them in `oversize`."""
    blob = b"\n".join(lines) + b"\n"
    saved = source.MAX_LINE_BYTES
    source.MAX_LINE_BYTES = 64
    try:
        _same(blob, keep=keep)
    finally:
        source.MAX_LINE_BYTES = saved


_TYPE_VALUES = ["message", "compaction", "custom", "session", "other", None, 7, ["message"], {"a": 1}]
_ID_VALUES = ["abcdefab", "", None, 5, 1.5, ["x"], {"id": "y"}, True]


@needs_native
@pytest.mark.parametrize("keep", [True, False])
def test_native_scan_of_every_envelope_shape(keep):
    """Every combination of a type, id and parentId value (each present or missing),
    one line each, between blank, whitespace and invalid lines."""
    missing = object()
    lines = []
    for etype in [*_TYPE_VALUES, missing]:
        for eid in [*_ID_VALUES, missing]:
            for pid in [*_ID_VALUES, missing]:
                obj = {k: v for k, v in (("type", etype), ("id", eid), ("parentId", pid)) if v is not missing}
                lines.append(json.dumps(obj).encode())
                if len(lines) % 7 == 0:
                    lines.append(b" \t")
                if len(lines) % 11 == 0:
                    lines.append(b"{nope")
    _same(b"\n".join(lines) + b"\n", keep=keep)


@needs_native
@pytest.mark.parametrize("keep", [True, False])
def test_native_scan_of_real_sessions(keep):
    files = sorted(REAL_SESSIONS.glob("*.jsonl"))
    assert files
    for path in files:
        _same(path.read_bytes(), keep=keep)


@needs_native
def test_a_scan_continues_where_the_last_one_stopped():
    """`scan_source` onto an existing scan (an append) continues its counters and
    columns in both paths."""
    first = b'{"type":"session","id":"s"}\n{"type":"message","id":"aaaaaaaa"}\n\n'
    more = b'{"type":"message","id":"bbbbbbbb","parentId":"aaaaaaaa"}\n{"type":"x"'
    scans = []
    for native in (False, True):
        scan = source.SourceScan()
        run = source._scan_native if native else source._scan_python
        run(first, scan, 0, {}, len(first))
        run(more, scan, len(first), {}, len(more))
        scans.append(scan)
    a, b = scans
    assert [tuple(x) for x in (a.lines.ordinal, a.lines.line, a.lines.offset)] == [
        tuple(x) for x in (b.lines.ordinal, b.lines.line, b.lines.offset)
    ]
    assert (a.next_ordinal, a.next_line, a.end_offset, a.ends_complete, a.header_id) == (
        b.next_ordinal,
        b.next_line,
        b.end_offset,
        b.ends_complete,
        b.header_id,
    )
    assert b.lines.line.tolist() == [1, 3] and b.ends_complete is False


@pytest.mark.skipif(not hasattr(json_line.NATIVE, "js_float"), reason="the C accelerator is not built")
@settings(max_examples=profile_examples(500), deadline=None)
@given(
    st.one_of(
        st.floats(allow_nan=False).map(repr),
        st.from_regex(r"-?(0|[1-9][0-9]{0,25})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?", fullmatch=True),
        # the C code's exact path (digits up to 2^53, a decimal exponent within 22) and its edges
        st.from_regex(r"-?(0|[1-9][0-9]{0,9})\.[0-9]{1,9}([eE][+-]?[0-9]{1,2})?", fullmatch=True),
        st.from_regex(r"-?[0-9]{15,17}(\.[0-9]{0,3})?([eE][+-]?(2[0-4]|1[0-9]))?", fullmatch=True),
        st.sampled_from(
            [
                "-0.0",
                "0.0e0",
                "9007199254740993.0",
                "9007199254740992.5",
                "1e22",
                "1e23",
                "1e-22",
                "4.35e-23",
                "123456789012345678e-5",
                "0.1E+5",
                "1e0005",
            ]
        ),
    )
)
def test_native_js_float_is_the_python_hook(text):
    a, b = json_line.js_float(text), json_line.NATIVE.js_float(text)
    assert type(a) is type(b)
    assert repr(a) == repr(b)  # the same bits: the sign of a zero too
    assert json_line._any_decoder.float_hook is json_line.NATIVE.js_float


_json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=3)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3),
    max_leaves=40,
)


@pytest.mark.skipif(reader._deeper_than is None, reason="the C accelerator is not built")
@settings(max_examples=profile_examples(500), deadline=None)
@given(_json_values, st.integers(0, 8))
def test_native_depth_rule_is_the_python_walk(value, limit):
    """`_native.deeper_than` decides what the Python walk decides (`_depth_walk` without a
    budget), at any limit; `exceeds_json_depth` uses it for lines longer than the limit."""
    assert reader._deeper_than(value, limit) == reader._depth_walk(value, limit, None)
    line = json.dumps(value).encode()
    expected = len(line) > limit and bool(reader._depth_walk(value, limit, None))
    assert reader.exceeds_json_depth(line, value, limit) == expected


@pytest.mark.skipif(jsstr.utf16_len is jsstr.utf16_len_py, reason="the C accelerator is not built")
@settings(max_examples=profile_examples(500), deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=40) | st.text(max_size=40))
def test_native_utf16_len_is_the_python_count(text):
    """JavaScript's `s.length` in C equals the Python count (astral characters two units,
    lone surrogates one) for text of every width."""
    assert jsstr.utf16_len(text) == jsstr.utf16_len_py(text) == len(text.encode("utf-16-le", "surrogatepass")) // 2


def _iso_shape(draw_digits: list[str]) -> str:
    y, mo, d, h, mi, s, ms = draw_digits
    return f"{y}-{mo}-{d}T{h}:{mi}:{s}.{ms}Z"


_iso_like = st.builds(
    lambda *parts: _iso_shape(list(parts)),
    st.text("0123456789", min_size=4, max_size=4),
    st.sampled_from([f"{m:02d}" for m in range(0, 14)]),
    st.sampled_from([f"{d:02d}" for d in range(0, 33)]),
    st.sampled_from([f"{h:02d}" for h in range(0, 26)]),
    st.sampled_from([f"{m:02d}" for m in range(0, 62)]),
    st.sampled_from([f"{s:02d}" for s in range(0, 62)]),
    st.text("0123456789", min_size=3, max_size=3),
)


@pytest.mark.skipif(jsstr._iso_ms is None, reason="the C accelerator is not built")
@settings(max_examples=profile_examples(1000), deadline=None)
@given(
    st.one_of(
        _iso_like,
        _iso_like.map(lambda s: s.replace("T", " ")),
        _iso_like.map(lambda s: s[:-1] + "+00:00"),
        _iso_like.map(lambda s: " " + s),
        st.text(max_size=26),
        st.integers(),
        st.none(),
    )
)
def test_native_iso_dates_are_the_python_reading(value):
    """`parse_date_ms` with the accelerator's `iso_ms` (JavaScript's toISOString form in C,
    any other form and any invalid date left to Python) equals the Python reading."""
    assert jsstr.parse_date_ms(value) == jsstr.parse_date_ms_py(value)
    iso_ms = jsstr._iso_ms
    assert iso_ms is not None
    fast = iso_ms(value)
    assert fast is None or fast == jsstr.parse_date_ms_py(value)


@pytest.mark.skipif(jsstr._iso_ms is None, reason="the C accelerator is not built")
def test_native_iso_dates_at_the_calendar_edges():
    """Leap days of century years, the first and last representable days, the epoch and
    the millisecond before it, every month's last day and the day after it."""
    values = [
        "1900-02-29T00:00:00.000Z",
        "2000-02-29T12:00:00.000Z",
        "2100-02-29T00:00:00.000Z",
        "2100-02-28T23:59:59.999Z",
        "0001-01-01T00:00:00.000Z",
        "0000-12-31T00:00:00.000Z",
        "9999-12-31T23:59:59.999Z",
        "1970-01-01T00:00:00.000Z",
        "1969-12-31T23:59:59.999Z",
        "1600-03-01T00:00:00.000Z",
    ]
    for year in (1999, 2024):
        for month in range(1, 13):
            for day in (28, 29, 30, 31, 32):
                values.append(f"{year}-{month:02d}-{day:02d}T01:02:03.004Z")
    for value in values:
        assert jsstr.parse_date_ms(value) == jsstr.parse_date_ms_py(value), value
    iso_ms = jsstr._iso_ms
    assert iso_ms is not None and iso_ms("2024-02-29T23:59:59.999Z") == 1709251199999
