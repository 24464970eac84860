"""`fabric-lsp pi install` / `uninstall`: the Pi extension (editors/pi) in Pi's agent dir,
and what uninstalling clears (our own files, the pending compaction requests). Loaded only
for those two actions: the bridge actions Pi runs many times never import it."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

EXTENSION_CONFIG = "fabric-lsp.json"  # beside the extension: the command it runs

# -- install --------------------------------------------------------------------------


def extension_source() -> Path:
    """The Pi package: editors/pi of a checkout, else the copy shipped in the wheel."""
    here = Path(__file__).resolve()
    for candidate in (here.parents[2] / "editors" / "pi", here.parents[1] / "pi_package"):
        if (candidate / "package.json").is_file() and (candidate / "extensions" / "fabric.ts").is_file():
            return candidate
    raise FileNotFoundError("the Pi extension files are not installed with this fabric-lsp")


def extension_command() -> list[str]:
    """The command the installed extension runs: this interpreter by its absolute path, in
    isolated mode. `-I` keeps the current directory (the project Pi runs in) and the
    script's directory off `sys.path` and ignores PYTHON* variables and the user's site
    directory, so no file of the project can be imported in place of fabric_lsp or of a
    module it uses; a venv's own site-packages stay (sys.prefix is the venv).

    The path is made absolute but symlinks are kept: a venv's `bin/python` is usually a
    symlink to the base interpreter, and resolving it would leave the venv."""
    exe = sys.executable
    if not exe:
        raise RuntimeError(
            "this Python does not know its own interpreter path (sys.executable is empty): "
            "run `fabric-lsp pi install` with the python that has fabric-lsp installed"
        )
    return [os.path.abspath(exe), "-I", "-m", "fabric_lsp"]


def _our_install(target: Path) -> bool:
    """Whether `target` is a directory (not a symlink) holding the package we install."""
    if target.is_symlink() or not target.is_dir():
        return False
    try:
        return json.loads((target / "package.json").read_text(encoding="utf-8")).get("name") == "fabric-lsp-pi"
    except (OSError, ValueError, AttributeError):
        return False


def install(agent_dir: Path, command: list[str]) -> Path:
    """Copy the extension into `<agentDir>/extensions/fabric-lsp/` with a config naming
    the exact command that runs this fabric-lsp."""
    source = extension_source()
    target = agent_dir / "extensions" / "fabric-lsp"
    if target.is_symlink() or target.exists():
        if not _our_install(target):
            raise RuntimeError(
                f"{target} exists and is not an earlier `fabric-lsp pi install` "
                "(no package.json named fabric-lsp-pi): move it away, then run this again"
            )
        shutil.rmtree(target)
    target.mkdir(parents=True)
    shutil.copy2(source / "package.json", target / "package.json")
    if (source / "README.md").is_file():  # package.json lists it
        shutil.copy2(source / "README.md", target / "README.md")
    (target / "extensions").mkdir()
    shutil.copy2(source / "extensions" / "fabric.ts", target / "extensions" / "fabric.ts")
    (target / EXTENSION_CONFIG).write_text(json.dumps({"command": command}, indent=2) + "\n", encoding="utf-8")
    return target


UNINSTALLED_BY = "cleared by `fabric-lsp pi uninstall`"


def clear_pending_intents(agent_dir: Path) -> list[str]:
    """Clear every pending intent (and claim) under `<agentDir>/fabric-lsp/intents`: without
    the extension nothing holds a live Pi's session, and a server would append such an
    intent into the file of a Pi that has it open (an orphan). The sessions it cleared."""
    from fabric_lsp.engine.intents.controller import now_ms
    from fabric_lsp.engine.intents.service import default_state_dir
    from fabric_lsp.engine.intents.store import IntentStore

    store = IntentStore(default_state_dir(str(agent_dir)))
    if not store.state_dir.is_dir():
        return []
    cleared: list[str] = []
    for session, _mtime in store.sessions():
        with store.locked(session):
            state = store.load(session)
            if state.pending is None and state.claim is None:
                continue
            if state.pending is not None and state.pending_id is not None:
                state.last_cleared = {"intentId": state.pending_id, "reason": UNINSTALLED_BY, "at": now_ms()}
                cleared.append(session)
            state.pending = state.pending_id = None
            state.claim = None
            store.save(state)
    return cleared


def _loaded_elsewhere(agent_dir: Path) -> list[str]:
    """Entries of Pi's `<agentDir>/settings.json` (`extensions`, `packages`) that still load
    a fabric-lsp Pi package (a directory whose package.json is named fabric-lsp-pi)."""
    try:
        settings = json.loads((agent_dir / "settings.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    found: list[str] = []
    for key in ("extensions", "packages"):
        entries = settings.get(key) if isinstance(settings, dict) else None
        for entry in entries if isinstance(entries, list) else []:
            source = entry.get("source") if isinstance(entry, dict) else entry
            if not isinstance(source, str):
                continue
            folder = Path(os.path.expanduser(source))
            if not folder.is_absolute():
                folder = agent_dir / folder
            if folder.is_file():
                folder = folder.parent.parent if folder.parent.name == "extensions" else folder.parent
            try:
                name = json.loads((folder / "package.json").read_text(encoding="utf-8")).get("name")
            except (OSError, ValueError, AttributeError):
                continue
            if name == "fabric-lsp-pi":
                found.append(f'{source} ("{key}" in {agent_dir / "settings.json"})')
    return found


def uninstall(agent_dir: Path) -> tuple[Path | None, list[str], list[str]]:
    """Remove `<agentDir>/extensions/fabric-lsp` (only an earlier `fabric-lsp pi install`,
    with its fabric-lsp.json) and clear every pending intent. Returns (the directory
    removed or None when there was none, the sessions whose intent was cleared, settings
    entries that still load the package). RuntimeError when the directory is not ours
    (nothing is changed then)."""
    target = agent_dir / "extensions" / "fabric-lsp"
    removed: Path | None = None
    if target.is_symlink() or target.exists():
        if not _our_install(target):
            raise RuntimeError(
                f"{target} is not an earlier `fabric-lsp pi install` (no package.json named "
                "fabric-lsp-pi, or a symlink): left as it is, nothing was changed"
            )
        shutil.rmtree(target)
        removed = target
    return removed, clear_pending_intents(agent_dir), _loaded_elsewhere(agent_dir)


def run_uninstall(agent_dir: Path) -> int:
    try:
        removed, cleared, elsewhere = uninstall(agent_dir)
    except (OSError, RuntimeError) as err:
        print(f"fabric-lsp pi uninstall: {err}", file=sys.stderr)
        return 1
    lines = [
        f"removed the Pi extension and its fabric-lsp.json from {removed}"
        if removed is not None
        else f"no `fabric-lsp pi install` in {agent_dir / 'extensions' / 'fabric-lsp'}"
    ]
    lines.append(
        f"cleared {len(cleared)} pending compaction request(s)" + (": " + ", ".join(cleared) if cleared else "")
    )
    for entry in elsewhere:
        lines.append(f"Pi still loads the extension from {entry}: remove it with `pi remove` or edit that file")
    lines.append("a Pi running now keeps the extension until it restarts (or /reload)")
    print("\n".join(lines))
    return 0
