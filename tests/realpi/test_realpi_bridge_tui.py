"""The Pi bridge in Pi's interactive TUI, driven through tmux: an editor's intent is
committed by the idle Pi, the TUI shows the compaction, and the next request carries
exactly our summary."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from fake_openai import FakeOpenAI
from realpi_kit import (
    SUMMARY_PREFIX,
    SUMMARY_SUFFIX,
    real_pi,  # noqa: F401 (fixture)
    text_of,
)
from test_realpi_bridge import EXTENSION, FABRIC, World, compactions, lines, wait_for, write_agent
from tui_kit import Tmux, pi_command

pytestmark = pytest.mark.realpi


def test_tui_commits_an_editor_intent_and_sends_our_summary(tmp_path, real_pi):  # noqa: F811
    assert shutil.which("tmux"), "tmux is installed by scripts/deps/realpi.sh"
    tmux = Tmux()
    with FakeOpenAI(answer="Sure: " + "detail " * 300, realistic_usage=True) as fake:
        w = World(tmp_path, fake, real_pi)
        write_agent(w.agent, fake.base_url)
        env = w.env()
        pane = tmux.start("pi", pi_command(real_pi, w.proj, env, ["-e", str(EXTENSION)]), width=160, height=48)
        try:
            pane.wait_screen(lambda s: bool(s.strip()), 30, "the TUI")
            for i in range(3):
                before = len(fake.requests)
                pane.submit(f"step {i}: refactor module {i}. " + "context " * 600)
                wait_for(lambda: len(fake.requests) > before, 60, f"the model request of turn {i}")
                wait_for(
                    lambda: (
                        (files := list((w.agent / "sessions").glob("*/*.jsonl")))
                        and sum(
                            1
                            for e in lines(files[0])
                            if e.get("type") == "message" and e["message"]["role"] == "assistant"
                        )
                        == i + 1
                    ),
                    60,
                    f"turn {i} persisted",
                )
            session = w.session()
            leases = w.agent / "fabric-lsp" / "leases"
            leaf = lines(session)[-1]["id"]
            wait_for(
                lambda: any(json.loads(p.read_text()).get("leafId") == leaf for p in leases.glob("*.json")),
                30,
                "the settled lease",
            )
            out = subprocess.run(
                [*FABRIC, "compact", str(session)], env=env, capture_output=True, text=True, timeout=60
            )
            assert out.returncode == 0, out.stderr
            comp = wait_for(lambda: compactions(session), 10, "the TUI's commit")[0]
            assert comp["parentId"] == leaf and comp["fromHook"] is True
            pane.wait_screen(lambda s: "ompact" in s, 10, "the compaction on screen")
            before = len(fake.requests)
            pane.submit("what next?")
            wait_for(lambda: len(fake.requests) > before, 60, "the request after the compaction")
            msgs = fake.requests[before]["body"]["messages"]
            first_user = next(m for m in msgs if m["role"] == "user")
            assert text_of(first_user) == SUMMARY_PREFIX + comp["summary"] + SUMMARY_SUFFIX
            assert not [r for r in fake.requests if "context summarization assistant" in json.dumps(r["body"])]
        finally:
            tmux.close()
