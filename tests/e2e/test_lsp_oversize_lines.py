"""A session line over the 64 MiB line limit, through the real server (issue 30, finding 4).

Pi reads a 70 MiB tool result; the server must not lose it silently. The entry keeps its
place (the active branch through it stays whole), its text is cut and says so, and every
answer about the session names `max_line_bytes` in coverage (never authoritative), also
after a restart over the disk cache. A 60 MiB line is under the limit: read whole, as
before. The two files (~130 MB) are generated under the test's tmp dir.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fabric_e2e_harness import PROJECT_CWD, PROJECT_FOLDER, SPEC_WARNINGS_AS_ERRORS, rpc, server_env, start, stop

from fabric_lsp import protocol
from fabric_lsp.engine.session.reader import DEFAULT_MAX_LINE_BYTES

pytestmark = [SPEC_WARNINGS_AS_ERRORS, pytest.mark.asyncio(loop_scope="function")]

MiB = 1 << 20
TS = "2026-11-02T09:00:00.000Z"


def _row(**fields: object) -> bytes:
    return json.dumps({"timestamp": TS, **fields}, separators=(",", ":")).encode() + b"\n"


def _session(folder: Path, name: str, sid: str, line_bytes: int, tag: str) -> Path:
    """header, user, assistant (tool call), a tool result of one `line_bytes` line, then an
    assistant and a user entry whose parent chain goes through the big one."""
    path = folder / name
    unit = b" ".join(b"compiling module%d ok" % i for i in range(512)) + b"\\n"
    with open(path, "wb") as fh:
        fh.write(_row(type="session", version=3, id=sid, cwd=PROJECT_CWD))
        fh.write(
            _row(
                type="message",
                id=f"{tag}u1",
                parentId=None,
                message={"role": "user", "content": [{"type": "text", "text": "run the build"}]},
            )
        )
        fh.write(
            _row(
                type="message",
                id=f"{tag}a1",
                parentId=f"{tag}u1",
                message={
                    "role": "assistant",
                    "content": [
                        {"type": "toolCall", "id": "call_1", "name": "bash", "arguments": {"command": "make all"}}
                    ],
                },
            )
        )
        head = (
            b'{"type":"message","id":"%sr1","parentId":"%sa1","timestamp":"%s","message":{"role":"toolResult",'
            b'"toolCallId":"call_1","toolName":"bash","content":[{"type":"text","text":"BUILDLOGSTART '
            % (tag.encode(), tag.encode(), TS.encode())
        )
        tail = b'BUILDLOGEND"}],"details":{"exitCode":0},"isError":false}}\n'
        fh.write(head)
        body = line_bytes - len(head) - len(tail) + 1
        fh.write(unit * (body // len(unit)) + b"x" * (body % len(unit)))
        fh.write(tail)
        fh.write(
            _row(
                type="message",
                id=f"{tag}a2",
                parentId=f"{tag}r1",
                message={"role": "assistant", "content": [{"type": "text", "text": "The build log is long."}]},
            )
        )
        fh.write(
            _row(
                type="message",
                id=f"{tag}u2",
                parentId=f"{tag}a2",
                message={"role": "user", "content": [{"type": "text", "text": "which step failed afterwards"}]},
            )
        )
    assert len(path.read_bytes().split(b"\n")[3]) == line_bytes
    return path


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("oversize")
    folder = root / "agent" / "sessions" / PROJECT_FOLDER
    folder.mkdir(parents=True)
    over = _session(
        folder, "2026-11-02T09-00-00-000Z_over.jsonl", "0b0a6e10-0000-7000-8000-000000000070", 70 * MiB, "o"
    )
    under = _session(
        folder, "2026-11-02T08-00-00-000Z_under.jsonl", "0b0a6e10-0000-7000-8000-000000000060", 60 * MiB, "w"
    )
    assert 60 * MiB < DEFAULT_MAX_LINE_BYTES < 70 * MiB
    return root / "agent", over, under


def _entries(recall: dict) -> list[str]:
    return [e["entryId"] for item in recall["items"] for e in item["segment"]["entries"]]


def _note_of(text: str) -> bool:
    return text.endswith("over the line limit of 64 MiB; only its first part is read here — the rest is in the file]")


async def test_a_line_over_the_limit_is_read_cut_and_named(agent: tuple[Path, Path, Path]):
    agent_dir, over, under = agent
    env = server_env(agent_dir, FABRIC_LSP_BACKGROUND_INDEX="0")
    client = await start(agent_dir, "visual-studio-code", env=env)
    try:
        # recall: honest coverage, never authoritative
        found = await rpc(client, protocol.RECALL, {"query": "failed afterwards", "scope": f"session:{over}"})
        assert found["authoritative"] is False and "max_line_bytes" in found["coverage"]["reasons"], found["coverage"]
        assert "ou2" in _entries(found)
        none = await rpc(client, protocol.RECALL, {"query": "zzqnowhere", "scope": f"session:{over}"})
        assert none["authoritative"] is False and not none["items"] and "max_line_bytes" in none["text"]
        # the active branch goes through the big entry: nothing above it is lost
        browse = await rpc(client, protocol.RECALL, {"scope": f"session:{over}", "pageSize": 100})
        assert _entries(browse) == ["ou1", "oa1", "or1", "oa2", "ou2"]
        # expand: the big entry, cut (and saying so); the entries around it, whole
        big = await rpc(client, protocol.EXPAND, {"session": str(over), "entryIds": ["or1"]})
        (entry,) = big["expanded"]
        assert entry["entryId"] == "or1" and entry["role"] == "toolResult" and entry["line"] == 3
        assert entry["text"].startswith("toolResult(bash): BUILDLOGSTART compiling module0 ok")
        assert _note_of(entry["text"]) and "BUILDLOGEND" not in entry["text"] and len(entry["text"]) < 2 * MiB
        assert f"{70 * MiB:,} bytes" in entry["text"]
        around = await rpc(client, protocol.EXPAND, {"session": str(over), "entryRange": {"first": 0, "last": 4}})
        assert [e["entryId"] for e in around["expanded"]] == ["ou1", "oa1", "or1", "oa2", "ou2"]
        assert [e["text"] for e in around["expanded"][3:]] == ["The build log is long.", "which step failed afterwards"]
        # the session list and a global recall say it too
        listed = await rpc(client, protocol.SESSIONS, {"scope": "global"})
        assert "max_line_bytes" in listed["coverage"]["reasons"] and listed["coverage"]["complete"] is False
        # a 60 MiB line is under the limit: read whole, not named
        fine = await rpc(client, protocol.RECALL, {"query": "failed afterwards", "scope": f"session:{under}"})
        assert "max_line_bytes" not in fine["coverage"]["reasons"] and "wu2" in _entries(fine)
        whole = await rpc(client, protocol.EXPAND, {"session": str(under), "entryIds": ["wr1"]})
        text = whole["expanded"][0]["text"]
        assert text.startswith("toolResult(bash): BUILDLOGSTART") and text.endswith("BUILDLOGEND")
        assert len(text) > 59 * MiB
    finally:
        await stop(client)
    # a restarted server answers from the disk cache: still named
    again = await start(agent_dir, "visual-studio-code", env=env)
    try:
        cached = await rpc(again, protocol.RECALL, {"query": "failed afterwards", "scope": f"session:{over}"})
        assert cached["authoritative"] is False and "max_line_bytes" in cached["coverage"]["reasons"]
        assert "ou2" in _entries(cached)
    finally:
        await stop(again)
