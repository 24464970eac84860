"""Cache privacy against the real server: the index dir is 0700 and every record 0600
(also under umask 000 and over a pre-existing 0755 dir), and with `indexThinking: false` /
`indexToolOutput: false` planted secrets in thinking, tool results, bash output and Fabric
operation results never reach the cache on disk, in hot shards or cold digests."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from reliability_kit import ORBIT, RawServer, example_agent, server_env

from fabric_lsp.engine.session.discovery import encode_cwd

THINK = "qqthinkingsecret4711"
TOOL = "qqtooloutputsecret0815"
BASH = "qqbashoutputsecret2718"
TRACE = "qqtraceresultsecret3141"
OUTPUT_SECRETS = (TOOL, BASH, TRACE)


def _line(obj: dict) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n"


def secret_session(folder: Path, sid: str, minute: int) -> Path:
    ts = f"2026-11-0{minute}T10:00:00.000Z"
    rows = [{"type": "session", "version": 3, "id": sid, "timestamp": ts, "cwd": ORBIT}]

    def add(eid: str, message: dict) -> None:
        rows.append(
            {
                "type": "message",
                "id": eid,
                "parentId": rows[-1].get("id") if len(rows) > 1 else None,
                "timestamp": ts,
                "message": message,
            }
        )

    add(f"{sid[:4]}0001", {"role": "user", "content": "please check the deployment keys", "timestamp": 1})
    add(
        f"{sid[:4]}0002",
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": f"the key is {THINK} keep it private"},
                {"type": "text", "text": "Let me look at the deployment."},
                {"type": "toolCall", "id": "call_1", "name": "read", "arguments": {"path": "deploy/keys.env"}},
            ],
            "stopReason": "toolUse",
            "timestamp": 2,
        },
    )
    add(
        f"{sid[:4]}0003",
        {
            "role": "toolResult",
            "toolCallId": "call_1",
            "toolName": "read",
            "content": [{"type": "text", "text": f"API_KEY={TOOL}"}],
            "isError": False,
            "timestamp": 3,
        },
    )
    add(
        f"{sid[:4]}0004",
        {
            "role": "bashExecution",
            "command": "cat .env",
            "output": f"TOKEN={BASH}",
            "exitCode": 0,
            "cancelled": False,
            "truncated": False,
            "timestamp": 4,
        },
    )
    trace = {
        "kind": "pi-fabric.execution",
        "version": 1,
        "outcome": "succeeded",
        "phases": ["run"],
        "operations": [
            {
                "type": "call",
                "sequence": 0,
                "ref": "pi.read",
                "args": {"path": "deploy/keys.env"},
                "outcome": "succeeded",
                "result": {"text": f"SECRET={TRACE}"},
            }
        ],
        "counts": {"droppedValues": 0, "truncatedValues": 0, "redactedValues": 0, "droppedOperations": 0},
    }
    add(
        f"{sid[:4]}0005",
        {
            "role": "toolResult",
            "toolCallId": "call_2",
            "toolName": "fabric_exec",
            "content": [{"type": "text", "text": f"done {TRACE}"}],
            "isError": False,
            "details": {"trace": trace},
            "timestamp": 5,
        },
    )
    add(
        f"{sid[:4]}0006",
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "The deployment keys look fine."}],
            "stopReason": "stop",
            "timestamp": 6,
        },
    )
    path = folder / f"2026-11-0{minute}T10-00-00-000Z_{sid}.jsonl"
    path.write_text("".join(_line(r) for r in rows), encoding="utf-8")
    os.chmod(path, 0o600)
    return path


def disk_bytes(root: Path) -> bytes:
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out.append(p.read_bytes())
    return b"\n".join(out)


def run_server(tmp_path: Path, settings: dict, *, umask: int = 0o022, precreate: bool = False) -> Path:
    agent = example_agent(tmp_path / "agent")
    folder = agent / "sessions" / encode_cwd(ORBIT)
    secret_session(folder, "5ec7e7a0-0000-7000-8000-000000000001", 8)  # older: cold with hotSessions 1
    secret_session(folder, "5ec7e7a0-0000-7000-8000-000000000002", 9)  # newest: hot
    index = agent / "fabric-lsp" / "memory-index"
    if precreate:
        index.mkdir(parents=True)
        os.chmod(index, 0o755)
    old = os.umask(umask)
    try:
        # the records the requests themselves write (the background indexer writes the same
        # kinds later; tests/e2e/test_lsp_background_index.py)
        srv = RawServer(
            agent,
            stderr_path=tmp_path / "server.log",
            settings=settings,
            env=server_env(agent, FABRIC_LSP_BACKGROUND_INDEX="0"),
        )
    finally:
        os.umask(old)
    try:
        srv.initialize(ORBIT)
        for scope in ("global", "project", "session"):
            for q in ("deployment keys", THINK, TOOL, "key"):
                srv.call("fabric/recall", {"query": q, "scope": scope})
        srv.call("fabric/recall", {"query": "qq.*secret", "queryMode": "regex", "scope": "global"})
        srv.call("fabric/sessions", {"scope": "global"})
        # expansion shows full text to the client but must not write it anywhere
        sessions = srv.call("fabric/sessions", {"scope": "project"})["sessions"]
        for s in sessions[:2]:
            srv.call("fabric/expand", {"session": s["sessionFile"], "entryRange": {"first": 0, "last": 3}})
    finally:
        srv.stop()
    return index


def assert_private(index: Path, dir_mode: int = 0o700) -> int:
    # a directory we create is 0700; one the user made keeps its mode (never chmodded)
    assert stat.S_IMODE(os.stat(index).st_mode) == dir_mode
    records = [p for p in index.rglob("*") if p.is_file()]
    for p in records:
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o600, p
    for p in index.rglob("*"):
        if p.is_dir():
            assert stat.S_IMODE(os.stat(p).st_mode) == 0o700, p
    return len(records)


@pytest.mark.parametrize("umask,precreate", [(0o022, False), (0o000, True)])
def test_secrets_never_reach_the_cache_when_not_indexed(tmp_path, umask, precreate):
    index = run_server(
        tmp_path,
        {"memory": {"indexThinking": False, "indexToolOutput": False, "hotSessions": 1}},
        umask=umask,
        precreate=precreate,
    )
    n = assert_private(index, 0o755 if precreate else 0o700)
    kinds = {p.name.endswith(".digest.json") for p in index.glob("*.json")}
    assert n >= 7 and kinds == {True, False}, "both hot shards and cold digests were written"
    blob = disk_bytes(index)
    for secret in (THINK, *OUTPUT_SECRETS):
        assert secret.encode() not in blob, secret
    assert b"deployment" in blob  # the ordinary text is there


def test_positive_control_default_indexes_tool_output_not_thinking(tmp_path):
    index = run_server(tmp_path, {"memory": {"hotSessions": 1}})
    assert_private(index)
    blob = disk_bytes(index)
    assert THINK.encode() not in blob  # indexThinking defaults to false
    for secret in OUTPUT_SECRETS:
        assert secret.encode() in blob, secret  # the scan would see a leak


def test_thinking_is_cached_only_when_asked(tmp_path):
    index = run_server(tmp_path, {"memory": {"indexThinking": True, "indexToolOutput": False, "hotSessions": 1}})
    blob = disk_bytes(index)
    assert THINK.encode() in blob
    for secret in OUTPUT_SECRETS:
        assert secret.encode() not in blob, secret
