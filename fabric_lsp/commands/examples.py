"""`fabric-lsp examples DIR`: write the bundled example agent dir out, so that a new user
can point the server, the CLI and the editors at it before they have sessions of their own.

The copy is a plain agent dir (``DIR/sessions/<encoded cwd>/<ts>_<id>.jsonl``), writable,
so intents can be committed to it; the package's own copy is never touched.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import stat
import sys
from datetime import datetime
from pathlib import Path
from typing import Callable

from fabric_lsp.examples import example_agent_dir

LONG_SESSION_PREFIX = "01a18ac0"  # the example session long enough to compact at Pi's defaults


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="directory to write the example agent dir to (created)")
    p.add_argument("--force", action="store_true", help="write into DIR even when it is not empty "
                   "(replaces DIR/sessions; other files in DIR are left alone)")


def _non_empty(path: Path) -> bool:
    try:
        return any(path.iterdir())
    except NotADirectoryError:
        return True
    except FileNotFoundError:
        return False


def write_examples(dest: Path, *, force: bool = False) -> list[Path]:
    """Copy the bundled sessions to ``dest/sessions`` and return the files written.

    Raises FileExistsError when ``dest`` is a file, or a non-empty directory without `force`.
    """
    if dest.exists() and not dest.is_dir():
        raise FileExistsError(f"{dest} exists and is not a directory")
    if _non_empty(dest) and not force:
        raise FileExistsError(f"{dest} is not empty (use --force to replace its sessions/)")
    source = example_agent_dir() / "sessions"
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / "sessions"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, copy_function=shutil.copyfile)  # no read-only modes or mtimes
    written = sorted(target.rglob("*.jsonl"))
    for path in written:
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)
        # mtime = the last append, as for a real session (a package install loses the
        # generator's mtimes; recency order and "quiet" checks depend on them).
        last_ms = _last_timestamp_ms(path)
        if last_ms is not None:
            os.utime(path, ns=(last_ms * 1_000_000, last_ms * 1_000_000))
    return written


def _last_timestamp_ms(path: Path) -> int | None:
    with open(path, "rb") as fh:
        fh.seek(max(0, path.stat().st_size - 65536))
        tail = fh.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    try:
        stamp = json.loads(tail).get("timestamp")
        return int(datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp() * 1000)
    except (ValueError, AttributeError, TypeError):
        return None


def next_steps(dest: Path) -> list[str]:
    d = shlex.quote(str(dest))
    return [
        "Next, try:",
        f"  fabric-lsp sessions --agent-dir {d} --scope global",
        f"  fabric-lsp recall --agent-dir {d} --scope global convert_anomaly",
        f"  PI_CODING_AGENT_DIR={d} fabric-lsp preview {LONG_SESSION_PREFIX}   # a real compaction at Pi's defaults",
        f"  fabric-lsp demo --agent-dir {d}",
        "Editors read the same variable (or the fabric.agentDir setting):",
        f"  PI_CODING_AGENT_DIR={d} nvim {d}/sessions/*orbit*/*{LONG_SESSION_PREFIX}*.jsonl",
        f"  PI_CODING_AGENT_DIR={d} code {d}",
    ]


def run(args: argparse.Namespace, out: Callable[[str], None] = print) -> int:
    dest = Path(args.dir).expanduser().resolve()
    try:
        files = write_examples(dest, force=bool(args.force))
    except FileExistsError as err:
        sys.stderr.write(f"fabric-lsp examples: {err}\n")
        return 2
    except OSError as err:
        sys.stderr.write(f"fabric-lsp examples: cannot write {dest}: {err}\n")
        return 1
    projects = sorted({f.parent.name for f in files})
    out(f"Wrote {len(files)} example sessions ({len(projects)} projects) to {dest}/sessions")
    for line in next_steps(dest):
        out(line)
    return 0


SUBCOMMANDS = {
    "examples": ("write the bundled example agent dir to DIR, to try everything on", add_arguments, run),
}
