"""Every view of the Neovim plugin, as a user sees it, on the bundled examples: real Neovim
0.11 in tmux on a private socket, the real server, `fabric-lsp examples` as the agent dir
and its orbit project as the working directory. Each step waits for what the view must show
(and fails with the screen when it does not), then prints the screen to
`editors/neovim/images/nvim-<name>.png` style pictures in `$FABRIC_NVIM_SCREENSHOTS` (or
the test's temporary dir).

The same colours and text as the terminal: see screens.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from screens import Tmux, ansi_html, png
from test_neovim import PLUGIN, nvim_binary, server_binary

pytestmark = pytest.mark.editor

WIDTH, HEIGHT = 150, 42
PIXELS = (1240, 740)  # 150 x 42 cells at 14 px DejaVu Sans Mono, with the page's padding


def test_ansi_html_keeps_text_and_colours():
    page = ansi_html("a\x1b[1;38;5;196mB<\x1b[0m \x1b[48;2;1;2;3mc\x1b[m\x1b[2Kd", "t")
    assert '<span style="color:#ff0000;font-weight:bold">B&lt;</span>' in page
    assert '<span style="background:#010203">c</span>' in page
    assert ">d</span>" in page and "\x1b" not in page


def test_every_view_on_the_examples(tmp_path: Path) -> None:
    agent = tmp_path / "ex"
    server = server_binary()
    made = subprocess.run([str(server), "examples", str(agent)], capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    project = agent / "projects" / "orbit"
    session = next((agent / "sessions").glob("*orbit*/*01a18ac0*.jsonl"))
    shots = Path(os.environ.get("FABRIC_NVIM_SCREENSHOTS", str(tmp_path / "shots"))).resolve()
    shots.mkdir(parents=True, exist_ok=True)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NVIM", "VIM", "XDG_", "PI_", "FABRIC_", "TMUX"))}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(tmp_path / "xdg" / "config"),
        XDG_DATA_HOME=str(tmp_path / "xdg" / "data"),
        XDG_STATE_HOME=str(tmp_path / "xdg" / "state"),
        XDG_CACHE_HOME=str(tmp_path / "xdg" / "cache"),
        PATH=f"{server.parent}{os.pathsep}{env.get('PATH', '')}",
        PI_CODING_AGENT_DIR=str(agent),
        TERM="xterm-256color",
    )
    tmux = Tmux(f"fabric-shots-{os.getpid()}", WIDTH, HEIGHT, env)
    nvim = [
        str(nvim_binary()),
        "--clean",
        "-n",
        "-i",
        "NONE",
        "--cmd",
        f"set rtp^={PLUGIN}",
        "--cmd",
        "set termguicolors",
        "--cmd",
        "set winborder=rounded",
        "orbit/tle.py",
    ]

    def shot(name: str) -> None:
        png(ansi_html(tmux.screen(colours=True), name), shots / f"nvim-{name}.png", *PIXELS)

    tmux.start(nvim, project)
    try:
        # The file-history CodeLens on a file the example sessions edited.
        tmux.wait_for("the CodeLens", lambda s: "Pi: 3 sessions" in s and "edited in 01a18ac0" in s)
        shot("codelens")
        # :Fabric history — what the sessions did to the file, one line each.
        tmux.keys(":Fabric history", "Enter")
        tmux.wait_for("the history list", lambda s: "Fabric history of orbit/tle.py" in s and "edit succeeded" in s)
        shot("history")
        tmux.keys("Escape")
        tmux.wait_for("the history closed", lambda s: "Type number" not in s)
        # :Fabric recall — the picker over every matching entry.
        tmux.keys(":Fabric recall ZeroDivisionError", "Enter")
        tmux.wait_for("the recall picker", lambda s: 'Fabric recall "ZeroDivisionError"' in s and "[user]" in s)
        shot("recall")
        # <CR> opens the entry expanded.
        tmux.keys("Enter")
        tmux.wait_for("the expanded entry", lambda s: "# pi-entry:01a18ac0" in s and "index 87" in s)
        shot("entry")
        tmux.keys(":only", "Enter")
        # `/` in the recall float: a search prompt above the list; typing searches again and
        # redraws the list in place (issue 34, finding 12).
        tmux.keys(":Fabric recall ZeroDivisionError", "Enter")
        tmux.wait_for("the recall picker", lambda s: 'Fabric recall "ZeroDivisionError"' in s and "/ search" in s)
        tmux.keys("/")
        tmux.wait_for("the search prompt", lambda s: "search as you type" in s)
        tmux.keys("C-u", "epoch")
        tmux.wait_for("the list for the typed text", lambda s: 'Fabric recall "epoch"' in s)
        shot("recall-search")
        tmux.keys("C-c")
        tmux.wait_for("the list closed", lambda s: "search as you type" not in s and "/ search" not in s)
        # The session file: K on an entry's line shows what the entry is.
        tmux.keys(f":edit {session}", "Enter")
        tmux.wait_for("the session file", lambda s: '"type":"session"' in s)
        tmux.keys(":92", "Enter", "K")
        tmux.wait_for("the hover", lambda s: "Pi session entry message" in s and "reference: pi-entry:" in s)
        shot("hover")
        tmux.keys("Escape", "gg")
        # :Fabric preview on the session file — the compaction plan.
        tmux.keys(":Fabric preview", "Enter")
        tmux.wait_for(
            "the compaction preview",
            lambda s: "# Compaction preview" in s and "Compacting now would replace" in s,
            timeout=60,
        )
        screen = tmux.screen()
        # Every branch entry is in one range: the two settings entries before the first
        # message are named, not left out (issue 34, finding 7).
        assert (
            "- settings before the conversation (not summarized): model_change, thinking_level_change: 2 entries"
            in screen
        ), screen
        shot("preview")
        # Entry ids in the preview: K shows the entry, gd jumps to its line (finding 15).
        tmux.keys("/9faf909a", "Enter", "K")
        tmux.wait_for("the entry float", lambda s: "# pi-entry:01a18ac0-60ba-7a1f-9785-c60c123c3fed/9faf909a" in s)
        shot("preview-entry")
        tmux.keys("Escape", "gd")
        tmux.wait_for("the session file", lambda s: '"type":"thinking_level_change"' in s)
        # The ruler of the JSONL window: the cursor is on the entry's line (4).
        tmux.wait_for("the jump to the entry's line", lambda s: re.search(r"\.jsonl\s+4,1\s", s) is not None)
        # The cut is marked in the session file: a virtual line above the first kept entry.
        tmux.keys(":689", "Enter", "zz")
        tmux.wait_for(
            "the cut mark",
            lambda s: (
                "compaction preview: 685 entries (lines 4–688) above are summarized; from here on 122 are kept verbatim"
                in s
            ),
        )
        shot("cut-mark")
        tmux.keys(":only", "Enter")
        # :Fabric sessions — every session, titled.
        tmux.keys(":Fabric sessions", "Enter")
        tmux.wait_for("the sessions list", lambda s: "Fabric sessions (project)" in s and "SGP4 speed-up" in s)
        shot("sessions")
    finally:
        tmux.stop()
    for name in (
        "codelens",
        "history",
        "recall",
        "recall-search",
        "entry",
        "hover",
        "preview",
        "preview-entry",
        "cut-mark",
        "sessions",
    ):
        assert (shots / f"nvim-{name}.png").stat().st_size > 10_000, name
    # nothing but the pictures lands where they go (it may be editors/neovim/images)
    others = sorted(p.name for p in shots.iterdir() if not (p.is_file() and p.name.endswith(".png")))
    assert not others, f"the screenshot dir got more than pictures: {others}"


if __name__ == "__main__":  # pragma: no cover - a helper to look at one screen
    sys.exit(pytest.main([__file__, "-q"]))
