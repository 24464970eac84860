"""`fabric-lsp examples DIR`: write the bundled example agent dir out, with the small
projects its sessions worked on, so that a new user can point the server, the CLI and the
editors at it before they have sessions of their own.

DIR becomes a plain agent dir holding the projects too::

    DIR/.fabric-examples.json               what this command wrote (see below)
    DIR/projects/orbit/…, DIR/projects/ledger/…   the projects, as the sessions left them
    DIR/sessions/<encoded cwd>/<ts>_<id>.jsonl     the sessions, their cwd rewritten to the
                                                   project under DIR/projects

so that opening DIR/projects/orbit in an editor (with PI_CODING_AGENT_DIR=DIR) shows each
file's history as a CodeLens, hovers and recall over the sessions. The copy is writable
(intents may be committed to it); the package's own copy is never touched.

Safety: it writes only into a new or empty DIR, or into a DIR this command wrote before
(marked by DIR/.fabric-examples.json, which lists every file it wrote), and then, with
--force, only replaces files it listed there. It never deletes or overwrites anything else,
and never follows a symbolic link: DIR, any directory below it, or a listed file that is a
symbolic link stops it before anything is written.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import stat
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from fabric_lsp import __version__
from fabric_lsp.engine.session import encode_cwd
from fabric_lsp.examples import example_session_dir
from fabric_lsp.examples.projects import RECORDED_ROOT, project_files

LONG_SESSION_PREFIX = "01a18ac0"  # the example session long enough to compact at Pi's defaults
MARKER = ".fabric-examples.json"
MARKER_KIND = "fabric-lsp examples"
PROJECT_FILE = "orbit/tle.py"  # a source file of the orbit project with history in several sessions


class ExamplesRefused(Exception):
    """DIR cannot be written without touching something this command did not create."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "dir",
        metavar="DIR",
        help="directory to write the example agent dir and its projects to "
        "(created; must be new, empty, or written by an earlier `fabric-lsp examples`)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="write again into a DIR an earlier `fabric-lsp examples` "
        "wrote: replaces only the files it wrote (listed in DIR/" + MARKER + "); "
        "never touches other files",
    )


def last_timestamp_ms(data: bytes) -> int | None:
    tail = data.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    try:
        stamp = json.loads(tail).get("timestamp")
        return int(datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp() * 1000)
    except (ValueError, AttributeError, TypeError):
        return None


def _json_inner(s: str) -> bytes:
    """`s` as it appears inside a JSON string (escaped, without the quotes)."""
    return json.dumps(s, ensure_ascii=False)[1:-1].encode("utf-8")


def _rewrite_session(data: bytes, moves: dict[str, str], sessions_dir: Path, folders: dict[str, str]) -> bytes:
    """The session with every recorded project path moved (`moves`: recorded cwd → new cwd):
    the header's cwd, paths in tool calls and text; a header parentSession naming a session of
    the recorded agent dir is pointed at its copy under `sessions_dir`."""
    first, sep, rest = data.partition(b"\n")
    header = json.loads(first)
    cwd = header.get("cwd")
    if isinstance(cwd, str) and cwd in moves:
        header["cwd"] = moves[cwd]
    parent = header.get("parentSession")
    if isinstance(parent, str):
        folder, _, name = parent.rpartition("/")
        old_folder = folder.rpartition("/")[2]
        if old_folder in folders and name.endswith(".jsonl") and "/" not in name:
            header["parentSession"] = str(sessions_dir / folders[old_folder] / name)
    head = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    for old, new in moves.items():
        pattern = re.compile(re.escape(_json_inner(old)) + rb"(?![A-Za-z0-9_.\-])")
        replacement = _json_inner(new)
        rest = pattern.sub(lambda _m, r=replacement: r, rest)
    return head + sep + rest


def plan_examples(dest: Path, *, projects: bool = True) -> dict[str, tuple[bytes, int | None]]:
    """What to write under `dest`: ``{relative POSIX path: (bytes, mtime in ms or None)}``.

    With `projects`, the sessions' projects go to ``projects/<name>`` and the sessions' cwd
    (and the project paths they mention) are rewritten to them; without, the sessions are
    copied as recorded (cwd /home/user/projects/…).
    """
    source = example_session_dir()
    session_files = sorted(source.rglob("*.jsonl"))
    plan: dict[str, tuple[bytes, int | None]] = {}
    moves: dict[str, str] = {}
    folders: dict[str, str] = {}
    if projects:
        for cwd, files in sorted(project_files(session_files).items()):
            if not cwd.startswith(RECORDED_ROOT + "/"):
                continue
            name = cwd[len(RECORDED_ROOT) + 1 :]
            new_cwd = str(dest / "projects" / name)
            moves[cwd] = new_cwd
            folders[encode_cwd(cwd)] = encode_cwd(new_cwd)
            for rel, text in sorted(files.items()):
                plan[f"projects/{name}/{rel}"] = (text.encode("utf-8"), None)
    for f in session_files:
        data = f.read_bytes()
        folder = f.parent.name
        if projects:
            data = _rewrite_session(data, moves, dest / "sessions", folders)
            folder = folders.get(folder, folder)
        plan[f"sessions/{folder}/{f.name}"] = (data, last_timestamp_ms(data))
    return plan


def _read_marker(dest: Path) -> list[str] | None:
    """The files an earlier run listed in DIR's marker, or None when DIR has no marker of ours."""
    marker = dest / MARKER
    try:
        st = marker.lstat()
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise ExamplesRefused(f"{marker} is not a regular file (a symbolic link?); nothing was changed")
    try:
        data = json.loads(marker.read_bytes())
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("kind") != MARKER_KIND or not isinstance(data.get("files"), list):
        return None
    return [f for f in data["files"] if isinstance(f, str) and _safe_rel(f)]


def _safe_rel(rel: str) -> bool:
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and "\\" not in rel and all(p not in ("", ".", "..") for p in parts)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return path.lstat()
    except FileNotFoundError:
        return None


def _check_dirs(dest: Path, rel: str) -> None:
    """Every directory between DIR and the file is a real directory (or missing), never a link."""
    parent = dest
    for part in rel.split("/")[:-1]:
        parent = parent / part
        st = _lstat(parent)
        if st is None:
            return
        if stat.S_ISLNK(st.st_mode):
            raise ExamplesRefused(f"{parent} is a symbolic link; nothing was changed (remove it or choose another DIR)")
        if not stat.S_ISDIR(st.st_mode):
            raise ExamplesRefused(f"{parent} is in the way (not a directory); nothing was changed")


def _make_dirs(dest: Path, rel: str) -> None:
    parent = dest
    for part in rel.split("/")[:-1]:
        parent = parent / part
        try:
            os.mkdir(parent, 0o755)
        except FileExistsError:
            st = parent.lstat()
            if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
                raise ExamplesRefused(f"{parent} changed while writing (now not a directory); stopped") from None


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)


def _write_file(path: Path, data: bytes, *, ours: bool, mtime_ms: int | None = None) -> None:
    """Write `path`: created exclusively when it is not ours, never through a symbolic link."""
    flags = os.O_WRONLY | os.O_CREAT | _NOFOLLOW | _BINARY | (os.O_TRUNC if ours else os.O_EXCL)
    if ours:
        st = _lstat(path)
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise ExamplesRefused(f"{path} is not a regular file (a symbolic link?); stopped")
    fd = os.open(path, flags, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if mtime_ms is not None:
            ns = mtime_ms * 1_000_000
            if os.utime in os.supports_fd:
                os.utime(fd, ns=(ns, ns))
    finally:
        os.close(fd)
    if mtime_ms is not None and os.utime not in os.supports_fd:
        os.utime(path, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))


def _write_marker(dest: Path, files: list[str], *, ours: bool) -> None:
    body: dict[str, Any] = {
        "kind": MARKER_KIND,
        "version": __version__,
        "note": "written by `fabric-lsp examples`; `fabric-lsp examples --force DIR` replaces exactly these files",
        "files": sorted(files),
    }
    _write_file(dest / MARKER, (json.dumps(body, indent=1) + "\n").encode(), ours=ours)


def write_examples(dest: Path, *, force: bool = False, projects: bool = False) -> list[Path]:
    """Write the bundled sessions (and, with `projects`, their projects) under `dest`; return
    the session files written.

    Without `projects` the sessions keep their recorded cwd (/home/user/projects/…), as the
    tests that compare against the package's copy need; `fabric-lsp examples` passes
    ``projects=True``. Raises ExamplesRefused (nothing written) when `dest` is a file, a
    symbolic link, a non-empty directory this command did not write, or (without `force`)
    one it did write.
    """
    dest = Path(os.path.abspath(dest))
    st = _lstat(dest)
    previous: list[str] = []
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise ExamplesRefused(f"{dest} is a symbolic link; give the directory itself (nothing was changed)")
        if not stat.S_ISDIR(st.st_mode):
            raise ExamplesRefused(f"{dest} exists and is not a directory (nothing was changed)")
        if any(dest.iterdir()):
            listed = _read_marker(dest)
            if listed is None:
                raise ExamplesRefused(
                    f"{dest} is not empty and was not written by `fabric-lsp examples` (no {MARKER}): "
                    "choose a new or empty directory (nothing was changed)"
                )
            if not force:
                raise ExamplesRefused(
                    f"{dest} already holds the examples (from an earlier `fabric-lsp examples`): "
                    "use --force to write them again (only the files listed in "
                    f"{dest / MARKER} are replaced)"
                )
            previous = listed
    plan = plan_examples(dest, projects=projects)
    ours = set(previous)
    # Check everything before writing anything.
    for rel in sorted(plan):
        _check_dirs(dest, rel)
        existing = _lstat(dest / rel)
        if existing is None:
            continue
        if rel not in ours:
            raise ExamplesRefused(
                f"{dest / rel} exists and was not written by `fabric-lsp examples`; "
                "nothing was changed (move it away or choose another DIR)"
            )
        if not stat.S_ISREG(existing.st_mode):
            raise ExamplesRefused(f"{dest / rel} is not a regular file (a symbolic link?); nothing was changed")
    stale = [rel for rel in previous if rel not in plan]
    for rel in stale:
        _check_dirs(dest, rel)
    dest.mkdir(parents=True, exist_ok=True)
    marker_exists = _lstat(dest / MARKER) is not None
    # The marker first, listing everything this run may create: an interrupted run can be
    # repeated with --force.
    _write_marker(dest, sorted(set(plan) | ours), ours=marker_exists)
    for rel, (data, mtime_ms) in sorted(plan.items()):
        _make_dirs(dest, rel)
        _write_file(dest / rel, data, ours=rel in ours, mtime_ms=mtime_ms)
    for rel in stale:
        existing = _lstat(dest / rel)
        if existing is not None and stat.S_ISREG(existing.st_mode):
            os.unlink(dest / rel)
    _write_marker(dest, sorted(plan), ours=True)
    return sorted(dest / rel for rel in plan if rel.startswith("sessions/"))


def next_steps(dest: Path, projects: list[str]) -> list[str]:
    d = shlex.quote(str(dest))
    lines = [
        "Next, try:",
        f"  fabric-lsp sessions --agent-dir {d} --scope global",
        f"  fabric-lsp recall --agent-dir {d} --scope global convert_anomaly",
        f"  PI_CODING_AGENT_DIR={d} fabric-lsp preview {LONG_SESSION_PREFIX}   # a real compaction at Pi's defaults",
        f"  fabric-lsp demo --agent-dir {d}",
    ]
    if "orbit" in projects:
        project = shlex.quote(str(dest / "projects" / "orbit"))
        source = shlex.quote(str(dest / "projects" / "orbit" / PROJECT_FILE))
        lines += [
            "Open the project the sessions worked on: each file's history as a CodeLens, hovers, recall",
            "(editors read PI_CODING_AGENT_DIR, or set fabric.agentDir):",
            f"  PI_CODING_AGENT_DIR={d} code {project}",
            f"  PI_CODING_AGENT_DIR={d} nvim {source}",
        ]
    return lines


def run(args: argparse.Namespace, out: Callable[[str], None] = print) -> int:
    dest = Path(os.path.abspath(os.path.expanduser(args.dir)))
    try:
        files = write_examples(dest, force=bool(args.force), projects=True)
    except ExamplesRefused as err:
        sys.stderr.write(f"fabric-lsp examples: {err}\n")
        return 2
    except OSError as err:
        sys.stderr.write(f"fabric-lsp examples: cannot write {dest}: {err}\n")
        return 1
    projects = sorted({rel.split("/")[1] for rel in _read_marker(dest) or [] if rel.startswith("projects/")})
    out(
        f"Wrote {len(files)} example sessions ({len({f.parent.name for f in files})} projects) to {dest}/sessions"
        + (f" and the projects they worked on to {dest}/projects ({', '.join(projects)})" if projects else "")
    )
    for line in next_steps(dest, projects):
        out(line)
    return 0


SUBCOMMANDS = {
    "examples": (
        "write the bundled example sessions and their projects to DIR, to try everything on",
        add_arguments,
        run,
    ),
}
