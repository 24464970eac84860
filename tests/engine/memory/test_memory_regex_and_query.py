"""Literal vs regex modes, the bounded regex worker, pagination and browse."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from memory_kit import bash, engine, header, user, write_session

from fabric_lsp.engine.activity import ProgressEvent

CWD = "/home/user/rx"


@pytest.fixture()
def agent(tmp_path: Path) -> Path:
    agent = tmp_path / "agent"
    rows = [
        header("rx1", CWD),
        user("u1", None, "status code 404 from src/foo.ts", 1),
        bash("b1", "u1", "curl localhost", "code 4xx returned", 1, 2),
        user("u2", "b1", "word " * 300, 3),
    ]
    write_session(agent, CWD, "rx.jsonl", rows, 1_700_000_000)
    return agent


def test_literal_never_compiles_a_regex(agent):
    eng = engine(agent, regex_timeout_ms=5000)  # a loaded CI machine must not time out a trivial regex
    lit = eng.recall({"query": "code 4[0-9]", "scope": "project"}, cwd=CWD)
    assert lit["totalMatches"] == 2  # terms code, 4, 0, 9
    rx = eng.recall({"query": "code 4[0-9]", "queryMode": "regex", "scope": "project"}, cwd=CWD)
    assert rx["totalMatches"] == 1 and rx["coverage"]["complete"]
    assert eng.recall({"query": "srcXfooYts", "scope": "project"}, cwd=CWD)["totalMatches"] == 0
    assert eng.recall({"query": "src/foo.ts", "scope": "project"}, cwd=CWD)["totalMatches"] == 1


def test_regex_limits_and_errors(agent):
    eng = engine(agent, regex_max_pattern_bytes=4)
    out = eng.recall({"query": "abcdef", "queryMode": "regex", "scope": "project"}, cwd=CWD)
    assert out["coverage"]["error"] == {
        "code": "regex_pattern_too_large",
        "message": "Regex pattern is 6 bytes; limit is 4.",
    }
    assert not out["authoritative"] and out["text"].startswith(
        'No indexed matches for "abcdef"; query coverage is incomplete'
    )
    eng = engine(agent, regex_max_haystack_terms=1, regex_timeout_ms=5000)
    out = eng.recall({"query": "code", "queryMode": "regex", "scope": "project"}, cwd=CWD)
    assert "regex_max_haystack_terms" in out["coverage"]["reasons"] and not out["coverage"]["complete"]
    eng = engine(agent, regex_max_haystack_bytes=1024, regex_timeout_ms=5000)
    out = eng.recall({"query": "zzz", "queryMode": "regex", "scope": "project"}, cwd=CWD)
    assert "regex_max_haystack_bytes" in out["coverage"]["reasons"]
    assert out["text"] == 'No indexed matches for "zzz"; query coverage is incomplete (regex_max_haystack_bytes).'
    out = engine(agent, regex_timeout_ms=5000).recall(
        {"query": "(unclosed", "queryMode": "regex", "scope": "project"}, cwd=CWD
    )
    assert out["coverage"]["error"]["code"] == "invalid_regex"


def test_catastrophic_regex_times_out_without_stalling(tmp_path: Path):
    agent = tmp_path / "agent"
    write_session(agent, CWD, "slow.jsonl", [header("s", CWD), user("u", None, "a" * 80_000 + "!", 1)])
    eng = engine(agent, regex_timeout_ms=50, max_entry_chars=1_000_000)
    started = time.monotonic()
    out = eng.recall({"query": "(a+)+$", "queryMode": "regex", "scope": "project"}, cwd=CWD)
    assert time.monotonic() - started < 5
    assert out["coverage"]["error"] == {"code": "regex_timeout", "message": "Regex execution exceeded 50 ms."}
    assert out["items"] == [] and not out["authoritative"]
    # The worker is replaced: the next regex works (generous limit: CI machines are loaded).
    eng.config.regex_timeout_ms = 10_000
    again = eng.recall({"query": "^a+!$", "queryMode": "regex", "scope": "project"}, cwd=CWD)
    assert again["totalMatches"] == 1
    eng.close()


def test_other_requests_answer_while_a_slow_regex_runs(tmp_path: Path):
    import threading

    agent = tmp_path / "agent"
    write_session(agent, CWD, "slow.jsonl", [header("s", CWD), user("u", None, "a" * 30_000 + "! fast words", 1)])
    eng = engine(agent, regex_timeout_ms=3000, max_entry_chars=1_000_000)
    eng.recall({"query": "fast", "scope": "project"}, cwd=CWD)  # warm
    slow: dict = {}
    in_worker = threading.Event()

    def activity(event: ProgressEvent) -> None:
        if event.milestone and event.message.startswith("Matching the regex"):
            in_worker.set()

    thread = threading.Thread(
        target=lambda: slow.update(
            eng.recall({"query": "(a+)+$", "queryMode": "regex", "scope": "project"}, cwd=CWD, activity=activity)
        )
    )
    thread.start()
    assert in_worker.wait(30), "the regex never reached its worker"
    started = time.monotonic()
    out = eng.recall({"query": "fast words", "scope": "project"}, cwd=CWD)
    waited = time.monotonic() - started
    thread.join()
    assert out["totalMatches"] == 1 and slow["coverage"]["error"]["code"] == "regex_timeout"
    assert waited < 2.0, waited  # not queued behind the 3 s regex
    eng.close()


def test_regex_matches_cold_vocabulary(agent):
    eng = engine(agent, hot_sessions=0, regex_timeout_ms=5000)
    out = eng.recall({"query": "^40[0-9]$", "queryMode": "regex", "scope": "project"}, cwd=CWD)
    assert out["items"][0]["pointer"]["matchedTerms"] == ["404"]
    assert out["items"][0]["pointer"]["score"] == 1.0


def test_max_entry_chars_makes_no_match_non_authoritative(agent):
    eng = engine(agent, max_entry_chars=100)
    out = eng.recall({"query": "zzzunseen", "scope": "project"}, cwd=CWD)
    assert not out["authoritative"] and out["coverage"]["reasons"] == ["max_entry_chars"]
    assert out["text"] == (
        'No indexed matches for "zzzunseen"; coverage is incomplete (1/1 sessions indexed; reasons: max_entry_chars).'
    )
    seg = eng.recall({"query": "word", "scope": "project"}, cwd=CWD)
    assert "…[truncated]" in seg["text"]


def test_pagination_over_the_global_item_stream(tmp_path: Path):
    agent = tmp_path / "agent"
    for i in range(5):
        rows = [header(f"p{i}", CWD), user(f"u{i}", None, f"shared topic {i}", 1), user(f"v{i}", f"u{i}", "other", 2)]
        write_session(agent, CWD, f"p{i}.jsonl", rows, 1_700_000_000 + i)
    eng = engine(agent, hot_sessions=3)
    first = eng.recall({"query": "shared", "scope": "project", "pageSize": 2}, cwd=CWD)
    assert first["totalItems"] == 5 and first["totalMatches"] == 5 and first["hasNext"]
    kinds = [it["kind"] for it in first["items"]]
    assert kinds == ["segment", "segment"]
    last = eng.recall({"query": "shared", "scope": "project", "pageSize": 2, "page": 3}, cwd=CWD)
    assert len(last["items"]) == 1 and not last["hasNext"] and last["items"][0]["kind"] == "pointer"
    beyond = eng.recall({"query": "shared", "scope": "project", "pageSize": 2, "page": 9}, cwd=CWD)
    assert beyond["text"] == "No results on this page."
    browse = eng.recall({"scope": "project", "pageSize": 4, "page": 2}, cwd=CWD)
    assert browse["totalItems"] == 8 and len(browse["items"]) == 4
    assert eng.recall({"scope": "project", "pageSize": 4}, cwd=CWD)["text"].startswith("8 most recent entries:")
    assert engine(agent).recall({"scope": "session"}, cwd="/nowhere")["text"] == "No entries in scope."


def test_session_scope_is_the_newest_in_cwd(tmp_path: Path):
    agent = tmp_path / "agent"
    write_session(agent, CWD, "old.jsonl", [header("old", CWD), user("u", None, "older words", 1)], 1_700_000_000)
    write_session(agent, CWD, "new.jsonl", [header("new", CWD), user("u", None, "newer words", 1)], 1_700_000_100)
    out = engine(agent).recall({"query": "words"}, cwd=CWD)
    assert out["scope"] == "session" and out["totalMatches"] == 1
    assert out["items"][0]["segment"]["sessionId"] == "new"
