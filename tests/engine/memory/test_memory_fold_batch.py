"""Property test: folding a cold vocabulary in batches gives exactly the vocabulary (and
coverage) of folding text by text, also when the byte budget runs out mid-batch."""

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
