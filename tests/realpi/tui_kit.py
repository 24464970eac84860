"""Pi's interactive TUI under tmux, on a private tmux server (`tmux -L <unique name>`), so
tests never touch a user's tmux sessions and never collide with each other."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ENV_KEYS = (
    "HOME",
    "PI_CODING_AGENT_DIR",
    "PI_OFFLINE",
    "PATH",
    "FABRIC_LSP_COMMAND",
    "PI_SKIP_VERSION_CHECK",
    "PI_TELEMETRY",
)


def wait_for(pred: Callable[[], Any], timeout: float = 10.0, what: str = "condition", every: float = 0.05) -> Any:
    """Poll `pred` until it returns a true value (returned) or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(every)


class Tmux:
    """One private tmux server; `close()` kills it (and every Pi it runs)."""

    def __init__(self) -> None:
        self.socket = f"fabric-realpi-{os.getpid()}-{uuid.uuid4().hex[:8]}"

    def run(self, *args: str, check: bool = True) -> str:
        out = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30)
        if check:
            assert out.returncode == 0, (args, out.stderr)
        return out.stdout

    def start(self, name: str, command: str, width: int = 200, height: int = 50) -> Pane:
        self.run("new-session", "-d", "-s", name, "-x", str(width), "-y", str(height), command)
        return Pane(self, name)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)


class Pane:
    def __init__(self, tmux: Tmux, name: str) -> None:
        self.tmux = tmux
        self.name = name

    def screen(self) -> str:
        return self.tmux.run("capture-pane", "-p", "-J", "-t", self.name)

    def type(self, text: str) -> None:
        self.tmux.run("send-keys", "-t", self.name, "-l", text)

    def enter(self) -> None:
        self.tmux.run("send-keys", "-t", self.name, "Enter")

    def submit(self, text: str) -> None:
        self.type(text)
        self.enter()

    def pid(self) -> int:
        """The pid of the process the pane runs (Pi, started with `exec`)."""
        return int(self.tmux.run("display-message", "-p", "-t", self.name, "#{pane_pid}").strip())

    def wait_screen(self, pred: Callable[[str], bool], timeout: float, what: str) -> str:
        last = [""]

        def look() -> str | None:
            last[0] = self.screen()
            return last[0] if pred(last[0]) else None

        try:
            return wait_for(look, timeout, what)
        except AssertionError as err:
            raise AssertionError(f"{err}; the screen:\n{last[0]}") from None


def pi_command(real: Any, proj: Path, env: dict[str, str], args: list[str]) -> str:
    """A shell command that runs Pi's TUI in `proj` with `env` (Pi replaces the shell: the
    pane's pid is Pi's)."""
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items() if k in ENV_KEYS)
    argv = " ".join(shlex.quote(a) for a in [str(real.node), str(real.cli), *args])
    return f"cd {shlex.quote(str(proj))} && exec env TERM=xterm-256color {exports} {argv}"


def session_files(agent: Path) -> list[Path]:
    return sorted((agent / "sessions").glob("*/*.jsonl"))


def newest_session(agent: Path) -> Path | None:
    files = session_files(agent)
    return files[-1] if files else None
