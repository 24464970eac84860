"""Many sessions: recall searches every eligible session whatever maxSessions says, the
oldest session's rare fact ranks first, concurrent calls agree."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from memory_kit import engine, header, user, write_session

CWD = "/home/user/many"


def _sessions(agent: Path, n: int) -> None:
    for i in range(n):
        text = f"common words about session {i}"
        if i == 0:
            text += " rarelexeme_007 ΩMEGA雪"
        rows = [header(f"m{i:03d}", CWD), user(f"u{i}", None, text, 1)]
        write_session(agent, CWD, f"m{i:03d}.jsonl", rows, 1_700_000_000 + i * 10)


def test_every_eligible_session_is_searched_and_the_rare_fact_ranks_first(tmp_path: Path):
    agent = tmp_path / "agent"
    _sessions(agent, 120)
    eng = engine(agent, max_sessions=10, hot_sessions=5, regex_timeout_ms=5000)  # no flakes under load
    for scope in ("project", "global"):
        out = eng.recall({"query": "rarelexeme_007 common", "scope": scope}, cwd=CWD)
        assert out["coverage"]["complete"] and out["coverage"]["indexedSessions"] == 120
        assert out["coverage"]["eligibleSessions"] == 120
        first = out["items"][0]
        assert first["kind"] == "pointer" and first["pointer"]["sessionId"] == "m000"
        assert "entries" not in first["pointer"]
    rx = eng.recall({"query": "^rarelexeme_[0-9]{3}$", "queryMode": "regex", "scope": "global"}, cwd=CWD)
    assert [it["pointer"]["sessionId"] for it in rx["items"]] == ["m000"] and rx["coverage"]["complete"]
    uni = eng.recall({"query": "ΩMEGA雪", "scope": "global"}, cwd=CWD)
    assert [it["pointer"]["sessionId"] for it in uni["items"]] == ["m000"]
    # Listing is what maxSessions bounds.
    assert eng.sessions({"scope": "global"})["totalItems"] == 10


def test_concurrent_calls_agree(tmp_path: Path):
    agent = tmp_path / "agent"
    _sessions(agent, 30)
    eng = engine(agent, hot_sessions=5)
    queries = [
        {"query": "common session", "scope": "global"},
        {"query": "rarelexeme_007", "scope": "global"},
        {"scope": "global", "page": 2},
        {"query": "words", "scope": "project"},
    ]
    expected = [engine(agent, hot_sessions=5).recall(q, cwd=CWD) for q in queries]
    results: list = [None] * 16
    errors: list = []

    def work(k: int) -> None:
        try:
            results[k] = eng.recall(queries[k % len(queries)], cwd=CWD)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k, res in enumerate(results):
        assert res == expected[k % len(queries)]


def test_a_symlinked_session_file_is_listed_by_no_face(tmp_path):
    """Memory lists a project folder with the session layer's rule (regular *.jsonl files,
    never symlinks), so recall/sessions and the session resolver see the same files."""
    from fabric_lsp.engine.session.discovery import list_session_files

    eng = engine(tmp_path)
    cwd = "/work/proj"
    real = write_session(
        tmp_path,
        cwd,
        "2025-01-01T00-00-00-000Z_s-real.jsonl",
        [header("s-real", cwd), user("u1", None, "parse epoch", 1)],
    )
    link = real.parent / "2025-01-01T00-00-00-000Z_s-link.jsonl"
    os.symlink(real, link)
    listed = {r["sessionFile"] for r in eng.sessions({"scope": "global"})["sessions"]}
    assert listed == {str(real)}
    assert set(list_session_files(str(tmp_path / "sessions"))) == {str(real)}
