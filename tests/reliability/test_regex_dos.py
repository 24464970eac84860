"""Regex denial of service against the real server: a catastrophic pattern answers
`regex_timeout` (bounded by the configured timeout, never a hang), the worker is replaced
and later queries work, and other requests keep being answered meanwhile.

Latency figures (timeout + overhead, other requests' round trips) are measured by
bench/reliability/regex_dos.py; here only orderings and generous bounds are asserted.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from reliability_kit import ORBIT, RawServer, example_agent, session_files

TIMEOUT_MS = 2500  # long enough that orderings are unambiguous on a loaded machine
CATASTROPHIC = ["(a+)+$", "(a|aa)+$", "(a*)*b", "(?:a|a)*$"]


def plant_haystack(agent: Path) -> Path:
    """Append a user turn whose text makes backtracking patterns explode."""
    path = session_files(agent)[-1]
    last = json.loads(path.read_bytes().splitlines()[-1])
    entry = {
        "type": "message",
        "id": "d05d05d0",
        "parentId": last["id"],
        "timestamp": "2026-10-29T17:00:00.000Z",
        "message": {"role": "user", "content": "a" * 48 + "!", "timestamp": 1793000000000},
    }
    with open(path, "ab") as fh:
        fh.write((json.dumps(entry) + "\n").encode())
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("regex")
    agent = example_agent(tmp / "agent")
    session = plant_haystack(agent)
    srv = RawServer(agent, stderr_path=tmp / "server.log", settings={"memory": {"regexTimeoutMs": TIMEOUT_MS}})
    srv.initialize(ORBIT)
    srv.call("fabric/recall", {"query": "warm", "scope": "global"})  # build the index first
    srv.session = session  # type: ignore[attr-defined]
    yield srv
    srv.stop()


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_catastrophic_pattern_answers_regex_timeout(server, pattern):
    t0 = time.monotonic()
    result = server.call("fabric/recall", {"query": pattern, "queryMode": "regex", "scope": "global"}, timeout=30)
    elapsed = time.monotonic() - t0
    cov = result["coverage"]
    assert cov["error"]["code"] == "regex_timeout", cov
    assert "regex_timeout" in cov["reasons"] and cov["complete"] is False
    assert result["authoritative"] is False and result["items"] == []
    assert elapsed < TIMEOUT_MS / 1000 + 5.0  # bounded (the tight figure is in docs/reliability.md)
    # the killed worker is replaced: an ordinary pattern works right after
    ok = server.call("fabric/recall", {"query": "a{48}!", "queryMode": "regex", "scope": "global"})
    assert "error" not in ok["coverage"], ok["coverage"]
    assert ok["totalMatches"] >= 1


def started_regex(server) -> int:
    """Send the catastrophic recall; return its id once the server says the regex went to
    its worker (the `milestone` activity event), so what follows runs while it does."""
    since = len(server.notifications)
    rid = server.request("fabric/recall", {"query": "(a+)+$", "queryMode": "regex", "scope": "global"})
    server.wait_notification(
        lambda m: (
            m.get("method") == "fabric/activity"
            and m["params"].get("milestone") is True
            and m["params"].get("message", "").startswith("Matching the regex")
        ),
        since=since,
        timeout=30,
    )
    return rid


def test_other_requests_answer_while_a_regex_runs(server):
    rid = started_regex(server)
    others = [
        server.request("fabric/compact/status", {"session": str(server.session)}),
        server.request("fabric/compactionPreview", {"session": str(server.session)}),
        server.request(
            "workspace/executeCommand",
            {"command": "fabric.compact.status", "arguments": [{"session": str(server.session)}]},
        ),
    ]
    answers = [server.wait(i, 30) for i in others]
    slow = server.wait(rid, 30)
    assert slow["result"]["coverage"]["error"]["code"] == "regex_timeout"
    for i, ans in zip(others, answers):
        assert "result" in ans, ans
        assert server.answer_times[i] < server.answer_times[rid], "answered only after the regex finished"


def test_memory_requests_answer_while_a_regex_runs(server):
    """Found here (fixed in 2ee1b05, d055c78): the regex ran under the memory engine's lock,
    so every memory request waited for the regex timeout."""
    rid = started_regex(server)
    others = [
        server.request("fabric/sessions", {"scope": "global"}),
        server.request("fabric/recall", {"query": "test", "scope": "global"}),
        server.request("fabric/expand", {"session": str(server.session), "indices": [0]}),
    ]
    answers = [server.wait(i, 30) for i in others]
    server.wait(rid, 30)
    for i, ans in zip(others, answers):
        assert "result" in ans, ans
        assert server.answer_times[i] < server.answer_times[rid], "answered only after the regex finished"


def test_the_server_runs_javascript_regexes(server):
    """Issue 16 point 10: patterns are JavaScript `new RegExp(p, "iu")`, as in Pi; the
    server finds node through FABRIC_LSP_NODE or PATH (tests/conftest.py points it at
    .tools' node when PATH has none). Without node: a skip locally, a failure in CI."""
    import os

    from fabric_lsp.engine.memory.regex_worker import NODE_ENV, find_node

    if find_node() is None:
        why = f"no JavaScript engine: set {NODE_ENV} or put node on PATH (CI: scripts/deps/realpi.sh)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    for pattern in ("(?<run>a{48})!", "^\\p{L}{48}!$", "\\u{61}{48}!"):
        out = server.call("fabric/recall", {"query": pattern, "queryMode": "regex", "scope": "global"})
        assert "error" not in out["coverage"] and out["totalMatches"] >= 1, (pattern, out["coverage"])
    out = server.call("fabric/recall", {"query": "(?i)a{48}", "queryMode": "regex", "scope": "global"})
    assert out["coverage"]["error"] == {
        "code": "invalid_regex",
        "message": "Invalid regular expression: /(?i)a{48}/iu: Invalid group",
    }
