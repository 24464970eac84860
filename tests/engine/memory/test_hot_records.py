"""The hot tier's compact record store (memory/records.py) and the streamed shard.

* `HotRecords` reads back every record exactly as it was given — same keys in the same
  order, same values and types, same JSON bytes — for any record shape (property test),
  including ids that are not Pi's 8 hex digits, missing or float timestamps, extra keys
  (operation and fact records) and records of another shape altogether.
* A large shard (over RETAIN_ENCODED_MAX_BYTES) is written streaming: the file holds the
  same bytes the whole-record encoder gives, loads back to the same state, and an append
  after it gives what a rebuild gives.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from memory_kit import REAL_SESSIONS

from fabric_lsp.engine.memory import disk_cache, persist, seal, state, state_build
from fabric_lsp.engine.memory.api import MemoryConfig, MemoryEngine
from fabric_lsp.engine.memory.records import BASE_KEYS, HotRecords, snapshot, texts_of
from fabric_lsp.engine.memory.source import stat_key
from tests.support.examples import profile_examples
from tests.support.wire import WireMemoryEngine

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "fabric_lsp" / "examples" / "agent" / "sessions").glob("*/*.jsonl"))
REAL = sorted(REAL_SESSIONS.glob("*.jsonl"))
enc = msgspec.json.Encoder()

ids = st.one_of(
    st.none(),
    st.text(alphabet="0123456789abcdef", min_size=8, max_size=8),  # Pi's ids
    st.text(alphabet="0123456789abcdefABCDEF-_", min_size=0, max_size=12),  # anything else
    st.integers(),
    st.just(["not", "an", "id"]),
)
stamps = st.one_of(
    st.none(),
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(1 << 62), max_value=1 << 62), st.text(max_size=20)
)
extras = st.lists(
    st.tuples(
        st.sampled_from(
            ["parentEntryId", "operationAddress", "ref", "provider", "outcome", "factAddress", "filesTouched"]
        ),
        st.one_of(scalars, st.lists(st.text(max_size=5), max_size=3)),
    ),
    max_size=4,
    unique_by=lambda kv: kv[0],
)


@st.composite
def records(draw):
    rec = {
        "sessionFile": draw(st.sampled_from(["/s/a.jsonl", "/s/b.jsonl"])),
        "sessionId": draw(st.sampled_from(["s-1", ""])),
        "index": draw(
            st.one_of(
                st.integers(min_value=0, max_value=1 << 40),
                st.integers(min_value=1 << 64, max_value=1 << 66),
                st.booleans(),
            )
        ),
        "entryId": draw(ids),
        "parentId": draw(ids),
        "type": draw(st.sampled_from(["message", "custom_message", "fabric_operation", "branch_summary"])),
        "role": draw(st.sampled_from([None, "user", "assistant", "toolResult"])),
        "toolName": draw(st.sampled_from([None, "bash", "read"])),
        "text": draw(st.one_of(st.text(max_size=40), st.just("lone \ud83d surrogate \udc00"), st.none())),
        "timestamp": draw(stamps),
        "isError": draw(st.booleans()),
        "truncated": draw(st.booleans()),
        "line": draw(st.integers(min_value=0, max_value=1 << 40)),
    }
    for key, value in draw(extras):
        rec[key] = value
    if draw(st.integers(0, 9)) == 0:  # another shape: keys dropped or reordered
        keys = draw(st.permutations(list(rec)))
        rec = {k: rec[k] for k in keys[: draw(st.integers(0, len(keys)))]}
    if draw(st.integers(0, 19)) == 0:
        rec["role"] = {"unhashable": [1]}
    return rec


@settings(max_examples=profile_examples(300), deadline=None)
@given(st.lists(records(), max_size=30))
def test_records_read_back_exactly(recs):
    held = HotRecords(recs)
    assert len(held) == len(recs)
    for pos, rec in enumerate(recs):
        got = held[pos]
        assert list(got) == list(rec)
        assert got == rec
        assert [type(v) for v in got.values()] == [type(v) for v in rec.values()]
        assert held[pos - len(recs)] == rec
        assert held.index_at(pos) == rec.get("index")
        assert held.line_at(pos) == rec.get("line")
        assert held.truncated_at(pos) == rec.get("truncated")
    assert list(held) == recs
    try:
        expected = enc.encode(recs)
    except UnicodeEncodeError:  # a lone surrogate: the normalizer never passes one on (not JSON)
        expected = None
    if expected is not None:
        assert enc.encode(list(held)) == expected
    assert held[1:4] == recs[1:4]
    assert list(held.timestamps()) == [r.get("timestamp") for r in recs]
    assert list(texts_of(held)) == [r["text"] if isinstance(r.get("text"), str) else "" for r in recs]
    frozen = snapshot(held)
    held.append(recs[0] if recs else {"text": "x"})
    assert len(frozen) == len(recs) and list(frozen[0 : len(recs)]) == recs
    if expected is not None:
        assert b"".join(bytes(p) for p in persist._entries_pieces(HotRecords(recs))) == expected


def test_pi_records_are_held_without_dicts():
    recs = [
        {
            "sessionFile": "/s/a.jsonl",
            "sessionId": "s",
            "index": i,
            "entryId": f"{i:08x}",
            "parentId": f"{i - 1:08x}" if i else None,
            "type": "message",
            "role": "user",
            "toolName": None,
            "text": f"t{i}",
            "timestamp": 1_700_000_000_000 + i,
            "isError": False,
            "truncated": False,
            "line": i + 1,
        }
        for i in range(1000)
    ]
    held = HotRecords(recs)
    assert not held._whole and not held._extra and not held._strs and not held._odd_ts
    assert len(held._kinds) == 1
    assert list(held) == recs
    assert tuple(recs[0]) == BASE_KEYS


def _state(path: Path, tier: str = "hot") -> state.SessionState:
    return state_build.build_state(str(path), "active", tier, MemoryConfig(), ref_id="ref", ref_cwd="/ref")


def test_streamed_shard_is_the_whole_encoding(monkeypatch):
    for path in REAL + EXAMPLES:
        small = _state(path)
        assert small.persisted and small.entries_json  # kept encoded: small
        monkeypatch.setattr(persist, "RETAIN_ENCODED_MAX_BYTES", 0)
        big = _state(path)
        monkeypatch.undo()
        assert big.persisted == b"" and big.entries_json == b"" and big.entries_bytes > 0
        streamed = persist.shard_bytes(big)
        assert streamed == small.persisted, path.name
        # the oracle: the plain re-encoding loop over the whole record as dicts
        record = persist.shard_record(big)
        record["entries"] = list(big.entries or [])
        assert seal.apply_cache_metrics_slow(record, big.size) == streamed
        assert disk_cache.load_record(streamed, "shard", len(streamed)) is not None


def test_streamed_shard_loads_back_and_extends_like_a_rebuild(tmp_path: Path, monkeypatch):
    src = next(p for p in REAL if p.stat().st_size > 20_000)
    agent = tmp_path / "agent"
    folder = agent / "sessions" / "--w--"
    folder.mkdir(parents=True)
    lines = src.read_bytes().splitlines(keepends=True)
    session = folder / src.name
    session.write_bytes(b"".join(lines[: len(lines) // 2]))
    monkeypatch.setattr(persist, "RETAIN_ENCODED_MAX_BYTES", 0)  # every shard streamed
    index_dir = tmp_path / "index"

    def recall(eng: MemoryEngine) -> dict:
        return eng.recall({"query": "the", "scope": "global", "pageSize": 100})

    eng = WireMemoryEngine(MemoryConfig(), agent_dir=str(agent), index_dir=str(index_dir))
    first = recall(eng)
    name = disk_cache.cache_name(str(session), "active", "shard")
    on_disk = (index_dir / name).read_bytes()
    assert on_disk == persist.shard_bytes(_state(session))
    # a restarted engine loads the streamed shard: same answer
    assert recall(WireMemoryEngine(MemoryConfig(), agent_dir=str(agent), index_dir=str(index_dir))) == first
    # append the rest; the warm engine extends in place, a fresh one rebuilds: same answer and cache
    with open(session, "ab") as fh:
        fh.write(b"".join(lines[len(lines) // 2 :]))
    extended = recall(eng)
    extended_disk = (index_dir / name).read_bytes()
    fresh_dir = tmp_path / "fresh"
    rebuilt = recall(WireMemoryEngine(MemoryConfig(), agent_dir=str(agent), index_dir=str(fresh_dir)))
    assert json.dumps(extended, sort_keys=True) == json.dumps(rebuilt, sort_keys=True)
    assert extended_disk == (fresh_dir / name).read_bytes()
    state = persist.state_from_record(
        disk_cache.load_record(extended_disk, "shard", len(extended_disk)),
        "shard",
        str(session),
        "active",
        key=stat_key(str(session)),
        cfg=MemoryConfig(),
    )
    assert state is not None and list(state.entries or []) == list(_state(session).entries or [])


@st.composite
def plain_records(draw):
    """Records of the plain shape (what the C accelerator takes), with edge values."""
    return {
        "sessionFile": draw(st.sampled_from(["/s/a.jsonl", "/s/é.jsonl"])),
        "sessionId": draw(st.sampled_from(["s-1", ""])),
        "index": draw(st.sampled_from([0, 1, (1 << 63) - 1, -(1 << 63)]) | st.integers(0, 1 << 40)),
        "entryId": draw(st.none() | st.text(alphabet="0123456789abcdef", min_size=8, max_size=8)),
        "parentId": draw(st.none() | st.text(alphabet="0123456789abcdef", min_size=8, max_size=8)),
        "type": draw(st.sampled_from(["message", "custom_message"])),
        "role": draw(st.sampled_from([None, "user", "toolResult"])),
        "toolName": draw(st.sampled_from([None, "bash"])),
        "text": draw(st.text(max_size=40) | st.just("lone \ud83d surrogate \udc00") | st.just("ünï ✓ 𝄞")),
        "timestamp": draw(st.sampled_from([-(1 << 63) + 1, (1 << 63) - 1, -(1 << 63)]) | st.integers(0, 1 << 45)),
        "isError": draw(st.booleans() | st.just(1)),
        "truncated": draw(st.booleans()),
        "line": draw(st.integers(min_value=0, max_value=1 << 40)),
    }


@settings(max_examples=profile_examples(300), deadline=None)
@given(st.lists(plain_records() | records(), max_size=30))
def test_native_append_builds_the_python_columns(recs):
    """`HotRecords.append` through the C accelerator (`_native.hot_record`) leaves every
    column, table and side dict exactly as the Python code does."""
    from fabric_lsp.engine.memory import records as records_mod

    native = records_mod._hot_record
    try:
        records_mod._hot_record = None
        python = HotRecords(recs)
    finally:
        records_mod._hot_record = native
    fast = HotRecords(recs)
    for name in HotRecords.__slots__:
        assert getattr(fast, name) == getattr(python, name), name
    assert list(fast) == recs


def test_native_append_takes_pi_records():
    """Built here (a C compiler is on this machine), the accelerator takes a Pi record and
    declines other shapes without touching anything."""
    from fabric_lsp.engine.memory import records as records_mod

    if records_mod._hot_record is None:
        import pytest

        pytest.skip("the C accelerator is not built")
    rec = {
        "sessionFile": "/s/a.jsonl",
        "sessionId": "s",
        "index": 3,
        "entryId": "0a1b2c3d",
        "parentId": None,
        "type": "message",
        "role": "user",
        "toolName": None,
        "text": "hello",
        "timestamp": 1_700_000_000_000,
        "isError": False,
        "truncated": False,
        "line": 4,
    }
    held = HotRecords()
    cols = (held._tend, held._index, held._line, held._ts, held._eid, held._pid, held._kind)
    args = (BASE_KEYS, held._kind_of, held._kinds, held._tbuf, *cols)
    assert records_mod._hot_record(rec, *args) is True
    for odd in ({**rec, "entryId": "u1"}, {**rec, "timestamp": None}, {**rec, "extra": 1}, {"text": "x"}):
        assert records_mod._hot_record(odd, *args) is False
    assert len(held) == 1 and held[0] == rec and held._eid[0] == 0x0A1B2C3D


texts = st.one_of(
    st.text(max_size=60),
    st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=60),  # every control character, quote, backslash
    st.sampled_from(['say "hi"\\n', "tab\there\r\n\x00\x1f\x7f", "é ü 😀 \u2028 \ufeff", "lone \ud83d surrogate"]),
)


@settings(max_examples=profile_examples(400), deadline=None)
@given(
    st.lists(st.one_of(plain_records(), records()), max_size=30),
    st.lists(texts, min_size=30, max_size=30),
    st.integers(0, 32),
    st.integers(1, 9),
)
def test_encoded_records_are_msgspecs_bytes(recs, new_texts, start, size):
    """`HotRecords.encoded` (the hot shard's entries; in C where the accelerator is built)
    gives, from any start and in pieces of any size, exactly the bytes msgspec gives the
    records' dicts: every kind of text (control characters, quotes, backslashes, non-ASCII),
    ids that are not Pi's, odd timestamps, extra keys, records of another shape. Where
    msgspec refuses a record (a lone surrogate), so does `encoded`."""
    for rec, text in zip(recs, new_texts):
        if isinstance(rec.get("text"), str):
            rec["text"] = text
    held = HotRecords(recs)
    try:
        expected: bytes | None = enc.encode(recs[start:])[1:-1]
    except UnicodeEncodeError:
        expected = None
    from fabric_lsp.engine.memory import records as records_mod

    native = records_mod._encode_records
    for accelerated in (True, False):
        records_mod._encode_records = native if accelerated else None
        try:
            if expected is None:
                try:
                    b",".join(held.encoded(enc.encode, start, size))
                except UnicodeEncodeError:
                    continue
                raise AssertionError("a lone surrogate was encoded")
            assert b",".join(held.encoded(enc.encode, start, size)) == expected, accelerated
        finally:
            records_mod._encode_records = native


def test_native_encoding_is_built_and_used():
    """Built here (a C compiler is on this machine), the shard's entries are encoded in C:
    a text only C writes (the escapes msgspec would write) proves the path ran."""
    from fabric_lsp.engine.memory import records as records_mod

    if records_mod._encode_records is None:
        import pytest

        pytest.skip("the C accelerator is not built")
    rec = {k: None for k in BASE_KEYS} | {"index": 1, "line": 2, "timestamp": 3, "isError": False, "truncated": False}
    rec["text"] = "".join(map(chr, range(128))) + ' "quoted" é 😀 \u2028 \\'  # every ASCII character
    held = HotRecords([rec])
    assert held._kinds  # the plain shape: held in the columns
    calls = []

    def spy(value):
        calls.append(value)
        return enc.encode(value)

    assert b"".join(held.encoded(spy)) == enc.encode(rec)
    # only the keys and the kind's scalars went to msgspec: neither the text nor a record (the fallback)
    assert calls and all(value is None or isinstance(value, bool) or value in BASE_KEYS for value in calls), calls


def test_kinds_keep_their_values_types():
    """1, 1.0 and True are one dict key, but not one JSON value: records that differ only
    so read back (and encode) each with its own value, in C and in Python."""
    from fabric_lsp.engine.memory import records as records_mod

    base = {k: None for k in BASE_KEYS} | {"index": 1, "line": 2, "timestamp": 3, "text": "t", "truncated": False}
    recs = [base | {"isError": value} for value in (1, True, 1.0, False, 0, 0.0)]
    native = records_mod._hot_record
    for accelerated in (True, False):
        records_mod._hot_record = native if accelerated else None
        try:
            held = HotRecords(recs)
        finally:
            records_mod._hot_record = native
        got = list(held)
        assert [type(r["isError"]) for r in got] == [int, bool, float, bool, int, float], accelerated
        assert enc.encode(got) == enc.encode(recs)
        assert b"".join(held.encoded(enc.encode)) == enc.encode(recs)[1:-1]


_POSTING = st.integers(0, (1 << 64) - 1)


@settings(max_examples=profile_examples(300), deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=6),
        st.one_of(
            _POSTING,
            st.lists(_POSTING, max_size=9),
            st.lists(_POSTING, max_size=70).map(lambda xs: __import__("array").array("Q", xs)),
        ),
        max_size=12,
    )
)
def test_the_hot_index_record_is_the_same_with_its_postings_read_in_c(postings):
    """`hot_cache.encode_record` reads the postings (one int, a list or an array each) into
    its columns in C where the accelerator is built: the same record as the Python loop."""
    from fabric_lsp.engine.memory import hot_cache

    native = hot_cache._postings_columns
    if native is None:
        import pytest

        pytest.skip("the C accelerator is not built")
    held = _state(REAL[0])
    assert held.hot_index is not None
    held.hot_index.postings = dict(postings)
    with_c = hot_cache.encode_record(held)
    hot_cache._postings_columns = None
    try:
        without = hot_cache.encode_record(held)
    finally:
        hot_cache._postings_columns = native
    assert with_c == without
    real = _state(REAL[0])
    hot_cache._postings_columns = None
    try:
        expected = hot_cache.encode_record(real)
    finally:
        hot_cache._postings_columns = native
    assert hot_cache.encode_record(real) == expected
