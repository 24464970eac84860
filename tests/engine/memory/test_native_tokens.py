"""The optional C accelerator of the tokenizer (fabric_lsp/engine/_native.c) gives exactly
the pure-Python path's tokens: `pieces` splits and deduplicates as
`data.translate(_MIXED_TABLE).split()` does, and `unique_terms_utf8` with it equals
`unique_terms_utf8_py` and the digest's definition (`reference_tokenize`)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.memory import hot_index, tokenize
from fabric_lsp.engine.memory.hot_index import HotIndex, postings_of
from fabric_lsp.engine.memory.tokenize import (
    _MIXED_TABLE,
    reference_tokenize,
    unique_terms,
    unique_terms_utf8,
    unique_terms_utf8_py,
)
from tests.support.examples import profile_examples

try:
    from fabric_lsp.engine import _native
except ImportError:  # pragma: no cover - reported by test_the_accelerator_is_built
    _native = None  # type: ignore[assignment]

needs_native = pytest.mark.skipif(_native is None, reason="the C accelerator is not built")

# Letters whose case or composition matters (İ, Σ/ς, combining marks after ASCII letters),
# separators of every ASCII kind, digits, `_`, astral characters and lone surrogates.
_ALPHABET = "aAbBzZiI_09 \t\n\r\x0b\x0c\x1c\x1f\x00./-<=>'\"\\éÉßǅ①²Ｆ\u0301\u0307\u0338😀İΣς…¼ﬁ\u00a0\ud800\udfff"
texts = st.one_of(
    st.text(alphabet=_ALPHABET, max_size=200),
    st.text(max_size=120),
    st.text(alphabet=st.characters(max_codepoint=127), max_size=300),
)


def _python_pieces(data: bytes) -> tuple[set[str], set[bytes]]:
    pieces = set(data.translate(_MIXED_TABLE).split())
    mixed = {p for p in pieces if not p.isascii()}
    return {p.lower().decode("ascii") for p in pieces - mixed}, mixed


def test_the_accelerator_is_built():
    """`pip install` builds it where a C compiler and Python's headers are at hand (CI,
    the README's setup); without them fabric-lsp runs the pure-Python path."""
    assert _native is not None, "fabric_lsp/engine/_native.c was not built: pip install -e . needs gcc and Python.h"
    assert tokenize._native is _native


@needs_native
@settings(max_examples=profile_examples(500), deadline=None)
@given(texts)
def test_native_pieces_and_terms_equal_the_python_path(text):
    data = text.encode("utf-8", "surrogatepass")
    assert _native.pieces(data) == _python_pieces(data)
    expected = set(reference_tokenize(text)) if not any("\ud800" <= c <= "\udfff" for c in text) else None
    terms = unique_terms_utf8(data)
    assert terms == unique_terms_utf8_py(data)
    assert unique_terms(text) == terms
    if expected is not None:
        assert terms == expected


@needs_native
def test_native_pieces_on_large_inputs_with_many_distinct_pieces():
    """Hundreds of thousands of distinct pieces (the table grows many times), repeated
    ones, mixed case and non-ASCII pieces, in bytes, bytearray and memoryview."""
    rnd = random.Random(7)
    words = ["".join(rnd.choice("abcXYZ019_é") for _ in range(rnd.randint(1, 12))) for _ in range(300_000)]
    data = " ".join(words + words[:1000]).encode("utf-8")
    expected = _python_pieces(data)
    assert _native.pieces(data) == expected
    assert _native.pieces(bytearray(data)) == expected
    assert _native.pieces(memoryview(data)) == expected
    assert _native.pieces(b"") == (set(), set())
    assert _native.pieces(b" .,\n") == (set(), set())
    with pytest.raises(TypeError):
        _native.pieces("text")  # type: ignore[arg-type]


# Runs of word characters of every length around the eight bytes the C code reads in one
# step, ended by every kind of separator, a non-ASCII character inside or after a run, at
# the end of the text or not.
_run = st.tuples(
    st.text(alphabet="aZ09_xQ", min_size=0, max_size=26),
    st.sampled_from(["", " ", ".", "-", "\n", "\x00", "\x7f", "@", "[", "`", "{", "/", ":", "é", "😀", "İ"]),
)
swar_texts = st.lists(_run, max_size=12).map(lambda runs: "".join(word + sep for word, sep in runs))


@needs_native
@settings(max_examples=profile_examples(400), deadline=None)
@given(swar_texts, st.integers(0, 9))
def test_pieces_read_eight_bytes_a_step_as_one_at_a_time(text, offset):
    """The pieces, terms and index of texts of long words (`next_piece` reads eight word
    characters a step), wherever in the buffer they start."""
    data = text.encode("utf-8", "surrogatepass")
    assert _native.pieces(data) == _python_pieces(data)
    assert _native.pieces(memoryview(b" " * offset + data)[offset:]) == _python_pieces(data)
    assert unique_terms_utf8(data) == unique_terms_utf8_py(data)
    native = HotIndex.build({"text": text, "role": "user"} for _ in range(2))
    python = _index_in_python([text, text])
    assert [(k, list(postings_of(v))) for k, v in native.postings.items()] == [
        (k, list(postings_of(v))) for k, v in python.postings.items()
    ]
    assert native.doc_len == python.doc_len


def _index_in_python(texts: list[str]) -> HotIndex:
    """HotIndex.add's loop, without the accelerator (`hot_index._index_text` off)."""
    saved = hot_index._index_text
    hot_index._index_text = None
    try:
        return HotIndex.build({"text": t, "role": "user" if i % 3 == 0 else "assistant"} for i, t in enumerate(texts))
    finally:
        hot_index._index_text = saved


@needs_native
@settings(max_examples=profile_examples(300), deadline=None)
@given(st.lists(st.one_of(texts, st.sampled_from(["a b a", "A a", "x_1 X_1 x_1", "", "  ", "b"])), max_size=140))
def test_native_index_text_builds_the_python_index(records):
    """`index_text` (ASCII records, in C) gives the same postings, in the same order (the
    persisted index keeps it), the same lengths and segments as the Python loop, also once
    a term's list passes 64 entries and is packed."""
    assert hot_index._index_text is not None
    native = HotIndex.build({"text": t, "role": "user" if i % 3 == 0 else "assistant"} for i, t in enumerate(records))
    python = _index_in_python(records)
    assert list(native.postings) == list(python.postings)
    assert [(k, type(v), list(postings_of(v))) for k, v in native.postings.items()] == [
        (k, type(v), list(postings_of(v))) for k, v in python.postings.items()
    ]
    assert (native.doc_len, native.total_len, native.seg_starts, native.seg_of) == (
        python.doc_len,
        python.total_len,
        python.seg_starts,
        python.seg_of,
    )


@needs_native
def test_native_index_text_arguments_and_non_ascii():
    postings: dict = {}
    assert _native.index_text(b"Hello, hello WORLD_x 12", postings, 3 << 32, array) == 4
    assert postings == {"hello": (3 << 32) | 2, "world_x": (3 << 32) | 1, "12": (3 << 32) | 1}
    # a piece with a non-ASCII byte: nothing changes; the piece counts in first-seen order
    # come back (the tokenizer finishes them, then add_counts)
    pieces = _native.index_text("Bar caf\u00e9 bar CAF\u00e9".encode(), postings, 4 << 32, array)
    assert list(pieces.items()) == [("bar", 2), ("caf\u00e9".encode(), 1), ("CAF\u00e9".encode(), 1)]
    assert len(postings) == 3
    _native.add_counts(postings, {"hello": 1, "new": 2}, 4 << 32, array)
    assert postings["hello"] == [(3 << 32) | 2, (4 << 32) | 1] and postings["new"] == (4 << 32) | 2
    assert _native.index_text(b"", postings, 5 << 32, array) == 0
    with pytest.raises(TypeError):
        _native.index_text(b"a", [], 0, array)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _native.index_text(b"a", {})  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _native.add_counts({}, [], 0, array)  # type: ignore[arg-type]
    # a term in 200 records: an int, a list, packed into an array at 64, then appended to
    texts = ["common a", "common b", "common \u00e9"] * 67
    native = HotIndex.build({"text": t} for t in texts)
    python = _index_in_python(texts)
    assert type(native.postings["common"]) is array and len(native.postings["common"]) == 201
    assert [(k, type(v), list(postings_of(v))) for k, v in native.postings.items()] == [
        (k, type(v), list(postings_of(v))) for k, v in python.postings.items()
    ]


@pytest.mark.parametrize("tier", ["cold", "hot"])
def test_builds_give_the_same_records_without_the_accelerator(tmp_path, tier):
    """A cold or hot build of a real session with FABRIC_LSP_NATIVE=0 (the pure-Python
    path) writes byte-identical cache records."""
    from pathlib import Path

    session = next(iter(sorted((Path(__file__).resolve().parents[2] / "fixtures" / "real-sessions").rglob("*.jsonl"))))
    script = (
        "import sys, os\n"
        "from fabric_lsp.engine.memory.config import MemoryConfig\n"
        "from fabric_lsp.engine.memory.state_build import build_detached\n"
        "from fabric_lsp.engine.memory import disk_cache, tokenize\n"
        "disk_cache.claim_index_dir(sys.argv[2], agent_dir='/nonexistent/agent', session_dir='/nonexistent/agent/sessions')\n"
        "print('native' if tokenize._native is not None else 'python')\n"
        "build_detached(sys.argv[1], 'active', sys.argv[3], MemoryConfig(), ref_id='x', ref_cwd='/', index_dir=sys.argv[2])\n"
    )
    outputs = {}
    for flag in ("1", "0"):
        out = tmp_path / f"idx{flag}"
        run = subprocess.run(
            [sys.executable, "-c", script, str(session), str(out), tier],
            capture_output=True,
            text=True,
            env={**os.environ, "FABRIC_LSP_NATIVE": flag},
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        outputs[flag] = (run.stdout.strip(), {p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert outputs["0"][0] == "python"
    assert outputs["1"][0] == ("native" if _native is not None else "python")
    assert outputs["1"][1] and outputs["1"][1] == outputs["0"][1]


def test_an_accelerator_from_an_older_source_leaves_the_python_path(monkeypatch):
    """An editable checkout keeps the extension it was built with until it is rebuilt: one
    without `index_text` must not break the memory engine; the hot index then takes the
    Python loop (same postings)."""

    class OldNative:
        pieces = staticmethod(_native.pieces) if _native is not None else None

    monkeypatch.setattr(tokenize, "_native", OldNative())
    assert tokenize.native_index_text() == (None, None) and tokenize.native_intern_terms() is None
    monkeypatch.setattr(tokenize, "_native", None)
    assert tokenize.native_index_text() == (None, None) and tokenize.native_intern_terms() is None


@needs_native
@settings(max_examples=profile_examples(200), deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(["a", "b", "c", "d", "é", "x_1", "zz", ""]) | st.text(max_size=4), max_size=30),
        max_size=12,
    )
)
def test_native_intern_terms_builds_the_python_term_table(vocabularies):
    """`ColdTermTable.add` with `intern_terms` (in C) leaves the same ids, names, postings
    and slot arrays as its Python loop, repeated terms within a vocabulary included."""
    from fabric_lsp.engine.memory import cold_index

    def build(native: bool) -> cold_index.ColdTermTable:
        saved = cold_index._intern_terms
        cold_index._intern_terms = saved if native else None
        try:
            table = cold_index.ColdTermTable()
            for i, v in enumerate(vocabularies):
                assert table.add(v) == i
            assert table.settle()  # (interned here, while the choice of loop holds)
            return table
        finally:
            cold_index._intern_terms = saved

    assert cold_index._intern_terms is not None
    c, py = build(True), build(False)
    assert c.ids == py.ids and list(c.ids) == list(py.ids) and c.names == py.names
    assert [list(p) for p in c.postings] == [list(p) for p in py.postings]
    assert all(type(p) is array for p in c.postings)
    assert {k: list(v) for k, v in c.slots.items()} == {k: list(v) for k, v in py.slots.items()}
    assert all(v.typecode == "I" for v in c.slots.values())


@needs_native
@settings(max_examples=profile_examples(300), deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(["fi", "abc", "x_1", "é", "É", "ﬁ", "Ǆ", "ß", "straße", "İ"]),
            st.text(alphabet=_ALPHABET, min_size=1, max_size=8),
        ),
        max_size=12,
    ),
    st.lists(st.integers(1, 5), min_size=12, max_size=12),
)
def test_piece_counts_finish_the_same_in_c(words, ns):
    """`finish_piece_counts` (in C where built): the same term counts, in the same order, as
    its Python loop, pieces whose tokens meet (an ASCII piece and a ligature, both cases of
    a letter) adding their counts."""
    pieces: dict = {}
    for w, n in zip(words, ns):
        key = w.lower() if w.isascii() else w.encode("utf-8", "surrogatepass")
        pieces[key] = pieces.get(key, 0) + n
    native = tokenize._finish_counts
    assert native is not None
    got = tokenize.finish_piece_counts(dict(pieces))
    tokenize._finish_counts = None
    try:
        want = tokenize.finish_piece_counts(dict(pieces))
    finally:
        tokenize._finish_counts = native
    assert list(got.items()) == list(want.items())
    # pieces whose tokens meet add their counts (an ASCII piece and a ligature)
    assert tokenize.finish_piece_counts({"fi": 2, "ﬁ".encode(): 3, "x": 1}) == {"fi": 5, "x": 1}


@needs_native
@settings(max_examples=profile_examples(1500), deadline=None)
@given(
    st.one_of(
        texts,
        st.text(max_size=300),
        # long ASCII runs (copied four characters at a time) with a wide character placed anywhere
        st.builds(
            lambda head, wide, tail: head + wide + tail,
            st.text(alphabet="abc XYZ_09\n", max_size=40),
            st.sampled_from(
                ["", "é", "ÿ", "\u0080", "\u07ff", "\u0800", "\uffff", "\ud83d", "\udfff", "😀", "\U0010ffff", "\x7f"]
            ),
            st.text(alphabet="abc XYZ_09\n\x80", max_size=40),
        ),
    )
)
def test_utf8_surrogatepass_is_pythons_encoding(text):
    """The UTF-8 the folds and hot records take from a str (`utf8_surrogatepass`): every
    kind of str (1-, 2- and 4-byte), lone and paired surrogates each as three bytes."""
    assert _native.utf8_surrogatepass(text) == text.encode("utf-8", "surrogatepass")


@given(
    st.binary(max_size=300) | st.lists(st.sampled_from([b"\n", b"x" * 40, b"\n\n", b"{}"]), max_size=40).map(b"".join)
)
def test_count_newlines_is_bytes_count(data):
    """The one-pass rule's line count (`count_newlines`, memchr line by line): bytes,
    bytearray and memoryview (a slice too) alike."""
    assert _native.count_newlines(data) == data.count(b"\n")
    assert _native.count_newlines(bytearray(data)) == data.count(b"\n")
    assert _native.count_newlines(memoryview(data)[1:]) == data[1:].count(b"\n")
