"""Pictures of real Neovim: the plugin runs in a real `nvim` inside tmux (a private socket,
`tmux -L <name>`, so parallel runs never type into each other); `capture-pane -e` gives the
screen with its colours (SGR escapes), `ansi_html` turns that into an HTML page, and
headless Chromium prints the page to a PNG. No screen-grabbing tool is needed."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

# xterm's 16 colours (the palette a terminal without a theme shows)
_BASE16 = [
    "#000000",
    "#cd0000",
    "#00cd00",
    "#cdcd00",
    "#0000ee",
    "#cd00cd",
    "#00cdcd",
    "#e5e5e5",
    "#7f7f7f",
    "#ff0000",
    "#00ff00",
    "#ffff00",
    "#5c5cff",
    "#ff00ff",
    "#00ffff",
    "#ffffff",
]
_FG, _BG = "#d4d4d4", "#1e1e1e"
_SGR = re.compile(r"\x1b\[([0-9;:]*)m")


def _xterm256(n: int) -> str:
    if n < 16:
        return _BASE16[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return f"#{steps[n // 36]:02x}{steps[(n // 6) % 6]:02x}{steps[n % 6]:02x}"
    level = 8 + 10 * (n - 232)
    return f"#{level:02x}{level:02x}{level:02x}"


@dataclass
class _Style:
    fg: str | None = None
    bg: str | None = None
    bold: bool = False
    italic: bool = False
    underline: bool = False
    reverse: bool = False

    def css(self) -> str:
        fg, bg = self.fg, self.bg
        if self.reverse:
            fg, bg = (bg or _BG), (fg or _FG)
        parts = []
        if fg:
            parts.append(f"color:{fg}")
        if bg:
            parts.append(f"background:{bg}")
        if self.bold:
            parts.append("font-weight:bold")
        if self.italic:
            parts.append("font-style:italic")
        if self.underline:
            parts.append("text-decoration:underline")
        return ";".join(parts)


def _apply(style: _Style, params: str) -> _Style:
    codes = [int(c) if c else 0 for c in re.split("[;:]", params)] if params else [0]
    s = _Style(**style.__dict__)
    i = 0
    while i < len(codes):
        c = codes[i]
        if c == 0:
            s = _Style()
        elif c == 1:
            s.bold = True
        elif c == 3:
            s.italic = True
        elif c == 4:
            s.underline = True
        elif c == 7:
            s.reverse = True
        elif c == 22:
            s.bold = False
        elif c == 23:
            s.italic = False
        elif c == 24:
            s.underline = False
        elif c == 27:
            s.reverse = False
        elif 30 <= c <= 37:
            s.fg = _BASE16[c - 30]
        elif 90 <= c <= 97:
            s.fg = _BASE16[c - 90 + 8]
        elif 40 <= c <= 47:
            s.bg = _BASE16[c - 40]
        elif 100 <= c <= 107:
            s.bg = _BASE16[c - 100 + 8]
        elif c == 39:
            s.fg = None
        elif c == 49:
            s.bg = None
        elif c in (38, 48) and i + 1 < len(codes):
            kind = codes[i + 1]
            if kind == 5 and i + 2 < len(codes):
                colour = _xterm256(codes[i + 2] % 256)
                i += 2
            elif kind == 2 and i + 4 < len(codes):
                r, g, b = (max(0, min(255, v)) for v in codes[i + 2 : i + 5])
                colour = f"#{r:02x}{g:02x}{b:02x}"
                i += 4
            else:
                colour = None
                i += 1
            if c == 38:
                s.fg = colour
            else:
                s.bg = colour
        i += 1
    return s


def ansi_html(screen: str, title: str) -> str:
    """An HTML page showing `screen` (text with SGR colour escapes) as a terminal would;
    other escapes are dropped. The text is HTML-escaped: nothing in it is markup."""
    out: list[str] = []
    style = _Style()
    for line in screen.split("\n"):
        pos = 0
        for m in _SGR.finditer(line):
            text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line[pos : m.start()])
            if text:
                out.append(f'<span style="{style.css()}">{html.escape(text)}</span>')
            style = _apply(style, m.group(1))
            pos = m.end()
        text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line[pos:])
        if text:
            out.append(f'<span style="{style.css()}">{html.escape(text)}</span>')
        out.append("\n")
    body = "".join(out).rstrip("\n")
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>"
        f"body{{margin:0;background:{_BG};}}"
        f"pre{{margin:0;padding:8px;color:{_FG};background:{_BG};"
        "font:14px/1.25 'DejaVu Sans Mono','Liberation Mono',monospace;white-space:pre;}}"
        "</style></head><body><pre>" + body + "</pre></body></html>\n"
    )


@dataclass
class Tmux:
    """One tmux server on a private socket, one window of `width` x `height` cells."""

    name: str
    width: int = 150
    height: int = 42
    env: dict[str, str] = field(default_factory=dict)

    def run(self, *args: str) -> str:
        proc = subprocess.run(
            ["tmux", "-L", self.name, *args], capture_output=True, text=True, timeout=30, env=self.env or None
        )
        if proc.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    def start(self, command: list[str], cwd: Path) -> None:
        self.run(
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            str(self.width),
            "-y",
            str(self.height),
            "-c",
            str(cwd),
            *command,
        )

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "0", *keys)

    def screen(self, colours: bool = False) -> str:
        return self.run("capture-pane", "-p", "-t", "0", *(["-e"] if colours else []))

    def wait_for(self, what: str, pred, timeout: float = 30.0) -> str:
        """The screen once `pred(screen)` holds (polled; bounded)."""
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if pred(text):
                return text
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}; the screen:\n{text}")

    def stop(self) -> None:
        subprocess.run(["tmux", "-L", self.name, "kill-server"], capture_output=True, timeout=30)


def png(html_text: str, out: Path, width: int, height: int) -> None:
    """`html_text` printed to `out` by headless Chromium."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise AssertionError("chromium is missing (scripts/deps/vscode.sh installs it)")
    # the page and Chromium's profile in a directory of their own, never beside the
    # pictures (FABRIC_NVIM_SCREENSHOTS may be editors/neovim/images)
    with tempfile.TemporaryDirectory(prefix="fabric-nvim-shot-") as tmp:
        page = Path(tmp) / "screen.html"
        page.write_text(html_text, encoding="utf-8")
        proc = subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--user-data-dir={Path(tmp) / 'chromium'}",
                f"--window-size={width},{height}",
                f"--screenshot={out}",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    if proc.returncode != 0 or not out.is_file():
        raise AssertionError(f"chromium did not write {out}: {proc.stderr[-2000:]}")
