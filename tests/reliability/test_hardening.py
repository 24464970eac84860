"""Issue 16 (hardening) against the real server process (and the real CLI).

* hover / definition on a URI the client never opened: devices, FIFOs, huge files are
  never read on the event loop (or at all); a second request is answered meanwhile;
* one line nested ~990 deep is a malformed line, never a -32603 for the whole scope;
* `1e400` in a session never reaches the wire as `Infinity` (server frames, CLI --json);
* small ones: `<agentDir>/fabric-lsp/` is 0700; a `session:` scope takes the paths
  `fabric/expand` takes; a session list cut by `maxSessions` is not `complete`.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from reliability_kit import RawServer, RpcError, example_agent, server_env, session_files

from fabric_lsp.engine.session import SessionTree, read_session
from tests.support.wire import WireMemoryEngine

ZERO_POS = {"line": 0, "character": 0}


def _no_constants(name: str):
    raise ValueError(f"{name} is not JSON")


def strict_json(data: bytes | str):
    """JSON.parse-strict: NaN / Infinity / -Infinity are refused."""
    return json.loads(data, parse_constant=_no_constants)


def _uri(path: str | Path) -> str:
    return Path(path).as_uri()


def _append(path: Path, *lines: bytes) -> None:
    with open(path, "ab") as fh:
        for ln in lines:
            fh.write(ln + b"\n")


@pytest.fixture
def agent(tmp_path):
    return example_agent(tmp_path / "agent")


def _timed(srv: RawServer, method: str, params: dict, timeout: float = 60) -> tuple[dict, float]:
    t = time.monotonic()
    resp = srv.wait(srv.request(method, params), timeout)
    return resp, time.monotonic() - t


# ------------------------------------------------ 1. hover/definition on unopened URIs


def test_unopened_devices_fifos_and_huge_files_are_never_read_on_the_loop(agent, tmp_path):
    fifo = tmp_path / "wedge.jsonl"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.jsonl"  # sparse: larger than the bound, costs no disk
    with open(huge, "wb") as fh:
        fh.truncate(3 << 30)
    link = tmp_path / "zero-link.jsonl"
    os.symlink("/dev/zero", link)
    targets = ["/dev/zero", "/dev/urandom", str(fifo), str(huge), str(link)]
    files = [str(p) for p in session_files(agent)]
    with RawServer(agent, stderr_path=tmp_path / "server.log") as srv:
        srv.initialize()
        srv.call("fabric/sessions", {"scope": "global"}, timeout=120)  # warm
        figures = {}
        for target in targets:
            for method in ("textDocument/hover", "textDocument/definition", "textDocument/codeLens"):
                params = {"textDocument": {"uri": _uri(target)}}
                if method != "textDocument/codeLens":
                    params["position"] = ZERO_POS
                hostile = srv.request(method, params)
                # a second request, sent right behind it, is answered meanwhile
                other, took = _timed(srv, "fabric/compact/status", {"session": files[0]}, timeout=20)
                assert "result" in other and took < 10, (target, method, took)
                resp = srv.wait(hostile, 20)
                assert resp.get("result") in (None, []) and "error" not in resp, (target, method, resp)
                figures[(target, method)] = round(took, 3)
        rss = srv.status()
        assert srv.alive()
        assert rss.get("VmHWM", 0) + rss["ChildrenVmHWM"] < 600_000, (
            rss
        )  # KiB: nothing was slurped (previews: in workers)
        # the FIFO did not wedge anything: shutdown is answered, the process exits 0
        assert srv.stop() == 0
    print("second-request latency (s):", figures, "peak RSS KiB:", rss.get("VmHWM"))


def test_hover_after_didclose_on_a_large_session_reads_off_the_loop(agent, tmp_path):
    big = tmp_path / "big.jsonl"
    src = session_files(agent)[3].read_bytes()
    header, rest = src.split(b"\n", 1)
    body = rest * max(1, (24 << 20) // len(rest))  # ≈ 24 MiB of real entries
    big.write_bytes(header + b"\n" + body)
    files = [str(p) for p in session_files(agent)]
    with RawServer(agent, stderr_path=tmp_path / "server.log") as srv:
        srv.initialize()
        text = big.read_text()
        srv.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": _uri(big), "languageId": "jsonl", "version": 1, "text": text}},
        )
        opened, _ = _timed(
            srv, "textDocument/hover", {"textDocument": {"uri": _uri(big)}, "position": {"line": 1, "character": 2}}
        )
        assert opened["result"] is not None
        srv.notify("textDocument/didClose", {"textDocument": {"uri": _uri(big)}})
        hostile = srv.request(
            "textDocument/hover", {"textDocument": {"uri": _uri(big)}, "position": {"line": 1, "character": 2}}
        )
        other, took = _timed(srv, "fabric/compact/status", {"session": files[0]}, timeout=20)
        resp = srv.wait(hostile, 60)
        assert "result" in other
        assert (
            resp["result"] is not None and resp["result"]["contents"]["value"] == opened["result"]["contents"]["value"]
        )
        defn = srv.wait(
            srv.request(
                "textDocument/definition",
                {"textDocument": {"uri": _uri(big)}, "position": {"line": 2, "character": 40}},
            ),
            60,
        )
        assert "error" not in defn
    print(f"status answered in {took:.3f}s while a closed 24 MiB session was read for a hover")


# ----------------------------------------------------------- 4. deep nesting is malformed


def test_deep_nesting_is_a_malformed_line_everywhere(agent, tmp_path):
    files = session_files(agent)
    target = files[3]
    leaf = SessionTree.from_records(read_session(target).records).leaf_id
    deep_obj = (
        b'{"type":"message","id":"deep0001","parentId":"%s","timestamp":"2026-10-28T10:40:00.000Z",'
        b'"message":{"role":"user","content":"deepmarker","x":' % leaf.encode() + b"[" * 700 + b"]" * 700 + b"}}"
    )
    for f in files:  # every session of the dir holds the lines: global scope sees them all
        _append(f, b"[" * 990 + b"]" * 990, deep_obj, b"{" + b'"a":{' * 995 + b"}" * 996)
    before = files[3].read_bytes()
    with RawServer(agent, stderr_path=tmp_path / "server.log") as srv:
        srv.initialize()
        sessions = srv.call("fabric/sessions", {"scope": "global"}, timeout=120)
        assert sessions["totalItems"] == len(files)
        recall = srv.call("fabric/recall", {"query": "deepmarker", "scope": "global"}, timeout=120)
        assert recall["totalMatches"] == 0  # the deep object is not an entry
        assert srv.call("fabric/recall", {"query": "orbit", "scope": "global"})["totalMatches"] > 0
        expand = srv.call("fabric/expand", {"session": str(target), "indices": [0, 1]})
        assert len(expand["expanded"]) == 2
        preview = srv.call("fabric/compactionPreview", {"session": str(target)})
        assert "3 malformed line(s) skipped" in " ".join(preview.get("warnings", [])), preview.get("warnings")
        srv.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": _uri(target), "languageId": "jsonl", "version": 1, "text": before.decode()}},
        )
        n = before.count(b"\n")
        for line in (n - 3, n - 2, n - 1):
            hov = srv.call(
                "textDocument/hover",
                {"textDocument": {"uri": _uri(target)}, "position": {"line": line, "character": 1}},
            )
            assert (
                hov is None
                or "Malformed line" in hov["contents"]["value"]
                or "not a JSON object" in hov["contents"]["value"]
            ), hov
        assert srv.alive()
    # the CLI's readers agree
    env = server_env(agent)
    for args in (
        ["sessions", "--scope", "global"],
        ["recall", "deepmarker", "--scope", "global"],
        ["expand", "--indices", "0", str(target)],
        ["preview", str(target)],
    ):
        out = subprocess.run(
            [sys.executable, "-m", "fabric_lsp", *args, "--json"], env=env, capture_output=True, timeout=120
        )
        assert out.returncode in (0, 1) and out.stdout, (args, out.stderr[-2000:])  # preview: 1 = not compacted
        strict_json(out.stdout)


def test_depth_cap_is_one_rule_for_every_reader():
    from fabric_lsp.engine.compaction.loader import load_session_bytes
    from fabric_lsp.engine.memory.source import decode_json_line, scan_source
    from fabric_lsp.engine.session import MAX_JSON_DEPTH, parse_json_line, parse_session_bytes

    head = b'{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/x"}\n'
    ok_line = (
        b'{"type":"custom","id":"a","parentId":null,"d":'
        + b"[" * (MAX_JSON_DEPTH - 1)
        + b"]" * (MAX_JSON_DEPTH - 1)
        + b"}"
    )
    deep_line = b'{"type":"custom","id":"b","parentId":"a","d":' + b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH + b"}"
    huge = b"[" * 100_000 + b"]" * 100_000
    data = head + ok_line + b"\n" + deep_line + b"\n" + huge + b"\n"
    assert parse_json_line(ok_line)[0] and not parse_json_line(deep_line)[0] and not parse_json_line(huge)[0]
    assert decode_json_line(ok_line)[0] and not decode_json_line(deep_line)[0] and not decode_json_line(huge)[0]
    log = parse_session_bytes(data)
    assert [r.id for r in log.records] == ["a"] and log.stats.malformed == 2
    loaded = load_session_bytes(data)
    assert list(loaded.by_id) == ["a"] and loaded.malformed == 2
    for keep in (None, {}):
        scan = scan_source(data, keep=keep)
        assert [ln.id for ln in scan.lines] == ["a"]  # same ordinals in both scan modes


# -------------------------------------------------------- 5. non-finite numbers on the wire


def test_infinity_never_reaches_the_wire(agent, tmp_path):
    files = session_files(agent)
    target = files[3]
    leaf = SessionTree.from_records(read_session(target).records).leaf_id
    _append(
        target,
        b'{"type":"message","id":"inf00001","parentId":"%s","timestamp":"2026-10-28T10:40:00.000Z","message":'
        b'{"role":"user","content":[{"type":"text","text":"infinitymarker"}],"timestamp":1e400}}' % leaf.encode(),
        b'{"type":"message","id":"inf00002","parentId":"inf00001","timestamp":"2026-10-28T10:40:01.000Z","message":'
        b'{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"toolCall","id":"c1","name":"bash",'
        b'"arguments":{"n":1e400}}],"usage":{"input":1e400,"output":1,"cacheRead":0,"cacheWrite":0,'
        b'"totalTokens":1e400},"stopReason":"toolUse","timestamp":-1e400}}',
        b'{"type":"message","id":"inf00003","parentId":"inf00002","timestamp":"2026-10-28T10:40:02.000Z","message":'
        b'{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"out"}],'
        b'"details":{"x":-1e400},"isError":false,"timestamp":1}}',
    )
    text = target.read_text()
    n = text.count("\n")
    with RawServer(agent, stderr_path=tmp_path / "server.log") as srv:
        srv.initialize()
        results = {
            "sessions": srv.call("fabric/sessions", {"scope": "global"}, timeout=120),
            "recall": srv.call("fabric/recall", {"query": "infinitymarker", "scope": "global"}),
            "expand": srv.call("fabric/expand", {"session": str(target), "entryIds": ["inf00001", "inf00002"]}),
            "preview": srv.call("fabric/compactionPreview", {"session": str(target), "keepRecentTokens": 100}),
            "status": srv.call("fabric/compact/status", {"session": str(target)}),
        }
        srv.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": _uri(target), "languageId": "jsonl", "version": 1, "text": text}},
        )
        for line in (n - 3, n - 2, n - 1):
            assert (
                srv.call(
                    "textDocument/hover",
                    {"textDocument": {"uri": _uri(target)}, "position": {"line": line, "character": 1}},
                )
                is not None
            )
        assert srv.not_json_frames == []  # every frame was strict JSON
        assert results["preview"]["tokensBefore"] is None  # JSON.stringify(Infinity) === "null"
        assert results["preview"]["outcome"] == "cancelled"
        assert results["recall"]["totalMatches"] == 1
    env = server_env(agent)
    for args in (
        ["sessions", "--scope", "global"],
        ["recall", "infinitymarker", "--scope", "global"],
        ["expand", "--entry-ids", "inf00001,inf00002", str(target)],
        ["preview", "--keep-recent", "100", str(target)],
    ):
        out = subprocess.run(
            [sys.executable, "-m", "fabric_lsp", *args, "--json"], env=env, capture_output=True, timeout=120
        )
        assert out.returncode in (0, 1) and out.stdout, (args, out.stderr[-2000:])  # preview: 1 = not compacted
        strict_json(out.stdout)
        assert b"Infinity" not in out.stdout and b"NaN" not in out.stdout


def test_wire_json_writes_non_finite_as_null():
    from fabric_lsp.server import wire_json

    assert strict_json(wire_json({"a": [float("inf"), float("-inf"), float("nan"), 1.5]})) == {
        "a": [None, None, None, 1.5]
    }


# ----------------------------------------------------------------------- 9. smaller ones


def test_state_dirs_are_private_all_the_way(agent, tmp_path):
    files = [str(p) for p in session_files(agent)]
    old = os.umask(0o022)
    try:
        with RawServer(agent, stderr_path=tmp_path / "server.log") as srv:
            srv.initialize()
            srv.call("fabric/sessions", {"scope": "global"}, timeout=120)
            srv.call("fabric/compact/status", {"session": files[0]})
            with contextlib.suppress(RpcError):  # (refused when there is nothing to compact: still writes state dirs)
                srv.call("fabric/compact/request", {"session": files[0]})
    finally:
        os.umask(old)
    base = agent / "fabric-lsp"
    dirs = [base] + [p for p in base.rglob("*") if p.is_dir()]
    assert len(dirs) >= 3, dirs  # fabric-lsp/, memory-index/, intents/
    assert {str(p.relative_to(agent)): oct(p.stat().st_mode & 0o777) for p in dirs} == {
        str(p.relative_to(agent)): "0o700" for p in dirs
    }


def test_session_scope_takes_every_path_expand_takes(agent, tmp_path):
    odd = tmp_path / "odd\nname.jsonl"
    odd.write_bytes(session_files(agent)[3].read_bytes())
    with RawServer(agent, stderr_path=tmp_path / "server.log") as srv:
        srv.initialize()
        expand = srv.call("fabric/expand", {"session": str(odd), "indices": [0]})
        recall = srv.call("fabric/recall", {"query": "orbit", "scope": f"session:{odd}"})
        assert expand["sessionFile"] == str(odd) and len(expand["expanded"]) == 1
        assert recall["totalMatches"] > 0 and all(
            it["segment"]["sessionFile"] == str(odd) for it in recall["items"] if it["kind"] == "segment"
        )
        bad = srv.wait(srv.request("fabric/recall", {"query": "orbit", "scope": "global\n"}))
        assert bad["error"]["code"] == -32602


def test_a_session_list_cut_by_max_sessions_is_not_complete(agent):
    from fabric_lsp.engine.memory.api import MemoryConfig

    cfg = {"max_entry_chars": 1_000_000}  # the example has long entries: only the cap may cut
    full = WireMemoryEngine(MemoryConfig(**cfg), agent_dir=str(agent)).sessions({"scope": "global"})
    assert full["coverage"]["complete"] is True and full["totalItems"] == len(session_files(agent))
    cut = WireMemoryEngine(MemoryConfig(max_sessions=2, **cfg), agent_dir=str(agent)).sessions({"scope": "global"})
    assert cut["totalItems"] == 2
    assert cut["coverage"]["complete"] is False and "max_sessions" in cut["coverage"]["reasons"]
