"""The Pi bridge in Pi's interactive TUI, driven through tmux: an editor's intent is
committed by the idle Pi, the TUI shows the compaction, and the next request carries
exactly our summary."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess

import pytest

from fake_openai import FakeOpenAI
from realpi_kit import NODE, PI_CLI, SUMMARY_PREFIX, SUMMARY_SUFFIX, text_of
from realpi_kit import real_pi  # noqa: F401 (fixture)
from test_realpi_bridge import EXTENSION, FABRIC, World, compactions, lines, wait_for, write_agent

pytestmark = pytest.mark.realpi


def tmux(*args: str) -> str:
    out = subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, (args, out.stderr)
    return out.stdout


def test_tui_commits_an_editor_intent_and_sends_our_summary(tmp_path, real_pi):  # noqa: F811
    assert shutil.which("tmux"), "tmux is installed by scripts/deps/realpi.sh"
    with FakeOpenAI(answer="Sure: " + "detail " * 300, realistic_usage=True) as fake:
        w = World(tmp_path, fake)
        write_agent(w.agent, fake.base_url)
        env = w.env()
        name = f"fabric-tui-{tmp_path.name}"[:60]
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()
                           if k in ("HOME", "PI_CODING_AGENT_DIR", "PI_OFFLINE", "PATH", "FABRIC_LSP_COMMAND"))
        command = f"cd {shlex.quote(str(w.proj))} && env {exports} {NODE} {PI_CLI} -e {EXTENSION}"
        tmux("new-session", "-d", "-s", name, "-x", "160", "-y", "48", command)
        try:
            def screen() -> str:
                return tmux("capture-pane", "-p", "-t", name)

            wait_for(lambda: screen().strip(), 30, "the TUI")
            for i in range(3):
                before = len(fake.requests)
                tmux("send-keys", "-t", name, "-l", f"step {i}: refactor module {i}. " + "context " * 600)
                tmux("send-keys", "-t", name, "Enter")
                wait_for(lambda: len(fake.requests) > before, 60, f"the model request of turn {i}")
                wait_for(lambda: (files := list((w.agent / "sessions").glob("*/*.jsonl")))
                         and sum(1 for e in lines(files[0]) if e.get("type") == "message"
                                 and e["message"]["role"] == "assistant") == i + 1, 60, f"turn {i} persisted")
            session = w.session()
            leases = w.agent / "fabric-lsp" / "leases"
            leaf = lines(session)[-1]["id"]
            wait_for(lambda: any(json.loads(p.read_text()).get("leafId") == leaf for p in leases.glob("*.json")),
                     30, "the settled lease")
            out = subprocess.run([*FABRIC, "compact", str(session)], env=env, capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, out.stderr
            comp = wait_for(lambda: compactions(session), 10, "the TUI's commit")[0]
            assert comp["parentId"] == leaf and comp["fromHook"] is True
            wait_for(lambda: "ompact" in screen(), 10, "the compaction on screen")
            before = len(fake.requests)
            tmux("send-keys", "-t", name, "-l", "what next?")
            tmux("send-keys", "-t", name, "Enter")
            wait_for(lambda: len(fake.requests) > before, 60, "the request after the compaction")
            msgs = fake.requests[before]["body"]["messages"]
            first_user = next(m for m in msgs if m["role"] == "user")
            assert text_of(first_user) == SUMMARY_PREFIX + comp["summary"] + SUMMARY_SUFFIX
            assert not [r for r in fake.requests if "context summarization assistant" in json.dumps(r["body"])]
        finally:
            subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True, timeout=30)
