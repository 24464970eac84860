"""Property tests for the fast paths of the first build: folding a cold vocabulary in
batches gives exactly the vocabulary (and coverage) of folding text by text, also when the
byte budget runs out mid-batch; the spliced cache metrics equal the re-encoding loop."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.memory.digest_fold import DigestFolder
from tests.support.examples import profile_examples

words = st.sampled_from(
    [
        "auth",
        "Login",
        "bug",
        "fix_2",
        "retry",
        "the",
        "a",
        "zeta",
        "ΩMEGA",
        "ﬁle",
        "İstanbul",
        "ΣΑΣ",
        "😀x",
        "é",
        "x" * 300,
    ]
)
texts = st.one_of(
    st.lists(words, max_size=30).map(" ".join),
    st.lists(words, max_size=30).map("\n".join),
    st.text(alphabet="aAbB_1 ./\n-éßǅ①²Ｆ\u0301\u0307İΣς…¼ﬁ\u00a0😀", max_size=60),
)


def _rec(i: int, text: str) -> dict:
    return {
        "index": i,
        "entryId": f"e{i}",
        "role": "user",
        "toolName": None,
        "timestamp": i,
        "isError": False,
        "text": text,
    }


@settings(max_examples=profile_examples(300), deadline=None)
@given(st.lists(texts, max_size=25), st.sampled_from([2, 10, 40, 120, 400, 524_288]), st.integers(1, 2000))
def test_batched_fold_equals_text_by_text(items, budget, batch_chars):
    one = DigestFolder(budget, batch_chars=0)
    many = DigestFolder(budget, batch_chars=batch_chars)
    for i, text in enumerate(items):
        one.add(_rec(i, text))
        many.add(_rec(i, text))
    assert many.record(["x"]) == one.record(["x"])


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**12),
    st.text(max_size=12),
    st.floats(allow_nan=False, allow_infinity=False),
)


@settings(max_examples=profile_examples(300), deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=8).filter(lambda k: k not in ("cacheBytes", "cacheSourceRatio", "recordHash")),
        scalars,
        max_size=6,
    ),
    st.lists(st.text(max_size=30), max_size=20),
    st.dictionaries(st.text(max_size=12), st.integers(1, 10**6), max_size=5),
    st.integers(0, 10**9),
    st.sampled_from([(0, 0), (17, 0.5), (123456, 3.25)]),
)
def test_cache_metrics_splice_equals_reencoding(head, strings, histogram, size, start):
    from fabric_lsp.engine.memory import seal

    def record():
        rec = dict(head)
        rec.update(
            toolHistogram=dict(histogram),
            vocabulary=list(strings),
            cacheBytes=start[0],
            cacheSourceRatio=start[1],
            entries=[{"args": {"cacheBytes": 0, "cacheSourceRatio": 0}}],
        )
        return rec

    fast, slow = record(), record()
    assert seal.apply_cache_metrics(fast, size) == seal.apply_cache_metrics_slow(slow, size)
    assert fast == slow


@settings(max_examples=profile_examples(60), deadline=None)
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["text", "role", "cacheBytes", "entries", "recordHash"]),
            st.one_of(st.text(max_size=40), st.integers(), st.none()),
            max_size=5,
        ),
        min_size=1,
        max_size=400,
    ),
    st.integers(0, 10**9),
    st.text(max_size=20),
)
def test_cache_metrics_splice_of_a_large_raw_entries_equals_reencoding(entries, size, name):
    """A hot shard's `entries` arrive already encoded (msgspec.Raw, often megabytes): the
    spliced, hashed-in-pieces record is byte-identical to re-encoding the whole."""
    import msgspec

    from fabric_lsp.engine.memory import disk_cache, seal

    one = len(disk_cache.encoder.encode(entries)) - 1  # bytes per copy of the list's items, comma included
    encoded = disk_cache.encoder.encode(entries * (2 + seal._SPLICE_MIN // one))

    def record(raw: bool):
        return {
            "cacheVersion": 5,
            "kind": "shard",
            "sessionFile": name,
            "cacheBytes": 0,
            "cacheSourceRatio": 0,
            "entries": msgspec.Raw(encoded) if raw else msgspec.json.decode(encoded),
            "totalEntryCount": 3,
            "indexCoverage": {"complete": True, "reasons": []},
            "leafId": name,
        }

    assert len(encoded) > seal._SPLICE_MIN
    fast = seal.apply_cache_metrics(record(True), size)
    assert fast == seal.apply_cache_metrics_slow(record(False), size)
    assert disk_cache.sealed(fast)
