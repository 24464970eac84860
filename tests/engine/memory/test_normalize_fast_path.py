"""`Normalizer.feed` builds the records of the common message entries (user, assistant and
tool results other than fabric_exec's) in one pass (`_feed_plain`); it must give exactly
what the general steps give (`_feed_general`) for any entry, odd values included: the
records (with their key order), the coverage reasons, the id sets and the file operations.
A cold build folds entries without building their records (`Normalizer.fold`); it must fold
exactly what `feed`'s records fold."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.memory import cold_fold, entry_fields, entry_text
from fabric_lsp.engine.memory.digest_fold import FILES_TOUCHED_CAP, DigestFolder
from fabric_lsp.engine.memory.entry_fields import collect_paths, plain_role
from fabric_lsp.engine.memory.entry_text import Normalizer
from fabric_lsp.engine.memory.file_history import new_collector
from tests.support.examples import profile_examples

_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False),
    st.sampled_from(["", " ", "x", "a.py", "/abs/p.txt", "fabric_exec", "read", "edit", "2026-01-30T12:24:02.668Z"]),
    st.text(max_size=30),
)
_ANY = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["path", "file", "x", "files", "1"]), inner, max_size=3),
    ),
    max_leaves=8,
)
_PART = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["text", "thinking", "toolCall", "image", 5]),
        "text": st.one_of(st.text(max_size=20), _ANY),
        "thinking": st.one_of(st.text(max_size=10), _ANY),
        "name": st.one_of(st.sampled_from(["read", "edit", "write", "bash"]), _ANY),
        "id": st.sampled_from(["c1", "c2", 3]),
        "arguments": _ANY,
    },
)
_CONTENT = st.one_of(st.text(max_size=30), st.lists(st.one_of(_PART, _ANY), max_size=4), _ANY)
_MESSAGE = st.fixed_dictionaries(
    {},
    optional={
        "role": st.one_of(st.sampled_from(["user", "assistant", "toolResult", "bashExecution", "custom", "x"]), _ANY),
        "content": _CONTENT,
        "toolName": st.one_of(st.sampled_from(["read", "fabric_exec", "edit"]), _ANY),
        "toolCallId": st.sampled_from(["c1", "c2", 3]),
        "isError": _ANY,
        "errorMessage": _ANY,
        "timestamp": st.one_of(st.integers(0, 10**13), _ANY),
    },
)
# messages of the fast path's roles, most features present (text, tool calls, errors)
_PLAIN = st.fixed_dictionaries(
    {
        "type": st.just("message"),
        "id": st.sampled_from(["p1", "p2", "e1"]),
        "message": st.fixed_dictionaries(
            {
                "role": st.sampled_from(["user", "assistant", "toolResult"]),
                "content": st.one_of(st.lists(st.one_of(_PART, _ANY), max_size=4), st.text(max_size=20)),
            },
            optional={
                "toolName": st.one_of(st.sampled_from(["read", "edit", "bash"]), _ANY),
                "isError": st.one_of(st.booleans(), _ANY),
                "errorMessage": st.one_of(st.text(max_size=8), _ANY),
                "toolCallId": st.sampled_from(["c1", "c2"]),
            },
        ),
    },
    optional={"parentId": st.sampled_from(["e1", None]), "timestamp": st.sampled_from(["2026-01-30T12:24:02.668Z", 7])},
)
_ENTRY = st.fixed_dictionaries(
    {"type": st.sampled_from(["message", "message", "message", "compaction", "custom_message", "branch_summary", "x"])},
    optional={
        "id": st.sampled_from(["e1", "e2", "e3", 4]),
        "parentId": st.sampled_from(["e1", None, 5]),
        "timestamp": st.one_of(st.sampled_from(["2026-01-30T12:24:02.668Z", "bad"]), _ANY),
        "message": st.one_of(_MESSAGE, _ANY),
        "summary": _ANY,
    },
)


def _pair(limit, thinking, tool_output, cwd):
    made = []
    for _ in range(2):
        norm = Normalizer(
            "/s/f.jsonl", "sid", max_entry_chars=limit, index_thinking=thinking, index_tool_output=tool_output
        )
        norm.file_ops = new_collector(cwd)
        made.append(norm)
    return made


def _general(norm: Normalizer, raw, line):
    """The general steps, for every entry (the dispatch of `feed` without its fast path)."""
    if not isinstance(raw, dict):
        return []
    etype = raw.get("type")
    if etype not in ("message", "compaction", "branch_summary", "custom_message"):
        return []
    message = None
    if etype == "message":
        value = raw.get("message")
        message = value if isinstance(value, dict) else {}
    return norm._feed_general(raw, etype, message, line)


@settings(max_examples=profile_examples(1500), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(st.one_of(_PLAIN, _ENTRY), max_size=6),
    st.sampled_from([None, 0, 5, 2000]),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["/w", None, "rel"]),
)
def test_the_one_pass_records_equal_the_general_steps(entries, limit, thinking, tool_output, cwd):
    fast, general = _pair(limit, thinking, tool_output, cwd)
    for line, entry in enumerate(entries):
        a = fast.feed(copy.deepcopy(entry), line)
        b = _general(general, copy.deepcopy(entry), line)
        assert a == b
        assert [list(r) for r in a] == [list(r) for r in b]  # key order too
    assert fast.reasons == general.reasons and fast.next_index == general.next_index
    assert fast.entry_ids == general.entry_ids
    assert fast.file_ops.ops == general.file_ops.ops and fast.file_ops.unresolved == general.file_ops.unresolved


def test_the_fast_path_serves_the_common_entries():
    norm, _ = _pair(2000, False, True, "/w")
    calls = []
    norm._feed_general = lambda *a: calls.append(a) or []  # type: ignore[method-assign]
    norm.feed({"type": "message", "id": "u", "message": {"role": "user", "content": "hi"}}, 0)
    norm.feed({"type": "message", "id": "t", "message": {"role": "toolResult", "toolName": "read", "content": "x"}}, 1)
    norm.feed({"type": "message", "id": "a", "message": {"role": "assistant", "content": []}}, 2)
    assert calls == []
    norm.feed({"type": "message", "id": "f", "message": {"role": "toolResult", "toolName": "fabric_exec"}}, 3)
    norm.feed({"type": "message", "id": "b", "message": {"role": "bashExecution", "command": "ls"}}, 4)
    assert len(calls) == 2


def _folded(folder: DigestFolder) -> tuple:
    return (
        folder.entry_count,
        folder.first_ts,
        folder.last_ts,
        folder.error_count,
        dict(folder.tools),
        list(folder.files),
        folder.addresses,
        folder.record(["r"]),
    )


# tool calls on files and their results, with dates: what the file operations and the
# digest's files, tools and time range are made of
_CALL = st.fixed_dictionaries(
    {
        "type": st.just("toolCall"),
        "id": st.sampled_from(["c1", "c2", "c3"]),
        "name": st.sampled_from(["read", "edit", "write", "bash"]),
        "arguments": st.fixed_dictionaries(
            {"path": st.sampled_from(["a.py", "/abs/b.py", " ", "src/c.ts"])},
            optional={"files": st.lists(st.sampled_from(["x.md", "y.md"]), max_size=2)},
        ),
    }
)
_DATE = st.sampled_from(["2026-01-30T12:24:02.668Z", "2026-02-01T00:00:00Z", "2025-12-31T23:59:59.999Z"])
_FILE_ENTRY = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("message"),
            "id": st.sampled_from(["a1", "a2"]),
            "timestamp": _DATE,
            "message": st.fixed_dictionaries({"role": st.just("assistant"), "content": st.lists(_CALL, max_size=3)}),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("message"),
            "id": st.sampled_from(["t1", "t2"]),
            "timestamp": _DATE,
            "message": st.fixed_dictionaries(
                {
                    "role": st.just("toolResult"),
                    "toolName": st.sampled_from(["read", "edit"]),
                    "toolCallId": st.sampled_from(["c1", "c2", "c3"]),
                    "isError": st.booleans(),
                    "content": st.text(max_size=8),
                }
            ),
        }
    ),
)


@settings(max_examples=profile_examples(1500), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(st.one_of(_PLAIN, _ENTRY, _FILE_ENTRY), max_size=6),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["/w", None, "rel"]),
    st.sampled_from([0, 64]),
    st.sampled_from([40, 10**6]),
)
def test_folding_entries_equals_folding_their_records(entries, thinking, tool_output, cwd, batch, vocab_bytes):
    folding, feeding = _pair(None, thinking, tool_output, cwd)
    into, of_records = DigestFolder(vocab_bytes, batch), DigestFolder(vocab_bytes, batch)
    for line, entry in enumerate(entries):
        folding.fold(copy.deepcopy(entry), line, into)
        for rec in feeding.feed(copy.deepcopy(entry), line):
            of_records.add(rec)
    assert _folded(into) == _folded(of_records)
    assert folding.reasons == feeding.reasons and folding.next_index == feeding.next_index
    assert folding.entry_ids == feeding.entry_ids and folding.op_addresses == feeding.op_addresses
    assert folding.file_ops.ops == feeding.file_ops.ops and folding.file_ops.pending == feeding.file_ops.pending
    assert folding.file_ops.unresolved == feeding.file_ops.unresolved


# long texts (over 256 characters: remembered by digest), repeated, to fold in batches
_LONG = st.sampled_from(["alpha beta " * 30, "gamma delta " * 40, "alpha beta " * 30 + "x"])
_LONG_ENTRY = st.fixed_dictionaries(
    {
        "type": st.just("message"),
        "id": st.sampled_from(["l1", "l2", "a1"]),
        "message": st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "assistant", "toolResult"]), "content": _LONG},
            optional={"toolName": st.sampled_from(["read", "bash"]), "toolCallId": st.sampled_from(["c1", "c2"])},
        ),
    }
)


@settings(max_examples=profile_examples(1500), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(st.one_of(_PLAIN, _ENTRY, _FILE_ENTRY, _LONG_ENTRY), max_size=8),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["/w", None, "rel"]),
    st.sampled_from([1, 64, 1 << 20]),
    st.sampled_from([40, 300, 10**6]),
)
def test_the_native_fold_equals_the_python_fold(monkeypatch, entries, thinking, tool_output, cwd, batch, vocab_bytes):
    """A cold build's loop (`cold_fold.fold_entries`) folds the common entries in one C
    call (`_native.fold_plain`): the same folder, reasons, ids and file operations as
    `Normalizer.fold` alone, and as folding `feed`'s records."""
    if cold_fold._fold_plain is None:
        pytest.skip("the C accelerator is not built")
    (native, python), (feeding, _) = _pair(None, thinking, tool_output, cwd), _pair(None, thinking, tool_output, cwd)
    into, by_python, of_records = (DigestFolder(vocab_bytes, batch) for _ in range(3))
    cold_fold.fold_entries(native, into, ((copy.deepcopy(e), n) for n, e in enumerate(entries)))
    with monkeypatch.context() as m:
        m.setattr(cold_fold, "_fold_plain", None)
        cold_fold.fold_entries(python, by_python, ((copy.deepcopy(e), n) for n, e in enumerate(entries)))
    for n, e in enumerate(entries):
        for rec in feeding.feed(copy.deepcopy(e), n):
            of_records.add(rec)
    assert _folded(into) == _folded(by_python) == _folded(of_records)
    assert (into.seen_texts, into.vocab_bytes, into.vocab_stopped) == (
        by_python.seen_texts,
        by_python.vocab_bytes,
        by_python.vocab_stopped,
    )
    for norm in (native, feeding):
        assert norm.reasons == python.reasons and norm.next_index == python.next_index
        assert norm.entry_ids == python.entry_ids
        assert norm.file_ops.ops == python.file_ops.ops and norm.file_ops.pending == python.file_ops.pending
        assert norm.file_ops.unresolved == python.file_ops.unresolved
        assert norm.file_ops._version == python.file_ops._version


def test_the_native_fold_serves_the_common_entries(monkeypatch):
    """The cold loop leaves no common entry to `Normalizer.fold`."""
    if cold_fold._fold_plain is None:
        pytest.skip("the C accelerator is not built")
    norm, _ = _pair(None, False, True, "/w")
    left: list[object] = []
    monkeypatch.setattr(norm, "fold", lambda raw, line, folder: left.append(raw))
    entries = [
        {"type": "message", "id": "u", "message": {"role": "user", "content": "hello world"}},
        {
            "type": "message",
            "id": "a",
            "message": {
                "role": "assistant",
                "content": [{"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "src/a.py"}}],
            },
        },
        {"type": "message", "id": "t", "message": {"role": "toolResult", "toolName": "read", "toolCallId": "c1"}},
        {"type": "custom_message", "id": "m", "customType": "x", "content": "note"},
    ]
    folder = DigestFolder(10**6)
    cold_fold.fold_entries(norm, folder, ((e, n) for n, e in enumerate(entries)))
    assert left == [entries[3]]
    assert [(op.path, op.outcome) for op in norm.file_ops.ops] == [("/w/src/a.py", "succeeded")]
    assert folder.entry_count == 3 and norm.next_index == 3


def test_the_native_fold_stops_at_the_files_cap(monkeypatch):
    """The digest keeps the first FILES_TOUCHED_CAP files, in both loops."""
    if cold_fold._fold_plain is None:
        pytest.skip("the C accelerator is not built")
    paths = [f" f{i}.md" for i in range(FILES_TOUCHED_CAP + 10)]
    entries = [
        {
            "type": "message",
            "id": f"a{k}",
            "message": {
                "role": "assistant",
                "content": [{"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"files": paths[k::2]}}],
            },
        }
        for k in range(2)
    ]
    native, python = _pair(None, False, True, "/w")
    a, b = DigestFolder(10**6), DigestFolder(10**6)
    cold_fold.fold_entries(native, a, ((copy.deepcopy(e), n) for n, e in enumerate(entries)))
    monkeypatch.setattr(cold_fold, "_fold_plain", None)
    cold_fold.fold_entries(python, b, ((copy.deepcopy(e), n) for n, e in enumerate(entries)))
    assert list(a.files) == list(b.files) and len(a.files) == FILES_TOUCHED_CAP
    assert list(a.files)[:2] == ["f0.md", "f2.md"]


def test_folding_builds_no_record_for_the_common_entries():
    norm, _ = _pair(None, False, True, "/w")
    built = []
    norm._record = lambda *a, **k: built.append(a) or {}  # type: ignore[method-assign]
    folder = DigestFolder(10**6)
    norm.fold({"type": "message", "id": "u", "message": {"role": "user", "content": "hello world"}}, 0, folder)
    norm.fold(
        {
            "type": "message",
            "id": "a",
            "message": {
                "role": "assistant",
                "content": [{"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "src/a.py"}}],
            },
        },
        1,
        folder,
    )
    norm.fold(
        {
            "type": "message",
            "id": "t",
            "message": {"role": "toolResult", "toolName": "read", "toolCallId": "c1", "content": "def f(): pass"},
        },
        2,
        folder,
    )
    assert built == []
    assert folder.addresses == [
        [0, "u", None, "user", None, None],
        [1, "a", None, "assistant", "read", None],
        [2, "t", None, "toolResult", "read", None],
    ]
    assert {"hello", "world", "def", "f", "pass", "src", "a", "py"} <= set(folder.record([])["vocabulary"])
    assert [(op.path, op.outcome) for op in norm.file_ops.ops] == [("/w/src/a.py", "succeeded")]


# argument keys the path rule (`(?:file|path)s?$`, any case) decides at its edges
_KEYS = st.sampled_from(
    [
        "path",
        "PATHS",
        "myFile",
        "files\n",
        "file\n\n",
        "filess",
        "xpath",
        "pa th",
        "paths ",
        "ſ",
        "filſ",
        "pathſ",
        "FİLE",
        "s",
    ]
)
_ARGS = st.recursive(
    st.one_of(st.sampled_from(["a.py", " b.py ", "\u3000", "", "c.py\u00a0"]), st.integers(0, 3), st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=3)),
    max_leaves=10,
)
_PATHS_PART = st.fixed_dictionaries(
    {"type": st.just("toolCall"), "name": st.sampled_from(["edit", "read"]), "arguments": _ARGS}
)


@pytest.mark.skipif(entry_text._plain_fields_c is None, reason="the C accelerator is not built")
@settings(max_examples=profile_examples(1500), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(st.one_of(_PLAIN, _ENTRY), max_size=4),
    st.lists(_PATHS_PART, max_size=3),
    st.sampled_from([None, -2, 0, 5, 2000]),
    st.booleans(),
    st.booleans(),
)
def test_the_plain_fields_in_c_equal_python(entries, calls, limit, thinking, tool_output):
    """`_native.plain_fields` (with the paths collected and the argument summaries written
    in C) against the Python method."""
    entries = [*entries, {"type": "message", "id": "p", "message": {"role": "assistant", "content": calls}}]
    norm = Normalizer(
        "/s/f.jsonl", "sid", max_entry_chars=limit, index_thinking=thinking, index_tool_output=tool_output
    )
    for entry in entries:
        role = plain_role(entry)
        if role is None:
            continue
        a = copy.deepcopy(entry)
        native = norm._plain_fields(a, a["message"], role)
        b = copy.deepcopy(entry)
        saved = entry_text._plain_fields_c, entry_fields._collect_paths_c, entry_fields._args_summary_c
        entry_text._plain_fields_c = entry_fields._collect_paths_c = entry_fields._args_summary_c = None
        try:
            python = norm._plain_fields(b, b["message"], role)
        finally:
            entry_text._plain_fields_c, entry_fields._collect_paths_c, entry_fields._args_summary_c = saved
        assert repr(native) == repr(python)
        assert [type(v) for v in native] == [type(v) for v in python]


@pytest.mark.skipif(entry_fields._collect_paths_c is None, reason="the C accelerator is not built")
@settings(max_examples=profile_examples(1000), deadline=None)
@given(_ARGS)
def test_the_paths_collected_in_c_equal_python(value):
    native: dict[str, None] = {}
    collect_paths(copy.deepcopy(value), None, native)
    python: dict[str, None] = {}
    saved = entry_fields._collect_paths_c
    entry_fields._collect_paths_c = None
    try:
        collect_paths(copy.deepcopy(value), None, python)
    finally:
        entry_fields._collect_paths_c = saved
    assert list(native) == list(python)


@pytest.mark.parametrize("room", [0, 400, 10**6])
def test_repeated_long_texts_fold_the_same_with_any_room(monkeypatch, room):
    """Long texts are remembered whole while the folder has room, so a repeat is skipped;
    past the room a repeat is folded again: the digest is the same either way, and the C
    loop remembers exactly what the Python one does."""
    texts = ["alpha beta " * 30, "gamma delta " * 40, "alpha beta " * 30, "épsilon " * 50, "gamma delta " * 40]
    entries = [
        {"type": "message", "id": f"e{i}", "message": {"role": "user", "content": t}} for i, t in enumerate(texts)
    ]
    digests = []
    for native in (True, False):
        norm, _ = _pair(None, False, True, "/w")
        folder = DigestFolder(10**6, 64)
        folder.seen_room = room
        with monkeypatch.context() as m:
            if not native:
                m.setattr(cold_fold, "_fold_plain", None)
            cold_fold.fold_entries(norm, folder, ((copy.deepcopy(e), n) for n, e in enumerate(entries)))
        remembered = {t.encode() for t in texts if len(t.encode()) <= room}
        if room == 400:
            remembered = {texts[0].encode()}  # (330 bytes: the next ones do not fit in what is left)
        assert folder.seen_texts == remembered
        assert folder.seen_room == room - sum(map(len, remembered))
        digests.append(_folded(folder))
    unbatched = DigestFolder(10**6, 0)
    for i, t in enumerate(texts):
        unbatched.add_fields(i, f"e{i}", None, "user", None, ts=None, is_error=False, files=(), text=t)
    assert digests[0] == digests[1] == _folded(unbatched)
