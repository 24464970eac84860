"""What the bridge shows in Pi's TUI (tmux, a private server), on every Pi version in
FABRIC_PI_VERSIONS: one persistent status line, and a second Pi on a held session warned
in both TUIs (the second one here also cannot run fabric-lsp: it holds the session all
the same and says so), with `compact-status` naming both holders."""

from __future__ import annotations

import json

import pytest
from fake_openai import FakeOpenAI
from realpi_kit import real_pi  # noqa: F401 (fixture)
from test_realpi_bridge import EXTENSION, LONG, World, lines, write_agent
from tui_kit import Tmux, pi_command, session_files, wait_for

from fabric_lsp.engine.session.lease import LeaseBook

pytestmark = pytest.mark.realpi

WIDTH = 400  # Pi cuts its footer at the terminal's width: wide enough for the whole line


def test_status_line_and_a_second_pi_warned_in_both_tuis(tmp_path, real_pi):  # noqa: F811
    tmux = Tmux()
    with FakeOpenAI(answer="Sure: " + "detail " * 300, realistic_usage=True) as fake:
        w = World(tmp_path, fake, real_pi)
        write_agent(w.agent, fake.base_url)
        try:
            a = tmux.start("a", pi_command(real_pi, w.proj, w.env(), ["-e", str(EXTENSION)]), width=WIDTH)
            a.wait_screen(lambda s: "fabric-lsp: bridge active" in s, 60, "A's status line")
            a.submit("step 0: outline the parser. " + LONG[:400])
            session = wait_for(
                lambda: (
                    (files := session_files(w.agent))
                    and any(e.get("type") == "message" and e["message"]["role"] == "assistant" for e in lines(files[0]))
                    and files[0]
                ),
                60,
                "A's first answer",
            )
            pid_a = a.pid()
            # B opens the same file, and cannot run fabric-lsp
            env_b = w.env(FABRIC_LSP_COMMAND=str(tmp_path / "no-such-fabric-lsp"))
            b = tmux.start(
                "b", pi_command(real_pi, w.proj, env_b, ["-e", str(EXTENSION), "--session", str(session)]), width=WIDTH
            )
            pid_b = b.pid()
            screen_b = b.wait_screen(
                lambda s: f"another Pi (pid {pid_a})" in s and "engine not found" in s,
                60,
                "B's warning and its engine status",
            )
            assert 'compaction.engine: "pi"' in screen_b and "fabric-lsp pi install" in screen_b
            a.wait_screen(lambda s: f"another Pi (pid {pid_b})" in s, 20, "A's warning")
            # one line: the status is not repeated per turn or per problem
            assert a.screen().count("fabric-lsp: bridge active") == 1
            # B holds the session although fabric-lsp cannot run there; compact-status names both
            live = {x.pid for x in LeaseBook(w.agent).all_live()}
            assert {pid_a, pid_b} <= live, live
            out = w.fabric("compact-status", str(session))
            assert "held by 2 live Pis" in out.stdout and f"pid {pid_a}" in out.stdout and f"pid {pid_b}" in out.stdout
            status = json.loads(w.fabric("compact-status", str(session), "--json").stdout)
            assert status["heldBy"]["pid"] in (pid_a, pid_b)
            # --json names every holder too (oldest hold first), with its Pi version
            assert [h["pid"] for h in status["holders"]] == [pid_a, pid_b], status
            assert {h.get("piVersion") for h in status["holders"]} == {real_pi.version}, status
            # B leaves: A's warning goes away, its status line stays
            tmux.run("kill-session", "-t", "b")
            a.wait_screen(lambda s: "WARNING" not in s and "fabric-lsp: bridge active" in s, 20, "A's warning cleared")
        finally:
            tmux.close()
