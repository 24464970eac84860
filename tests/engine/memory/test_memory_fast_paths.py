"""Property tests for the fast paths of the first build: folding a cold vocabulary in
batches gives exactly the vocabulary (and coverage) of folding text by text, also when the
byte budget runs out mid-batch; the spliced cache metrics equal the re-encoding loop."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.memory.sessions import DigestFolder

words = st.sampled_from(
    ["auth", "Login", "bug", "fix_2", "retry", "the", "a", "zeta", "ΩMEGA", "ﬁle", "İstanbul", "ΣΑΣ", "😀x", "é", "x" * 300]
)
texts = st.one_of(
    st.lists(words, max_size=30).map(" ".join),
    st.lists(words, max_size=30).map("\n".join),
    st.text(alphabet="aAbB_1 ./\n-éßǅ①²Ｆ\u0301\u0307İΣς…¼ﬁ\u00a0😀", max_size=60),
)


def _rec(i: int, text: str) -> dict:
    return {"index": i, "entryId": f"e{i}", "role": "user", "toolName": None, "timestamp": i, "isError": False,
            "text": text}


@settings(max_examples=300, deadline=None)
@given(st.lists(texts, max_size=25), st.sampled_from([2, 10, 40, 120, 400, 524_288]), st.integers(1, 2000))
def test_batched_fold_equals_text_by_text(items, budget, batch_chars):
    one = DigestFolder(budget, batch_chars=0)
    many = DigestFolder(budget, batch_chars=batch_chars)
    for i, text in enumerate(items):
        one.add(_rec(i, text))
        many.add(_rec(i, text))
    assert many.record(["x"]) == one.record(["x"])


scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**12), st.text(max_size=12),
                    st.floats(allow_nan=False, allow_infinity=False))


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.text(max_size=8).filter(lambda k: k not in ("cacheBytes", "cacheSourceRatio", "recordHash")),
                    scalars, max_size=6),
    st.lists(st.text(max_size=30), max_size=20),
    st.dictionaries(st.text(max_size=12), st.integers(1, 10**6), max_size=5),
    st.integers(0, 10**9),
    st.sampled_from([(0, 0), (17, 0.5), (123456, 3.25)]),
)
def test_cache_metrics_splice_equals_reencoding(head, strings, histogram, size, start):
    from fabric_lsp.engine.memory import store

    def record():
        rec = dict(head)
        rec.update(toolHistogram=dict(histogram), vocabulary=list(strings), cacheBytes=start[0],
                   cacheSourceRatio=start[1], entries=[{"args": {"cacheBytes": 0, "cacheSourceRatio": 0}}])
        return rec

    fast, slow = record(), record()
    assert store.apply_cache_metrics(fast, size) == store.apply_cache_metrics_slow(slow, size)
    assert fast == slow
