"""The bridge never aborts a turn: outside compaction requests racing prompts typed into
Pi's TUI (tmux, a private server) on every Pi version in FABRIC_PI_VERSIONS.

Each round asks for a compaction (as an editor or `fabric-lsp compact` does: an intent in
the shared state directory) and types a prompt into the TUI shortly before or after it.
Every prompt makes the model call a tool and then answer. The file must end up holding
every prompt once, each followed by its tool call, its tool result and its answer, none
of them aborted or errored, all on Pi's active branch; the compactions land between
turns (never inside one), and every request is committed in the end.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from realpi_kit import (
    real_pi,  # noqa: F401 (fixture)
    text_of,
)
from test_realpi_bridge import EXTENSION, World, write_agent
from tui_kit import Tmux, pi_command, session_files, wait_for

from fabric_lsp.engine.intents.controller import CompactController
from fabric_lsp.engine.intents.service import default_state_dir
from fabric_lsp.engine.intents.store import IntentStore

pytestmark = pytest.mark.realpi

ROUNDS = 20
# seconds between the request and the typed prompt: negative = the prompt is typed first
DELAYS = (
    0.0,
    0.25,
    -0.1,
    0.45,
    0.1,
    -0.3,
    0.35,
    0.05,
    -0.05,
    0.2,
    0.3,
    -0.2,
    0.15,
    0.4,
    -0.4,
    0.0,
    0.5,
    -0.15,
    0.25,
    0.1,
)
ANSWER = "detail " * 300  # ~525 tokens a turn, over keepRecentTokens 300: every round has something to compact


def race_number(body: dict[str, Any]) -> int:
    users = [m for m in body["messages"] if m.get("role") == "user"]
    for m in reversed(users):
        found = re.findall(r"race (\d+)", text_of(m))
        if found:
            return int(found[-1])
    return -1


def responder(body: dict[str, Any]) -> dict[str, Any]:
    n = race_number(body)
    if body["messages"][-1].get("role") == "tool":
        return {"text": f"answer {n}: {ANSWER}"}
    return {"tool_call": {"id": f"call_race_{n}", "name": "bash", "arguments": {"command": f"echo tool-{n}"}}}


def entries(path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_bytes().splitlines() if x.strip()]


def branch(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_id = {r["id"]: r for r in rows if "id" in r and r.get("type") != "session"}
    leaf = [r for r in rows if r.get("type") != "session"][-1]
    out, cur = [], leaf
    while cur is not None:
        out.append(cur)
        cur = by_id.get(cur.get("parentId"))
    return out[::-1]


def answered(path, n: int) -> bool:
    return any(
        r.get("type") == "message"
        and r["message"].get("role") == "assistant"
        and text_of(r["message"]).startswith(f"answer {n}:")
        for r in entries(path)
    )


def test_outside_requests_racing_typed_prompts_abort_none(tmp_path, real_pi):  # noqa: F811
    tmux = Tmux()
    with FakeOpenAI(responder=responder, realistic_usage=True) as fake:
        w = World(tmp_path, fake, real_pi)
        write_agent(w.agent, fake.base_url)
        pane = tmux.start("pi", pi_command(real_pi, w.proj, w.env(), ["-e", str(EXTENSION)]))
        try:
            pane.wait_screen(lambda s: "fabric-lsp: bridge active" in s, 60, "the bridge's status line")
            pane.submit("race 0: warm up")  # the session file exists from here on
            session = wait_for(
                lambda: session_files(w.agent) and answered(session_files(w.agent)[0], 0) and session_files(w.agent)[0],
                60,
                "the first answer",
            )
            store = IntentStore(default_state_dir(str(w.agent)))
            real = os.path.realpath(session)
            asked = 0
            for i, delay in enumerate(DELAYS[:ROUNDS], start=1):
                request = lambda: CompactController(store, real).request(  # noqa: E731
                    default_requested_by="race", reason=f"round {i}"
                )
                if delay >= 0:
                    request()
                    time.sleep(delay)  # the race itself: the prompt typed this long after the request
                    pane.submit(f"race {i}: go")
                else:
                    pane.submit(f"race {i}: go")
                    time.sleep(-delay)  # the request this long after the prompt
                    request()
                asked += 1
                wait_for(lambda: answered(session, i), 60, f"the answer of round {i}")

            def drained() -> bool:
                state = store.load(real)
                return state.pending is None and state.claim is None

            wait_for(drained, 60, "every request committed")
        finally:
            tmux.close()

    rows = entries(session)
    path = branch(rows)
    messages = [r for r in rows if r.get("type") == "message"]
    bad = [r for r in messages if r["message"].get("stopReason") in ("aborted", "error")]
    assert not bad, f"aborted or failed turns: {[(r['id'], r['message'].get('stopReason')) for r in bad]}"
    on_path = {r["id"] for r in path}
    assert {r["id"] for r in rows if r.get("type") != "session"} == on_path, "the file forked"
    for n in range(ROUNDS + 1):
        users = [
            k
            for k, r in enumerate(path)
            if r.get("type") == "message"
            and r["message"]["role"] == "user"
            and re.search(rf"\brace {n}:", text_of(r["message"]))
        ]
        assert len(users) == 1, f"round {n}: the prompt is on the branch {len(users)} times"
        turn = []
        for r in path[users[0] + 1 :]:
            if r.get("type") != "message":
                continue
            if r["message"]["role"] == "user":
                break
            turn.append(r["message"])
        roles = [(m["role"], m.get("stopReason")) for m in turn]
        assert roles == [("assistant", "toolUse"), ("toolResult", None), ("assistant", "stop")], (n, roles)
        assert f"tool-{n}" in text_of(turn[1]) and not turn[1].get("isError"), (n, turn[1])
        assert text_of(turn[2]).startswith(f"answer {n}:"), (n, text_of(turn[2])[:40])
    # the compactions landed between turns, never inside one: each hangs off a finished answer
    comps = [r for r in path if r.get("type") == "compaction"]
    by_id = {r["id"]: r for r in rows if r.get("type") != "session"}
    for c in comps:
        parent = by_id[c["parentId"]]
        assert (
            parent.get("type") == "message"
            and parent["message"]["role"] == "assistant"
            and parent["message"].get("stopReason") == "stop"
        ), (c["id"], parent.get("type"))
    cleared = store.load(real).last_cleared
    assert len(comps) >= ROUNDS // 4, f"only {len(comps)} of {asked} requests were committed (last cleared: {cleared})"
    assert not [r for r in fake.requests if "context summarization assistant" in json.dumps(r["body"])]
