"""Sessions written live by each Pi version in FABRIC_PI_VERSIONS, through the bridge (RPC,
a scripted model on 127.0.0.1): Pi's own compaction gate and `tokensBefore` equal what
`fabric-lsp preview` says, the bridge commits the preview's bytes, a 503 retry and a 400
overflow leave the user's question verbatim in the next request, and expand marks the
entries Pi hid with a `context_edit` (Pi 1.x)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from realpi_kit import (
    SUMMARY_PREFIX,
    SUMMARY_SUFFIX,
    real_pi,  # noqa: F401 (fixture)
    text_of,
)
from test_realpi_bridge import compactions, lines, summarizer_requests, turn, world, write_agent  # noqa: F401

pytestmark = pytest.mark.realpi

Q1 = "FIRST QUESTION: plan the cache " + "a" * 400
Q2 = "SECOND QUESTION that meets a 503: list the risks " + "b" * 400
Q3 = "THE THIRD QUESTION that overflows: what is left to do?"
OVERFLOW = "Your input exceeds the context window of this model"


def last_user(body: dict[str, Any]) -> str:
    return next(text_of(m) for m in reversed(body["messages"]) if m.get("role") == "user")


def preview(world, session, *args: str) -> dict[str, Any]:  # noqa: F811
    return json.loads(world.fabric("preview", str(session), "--json", *args, check=False).stdout)


def test_preview_matches_pis_gate_and_tokens_before_and_the_bridge_commits_its_bytes(world):  # noqa: F811
    world.fake.responder = lambda body: {"text": "Hi."}
    pi = world.pi()
    turn(pi, "hello")
    session = world.session()
    # Pi: nothing to compact; the preview: skipped, for the same reason
    r = pi.call({"type": "compact"}, 60)
    assert not r["success"] and r["error"] == "Nothing to compact (session too small)", r
    p = preview(world, session)
    assert p["outcome"] == "skipped" and "Nothing to compact" in p["reason"], p
    # more turns: Pi compacts through the bridge; its tokensBefore is the preview's own
    world.fake.responder = lambda body: {"text": "Sure: " + "detail " * 300}
    for i in range(3):
        turn(pi, f"step {i}: {Q1}")
    mark = pi.mark()
    r = pi.call({"type": "compact"}, 60)
    assert r["success"], r
    comp = compactions(session)[-1]
    p = preview(world, session, "--leaf", comp["parentId"], "--context-window", "128000")
    assert p["outcome"] == "compacted", p
    assert p["tokensBefore"] == comp["tokensBefore"] == r["data"]["tokensBefore"], (p["tokensBefore"], comp)
    assert comp["summary"] == p["summary"] and comp["firstKeptEntryId"] == p["firstKeptEntryId"]
    assert comp["details"] == p["details"] and comp["fromHook"] is True
    assert [e.get("reason") for e in pi.events[mark:] if e.get("type") == "compaction_start"] == ["manual"]
    if world.real.facts.system_messages:
        assert p.get("piRules") == "1.x" and comp.get("systemMessage", {}).get("role") == "system"
    assert not summarizer_requests(world.fake)


def test_a_503_retry_and_a_400_overflow_keep_the_question_verbatim(world):  # noqa: F811
    write_agent(
        world.agent,
        world.fake.base_url,
        compaction={"enabled": True, "keepRecentTokens": 40, "reserveTokens": 2000},
        extra_settings={"retry": {"enabled": True, "maxRetries": 3, "baseDelayMs": 10}},
    )
    failed: set[str] = set()

    def responder(body: dict[str, Any]) -> dict[str, Any]:
        question = last_user(body)
        if question == Q2 and "503" not in failed:
            failed.add("503")
            return {"http_error": {"status": 503, "message": "Service Unavailable"}}
        if question == Q3 and "400" not in failed:
            failed.add("400")
            return {"http_error": {"status": 400, "message": OVERFLOW}}
        return {"text": "Answer: " + "detail " * 120}

    world.fake.responder = responder
    pi = world.pi()
    turn(pi, Q1)
    n = len(world.fake.requests)
    turn(pi, Q2)
    retried = [r["body"] for r in world.fake.requests[n:]]
    assert len(retried) == 2 and last_user(retried[1]) == Q2, [last_user(b)[:30] for b in retried]
    n = len(world.fake.requests)
    turn(pi, Q3)
    session = world.session()
    comps = compactions(session)
    assert len(comps) == 1 and comps[0]["fromHook"] is True, comps  # overflow recovery, by the Fabric engine
    after = [r["body"] for r in world.fake.requests[n:]]
    assert len(after) == 2, [last_user(b)[:30] for b in after]  # the overflowing request, then the retried one
    msgs = after[1]["messages"]
    users = [text_of(m) for m in msgs if m.get("role") == "user"]
    assert users[0] == SUMMARY_PREFIX + comps[0]["summary"] + SUMMARY_SUFFIX
    assert users[-1] == Q3, users  # the question itself, not only a line inside the summary
    assert not summarizer_requests(world.fake)
    rows = lines(session)
    errors = [e for e in rows if e.get("type") == "message" and e["message"].get("stopReason") == "error"]
    assert len(errors) == 2, [e["message"].get("errorMessage") for e in errors]
    edits = [e for e in rows if e.get("type") == "context_edit"]
    if world.real.facts.context_edits:
        # Pi 1.x hid both failed attempts itself; expand keeps them and says so
        assert {e["targetId"] for e in edits} == {e["id"] for e in errors}, edits
        out = world.fabric("expand", str(session), "--entry-ids", errors[0]["id"], "--json")
        item = json.loads(out.stdout)["expanded"][0]
        assert item["contextEdit"]["state"] == "hidden", item
        assert item["contextEdit"]["editId"] in {e["id"] for e in edits}
    else:
        assert not edits
        out = world.fabric("expand", str(session), "--entry-ids", errors[0]["id"], "--json")
        assert "contextEdit" not in json.loads(out.stdout)["expanded"][0]
