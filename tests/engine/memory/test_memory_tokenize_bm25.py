"""Property tests: the canonical tokenizer equals the digest's definition, and BM25 keeps
its invariants (positivity, query-term order and duplicates, corpus partitioning)."""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.memory.hot_index import HotIndex
from fabric_lsp.engine.memory.search import HotView, bm25_located
from fabric_lsp.engine.memory.tokenize import (
    count_terms,
    reference_tokenize,
    sort_lexical,
    term_counts,
    tokenize_lexical,
    unique_terms,
    unique_terms_utf8,
    utf16_key,
)
from tests.support.examples import profile_examples

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80)
mixed = st.one_of(
    texts,
    st.text(alphabet="aAbBiI_1 ./-<=>'éÉßǅ①²Ｆ\u0301\u0307\u0338😀İΣς…¼ﬁ\u00a0", max_size=40),
    st.text(alphabet=st.characters(max_codepoint=127), max_size=60),
)


def test_word_class_is_letters_numbers_underscore():
    word = re.compile(r"\w")
    for cp in range(0x110000):
        c = chr(cp)
        assert bool(word.match(c)) == (c == "_" or unicodedata.category(c)[0] in "LN"), hex(cp)


@settings(max_examples=profile_examples(600), deadline=None)
@given(mixed)
def test_tokenizer_equals_definition(text):
    tokens = tokenize_lexical(text)
    assert tokens == reference_tokenize(text)
    assert unique_terms(text) == set(tokens)
    assert unique_terms_utf8(text.encode("utf-8", "surrogatepass")) == set(tokens)
    assert term_counts(text) == Counter(tokens)
    counts, n = count_terms(text)
    assert (list(counts.items()), n) == (list(Counter(tokens).items()), len(tokens))  # first-seen order
    assert all(tokens)


@settings(max_examples=profile_examples(200), deadline=None)
@given(st.lists(mixed, max_size=12))
def test_sort_lexical_is_utf16_order(items):
    assert sort_lexical(items) == sorted(items, key=utf16_key)


def _views(docs_per_view):
    views = []
    for vn, docs in enumerate(docs_per_view):
        entries = [{"index": i, "text": t, "role": "user" if i % 3 == 0 else "assistant"} for i, t in enumerate(docs)]
        views.append(HotView(f"s{vn}", f"/f{vn}", "h", "active", "fp", 0.0, entries, HotIndex.build(entries)))
    return views


words = st.sampled_from(["auth", "login", "bug", "fix", "retry", "the", "a", "zeta", "ΩMEGA"])
docs = st.lists(st.lists(words, max_size=12).map(" ".join), min_size=1, max_size=12)
queries = st.lists(words, min_size=1, max_size=4)


def _flat(located, views):
    out = {}
    for vn, scores in located.items():
        for pos, s in scores.items():
            out[views[vn].entries[pos]["text"], vn, pos] = s
    return out


@settings(max_examples=profile_examples(150), deadline=None)
@given(docs, queries)
def test_bm25_positive_and_exactly_the_documents_with_a_term(corpus, query):
    views = _views([corpus])
    located, capped = bm25_located(views, query)
    assert not capped
    qterms = {t for q in query for t in tokenize_lexical(q)}
    hits = set(located.get(0, {}))
    assert hits == {i for i, d in enumerate(corpus) if qterms & set(tokenize_lexical(d))}
    assert all(s > 0 for s in located.get(0, {}).values())


@settings(max_examples=profile_examples(150), deadline=None)
@given(docs, queries, st.randoms(use_true_random=False))
def test_bm25_ignores_term_order_and_duplicates(corpus, query, rnd):
    views = _views([corpus])
    base, _ = bm25_located(views, query)
    shuffled = list(query) + list(query)
    rnd.shuffle(shuffled)
    other, _ = bm25_located(views, shuffled)
    assert base.keys() == other.keys()
    for vn in base:
        for pos in base[vn]:
            assert math.isclose(base[vn][pos], other[vn][pos], rel_tol=1e-12)


@settings(max_examples=profile_examples(150), deadline=None)
@given(docs, queries, st.integers(min_value=0, max_value=12))
def test_bm25_statistics_are_global_across_sessions(corpus, query, cut):
    cut = min(cut, len(corpus))
    one = _views([corpus])
    two = _views([corpus[:cut], corpus[cut:]])
    a, _ = bm25_located(one, query)
    b, _ = bm25_located(two, query)
    flat_a = {pos: s for pos, s in a.get(0, {}).items()}
    flat_b = {}
    for vn, scores in b.items():
        for pos, s in scores.items():
            flat_b[pos + (cut if vn == 1 else 0)] = s
    assert flat_a.keys() == flat_b.keys()
    for k in flat_a:
        assert math.isclose(flat_a[k], flat_b[k], rel_tol=1e-12)


@settings(max_examples=profile_examples(100), deadline=None)
@given(docs, words)
def test_bm25_more_occurrences_score_higher_at_equal_length(corpus, term):
    filler = "qqq"
    a = " ".join([term] * 1 + [filler] * 3)
    b = " ".join([term] * 3 + [filler] * 1)
    views = _views([corpus + [a, b]])
    located, _ = bm25_located(views, [term])
    n = len(corpus)
    assert located[0][n + 1] > located[0][n]


def test_bm25_candidate_cap_marks_capped():
    views = _views([["auth"] * 5, ["auth"] * 5])
    located, capped = bm25_located(views, ["auth"], limit=7)
    assert capped and sum(len(v) for v in located.values()) == 7
