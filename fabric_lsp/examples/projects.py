"""The small projects the example sessions worked on, rebuilt from the sessions themselves.

The example sessions (``bench/corpus.py --example``) read, edit and write the files of two
tiny projects (``/home/user/projects/orbit``, Python, and ``/home/user/projects/ledger``,
TypeScript). Replaying their tool calls in the order they happened gives each file as the
last session left it:

* a ``write`` sets the file to its ``content``;
* an ``edit`` that succeeded replaces each ``oldText`` (found exactly once) by its ``newText``;
* a ``read`` that succeeded, without ``offset``/``limit`` and not truncated by Pi, is the
  whole file as it was then.

Failed calls, partial and truncated reads (logs, data) and paths outside the project are
skipped; a file whose content was never fully seen is not written. ``fabric-lsp examples``
writes these files next to the sessions, so that the sessions' files exist on disk and an
editor shows their history.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["RECORDED_ROOT", "example_projects", "project_files"]

#: Where the example sessions were recorded: every project is a folder below it.
RECORDED_ROOT = "/home/user/projects"


def _entries(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, "rb") as fh:
        for line in fh:
            if line.strip():
                value = json.loads(line)
                if isinstance(value, dict):
                    yield value


def _relative(path: object, cwd: str) -> str | None:
    """`path` (relative to `cwd`, or absolute below it) as a clean relative POSIX path, else None."""
    if not isinstance(path, str) or not path.strip():
        return None
    p = path.strip()
    if posixpath.isabs(p):
        if not (p == cwd or p.startswith(cwd.rstrip("/") + "/")):
            return None
        p = posixpath.relpath(p, cwd)
    p = posixpath.normpath(p)
    if p in (".", "") or p.startswith("../") or p == ".." or posixpath.isabs(p):
        return None
    if any(part in ("", ".", "..", ".git") for part in p.split("/")):
        return None
    return p


def _text(content: object) -> str | None:
    if not isinstance(content, list):
        return None
    parts = [c.get("text") for c in content if isinstance(c, dict) and c.get("type") == "text"]
    return "".join(p for p in parts if isinstance(p, str)) if parts else None


def _apply_edits(text: str, edits: object) -> str | None:
    if not isinstance(edits, list) or not edits:
        return None
    for edit in edits:
        if not isinstance(edit, dict):
            return None
        old, new = edit.get("oldText"), edit.get("newText")
        if not isinstance(old, str) or not isinstance(new, str) or not old or text.count(old) != 1:
            return None
        text = text.replace(old, new, 1)
    return text


def project_files(session_files: list[Path]) -> dict[str, dict[str, str]]:
    """``{cwd: {relative path: content}}`` from the sessions' tool calls, replayed in order.

    Sessions are replayed oldest first (by header timestamp, then file name); within a
    session, in file order (a branch left behind still happened on disk).
    """
    headers: list[tuple[str, str, Path]] = []
    for f in session_files:
        first = next(_entries(f), None)
        if first and first.get("type") == "session" and isinstance(first.get("cwd"), str):
            headers.append((str(first.get("timestamp", "")), f.name, f))
    projects: dict[str, dict[str, str]] = {}
    for _stamp, _name, f in sorted(headers):
        cwd = ""
        calls: dict[str, tuple[str, dict[str, Any]]] = {}
        files: dict[str, str] | None = None
        for entry in _entries(f):
            if entry.get("type") == "session":
                cwd = str(entry.get("cwd"))
                files = projects.setdefault(cwd, {})
                continue
            message = entry.get("message")
            if entry.get("type") != "message" or not isinstance(message, dict) or files is None:
                continue
            if message.get("role") == "assistant" and isinstance(message.get("content"), list):
                for part in message["content"]:
                    if (
                        isinstance(part, dict)
                        and part.get("type") == "toolCall"
                        and isinstance(part.get("arguments"), dict)
                    ):
                        calls[str(part.get("id"))] = (str(part.get("name")), part["arguments"])
            elif message.get("role") == "toolResult" and not message.get("isError"):
                name, args = calls.get(str(message.get("toolCallId")), ("", {}))
                rel = _relative(args.get("path"), cwd)
                if rel is None:
                    continue
                if name == "write" and isinstance(args.get("content"), str):
                    files[rel] = args["content"]
                elif name == "edit" and rel in files:
                    edited = _apply_edits(files[rel], args.get("edits"))
                    if edited is not None:
                        files[rel] = edited
                elif name == "read" and "offset" not in args and "limit" not in args:
                    details = message.get("details")
                    if isinstance(details, dict) and details.get("truncation"):
                        continue
                    text = _text(message.get("content"))
                    if text is not None:
                        files[rel] = text
    return {cwd: files for cwd, files in projects.items() if files}


def example_projects() -> dict[str, dict[str, str]]:
    """The example sessions' projects (``{recorded cwd: {relative path: content}}``)."""
    from fabric_lsp.examples import example_session_dir

    return project_files(sorted(example_session_dir().rglob("*.jsonl")))
