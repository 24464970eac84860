"""Huge inputs, generated fast from realistic material: a big session made of copies of a
real-shaped session (ids renamed per copy, copies chained into one active branch), and a
session whose one tool result is a single line of hundreds of MB."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

_ID = re.compile(rb'"(id|parentId|firstKeptEntryId|fromId|targetId)":"([0-9a-f]{8})"')


def big_session(src: Path, dest: Path, target_bytes: int) -> Path:
    """Write `dest`: the header of `src`, then copies of its body until `target_bytes`.

    Copy k renames every 8-hex id x to f"{k:04x}{x}" (unique across copies), and its root
    entry's parent is the previous copy's last entry, so the file is one long chain.
    """
    lines = src.read_bytes().splitlines(keepends=True)
    header, body = lines[0], lines[1:]
    root_at = next(i for i, ln in enumerate(body) if b'"parentId":null' in ln)
    last_id = json.loads(body[-1])["id"]
    dest.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with open(dest, "wb", buffering=1 << 22) as fh:
        fh.write(header)
        written += len(header)
        k = 0
        prev_leaf = None
        blob = b"".join(body)
        while written < target_bytes:
            prefix = b"%04x" % k
            copy = _ID.sub(lambda m: b'"' + m.group(1) + b'":"' + prefix + m.group(2) + b'"', blob)
            if prev_leaf is not None:
                parts = copy.splitlines(keepends=True)
                parts[root_at] = parts[root_at].replace(b'"parentId":null', b'"parentId":"' + prev_leaf + b'"', 1)
                copy = b"".join(parts)
            fh.write(copy)
            written += len(copy)
            prev_leaf = prefix + last_id.encode()
            k += 1
    t = os.stat(src).st_mtime
    os.utime(dest, (t, t))
    return dest


def long_line_session(dest: Path, line_bytes: int, cwd: str, sid: str = "01b0a6e1-0000-7000-8000-00000000200a") -> Path:
    """A small session whose tool result is one line of about `line_bytes` bytes."""
    ts = "2026-11-02T09:00:00.000Z"
    rows = [
        {"type": "session", "version": 3, "id": sid, "timestamp": ts, "cwd": cwd},
        {
            "type": "message",
            "id": "10000001",
            "parentId": None,
            "timestamp": ts,
            "message": {
                "role": "user",
                "content": [{"type": "text", "text": "dump the whole build log"}],
                "timestamp": 1,
            },
        },
        {
            "type": "message",
            "id": "10000002",
            "parentId": "10000001",
            "timestamp": ts,
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "toolCall", "id": "call_1", "name": "bash", "arguments": {"command": "cat build.log"}}
                ],
                "stopReason": "toolUse",
                "timestamp": 2,
            },
        },
    ]
    dest.parent.mkdir(parents=True, exist_ok=True)
    words = [b"compiling", b"module", b"linking", b"warning", b"unused", b"variable", b"ok", b"step"]
    unit = b" ".join(words[i % len(words)] + b"%d" % i for i in range(4096)) + b"\\n"
    with open(dest, "wb") as fh:
        for r in rows:
            fh.write(json.dumps(r, separators=(",", ":")).encode() + b"\n")
        head = (
            b'{"type":"message","id":"10000003","parentId":"10000002","timestamp":"'
            + ts.encode()
            + b'","message":{"role":"toolResult","toolCallId":"call_1","toolName":"bash","content":[{"type":"text","text":"'
        )
        fh.write(head)
        n = max(1, (line_bytes - len(head)) // len(unit))
        for _ in range(n):
            fh.write(unit)
        fh.write(b'BUILDLOGEND"}],"isError":false,"timestamp":3}}\n')
        fh.write(
            json.dumps(
                {
                    "type": "message",
                    "id": "10000004",
                    "parentId": "10000003",
                    "timestamp": ts,
                    "message": {
                        "role": "assistant",
                        "content": [{"type": "text", "text": "The build log is long."}],
                        "stopReason": "stop",
                        "timestamp": 4,
                    },
                },
                separators=(",", ":"),
            ).encode()
            + b"\n"
        )
    return dest
