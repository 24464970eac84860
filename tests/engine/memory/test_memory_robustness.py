"""Arbitrary (hostile) session lines never crash recall, expand or sessions, and hot and
cold indexing agree on what they count."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_kit import engine

from tests.support.examples import profile_examples

CWD = "/home/user/fuzz"

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["", " ", "é", "ΣΑΣ", "İ", "\u0301", "a/b.ts"]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8,
)
parts = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.one_of(st.text(max_size=30), scalars)}),
    st.fixed_dictionaries({"type": st.just("thinking"), "thinking": st.text(max_size=20)}),
    st.fixed_dictionaries(
        {
            "type": st.just("toolCall"),
            "id": st.text(max_size=4),
            "name": st.one_of(st.sampled_from(["read", "bash", "fabric_exec"]), scalars),
            "arguments": json_values,
        }
    ),
    json_values,
)
messages = st.fixed_dictionaries(
    {
        "role": st.one_of(
            st.sampled_from(
                [
                    "user",
                    "assistant",
                    "toolResult",
                    "bashExecution",
                    "custom",
                    "compactionSummary",
                    "branchSummary",
                    "",
                    "weird",
                ]
            ),
            scalars,
        )
    },
    optional={
        "content": st.one_of(st.text(max_size=40), st.lists(parts, max_size=4), scalars),
        "toolName": st.one_of(st.sampled_from(["read", "fabric_exec", ""]), scalars),
        "isError": scalars,
        "command": scalars,
        "output": scalars,
        "exitCode": scalars,
        "customType": scalars,
        "summary": scalars,
        "errorMessage": scalars,
        "details": json_values,
        "timestamp": scalars,
    },
)
ids = st.sampled_from(["e1", "e2", "e3", "e4", "e5", "x/1", None, 7])
entries = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            ["message", "compaction", "branch_summary", "custom_message", "model_change", "label", "session", 3]
        ),
        "id": ids,
        "parentId": ids,
    },
    optional={
        "message": st.one_of(messages, scalars),
        "summary": scalars,
        "customType": scalars,
        "content": st.one_of(st.text(max_size=20), st.lists(parts, max_size=2)),
        "details": json_values,
        "timestamp": st.one_of(st.sampled_from(["2025-01-01T00:00:01.000Z", "nope", "2025-13-01"]), scalars),
        "fromId": scalars,
    },
)
lines = st.lists(
    st.one_of(
        entries.map(lambda e: json.dumps(e, ensure_ascii=False)),
        st.sampled_from(
            [
                "",
                "   ",
                "{",
                "null",
                "[1,2]",
                '"str"',
                "12",
                '{"type":"message"}',
                '{"type":[]}',
                '{"type":{"a":1},"id":"e9","parentId":null}',
            ]
        ),
    ),
    max_size=12,
)


@settings(
    max_examples=profile_examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(lines)
def test_hostile_sessions_never_crash(tmp_path_factory, body):
    base = tmp_path_factory.mktemp("fuzz")
    agent = base / "agent"
    from fabric_lsp.engine.session.discovery import encode_cwd

    folder = agent / "sessions" / encode_cwd(CWD)
    folder.mkdir(parents=True)
    path = folder / "f.jsonl"
    path.write_text(
        json.dumps({"type": "session", "version": 3, "id": "fz", "cwd": CWD}) + "\n" + "\n".join(body) + "\n",
        encoding="utf-8",
    )
    counts = {}
    for hot in (50, 0):
        eng = engine(agent, hot_sessions=hot, regex_timeout_ms=10_000)
        for branches in ("active", "all"):
            for params in (
                {"query": "e1 text a", "scope": "project"},
                {"scope": "project"},
                {"query": ".", "queryMode": "regex", "scope": "project"},
                {"query": "x", "scope": f"session:{path}"},
            ):
                out = eng.recall(dict(params, branches=branches), cwd=CWD)
                assert isinstance(out["text"], str)
            listing = eng.sessions({"scope": "project", "branches": branches}, cwd=CWD)
            counts.setdefault(branches, set()).add(listing["sessions"][0]["entryCount"])
            n = listing["sessions"][0]["entryCount"]
            res = eng.expand(
                {"session": str(path), "branches": branches, "entryRange": {"first": 0, "last": max(0, n - 1)}}
            )
            if n:
                assert len(res["expanded"]) == n
            else:
                assert res["error"]["code"] == "index_out_of_bounds"
            eng.expand({"session": str(path), "branches": branches, "entryIds": ["e1"]})
            eng.expand({"session": str(path), "branches": branches, "operationAddresses": ["e1/0"]})
        eng.close()
    assert all(len(v) == 1 for v in counts.values())  # hot shards and cold digests count alike
    shutil.rmtree(base, ignore_errors=True)


def test_lone_surrogates_and_huge_numbers_do_not_crash(tmp_path: Path):
    from fabric_lsp.engine.session.discovery import encode_cwd

    folder = tmp_path / "agent" / "sessions" / encode_cwd(CWD)
    folder.mkdir(parents=True)
    path = folder / "s.jsonl"
    path.write_bytes(
        b'{"type":"session","version":3,"id":"sur","cwd":"/home/user/fuzz"}\n'
        b'{"type":"message","id":"a","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z",'
        b'"message":{"role":"user","content":"lone \\ud800 half and 123456789012345678901234567890 big"}}\n'
        b'{"type":"message","id":"b","parentId":"a","message":{"role":"assistant","content":'
        b'[{"type":"toolCall","id":"c","name":"read","arguments":{"path":"x.ts","n":1.0,"m":2.5}}]}}\n'
    )
    eng = engine(tmp_path / "agent")
    out = eng.recall({"query": "half big", "scope": "project"}, cwd=CWD)
    assert out["totalMatches"] == 1 and "lone \ufffd half" in out["text"]
    exp = eng.expand({"session": str(path), "indices": [1]})
    assert exp["expanded"][0]["text"] == 'Tool: read({"path":"x.ts","n":1,"m":2.5})'  # JS number printing


def test_lines_with_nan_or_infinity_are_skipped_as_pi_skips_them() -> None:
    """JSON.parse rejects NaN / Infinity, so Pi never sees such a line; neither may memory."""
    from fabric_lsp.engine.memory.source import decode_json_line

    assert decode_json_line(b'{"type":"message","timestamp":NaN}') == (False, None)
    assert decode_json_line(b"Infinity") == (False, None)
    assert decode_json_line(b'{"a":-Infinity}') == (False, None)
    assert decode_json_line(b'{"a":1e999}')[0] is True  # an out-of-range number is JSON
