"""Huge input: a big session and a single huge line. The streaming reader's memory stays
bounded by the line limit plus one read chunk whatever the file holds; the real server
answers every request on such files without running out of memory, and coverage says why
anything was cut (max_sync_source_bytes, max_entry_chars, oversize lines).

CI: a 40 MB session and an 8 MB line. FABRIC_LONG=1: a 1 GB session and a 200 MB line,
generated into /tmp (or $FABRIC_HUGE_DIR) and removed afterwards; figures from the same
scenario are printed by bench/reliability/huge_input.py. A line over the 64 MiB line
limit is read up to a cut and named `max_line_bytes`; its CI test (a 70 MiB and a 60 MiB
line through the server) is tests/e2e/test_lsp_oversize_lines.py.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import tracemalloc
from pathlib import Path

import pytest
from huge import big_session, long_line_session
from reliability_kit import ORBIT, RawServer, example_agent, long_run, session_files

from fabric_lsp.engine.session import iter_session, read_session
from fabric_lsp.engine.session.discovery import encode_cwd

MiB = 1 << 20


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_reader_memory_is_bounded_by_the_line_limit(tmp_path):
    line = long_line_session(tmp_path / "line.jsonl", 24 * MiB, "/w")
    limit = 1 * MiB
    log_holder = {}
    peak = _peak(lambda: log_holder.setdefault("log", read_session(line, max_line_bytes=limit)))
    log = log_holder["log"]
    assert log.stats.oversize == 1 and log.stats.lines == log.stats.header + log.stats.entries + log.stats.oversize
    assert peak < limit + 2 * MiB + 4 * MiB, peak  # the limit + one read chunk (+ slack), never the 24 MiB line
    # streaming a whole big file without keeping records holds only a chunk and a line
    agent = example_agent(tmp_path / "agent")
    src = next(p for p in session_files(agent) if p.stat().st_size > 100_000)
    big = big_session(src, tmp_path / "big.jsonl", 32 * MiB)

    def stream() -> None:
        with open(big, "rb") as fp:
            for _ in iter_session(fp):
                pass

    assert _peak(stream) < 8 * MiB


def _scenario(tmp: Path, big_bytes: int, line_bytes: int, settings: dict | None) -> dict:
    agent = example_agent(tmp / "agent")
    folder = agent / "sessions" / encode_cwd(ORBIT)
    src = next(p for p in session_files(agent) if p.stat().st_size > 100_000)
    big = big_session(src, folder / "2026-11-01T00-00-00-000Z_01b0a6e1-0000-7000-8000-00000000100b.jsonl", big_bytes)
    line = long_line_session(
        folder / "2026-11-02T09-00-00-000Z_01b0a6e1-0000-7000-8000-00000000200a.jsonl", line_bytes, ORBIT
    )
    out: dict = {"big": big, "line": line}
    srv = RawServer(agent, stderr_path=tmp / "server.log", settings=settings)
    try:
        srv.initialize(ORBIT)
        out["recall_global"] = srv.call("fabric/recall", {"query": "test", "scope": "global"}, timeout=1800)
        out["recall_line"] = srv.call(
            "fabric/recall", {"query": "BUILDLOGEND compiling", "scope": f"session:{line}"}, timeout=1800
        )
        out["sessions"] = srv.call("fabric/sessions", {"scope": "global"}, timeout=1800)
        out["expand_line"] = srv.call("fabric/expand", {"session": str(line), "indices": [2]}, timeout=1800)
        out["preview_line"] = srv.call("fabric/compactionPreview", {"session": str(line)}, timeout=1800)
        out["preview_big"] = srv.call(
            "fabric/compactionPreview", {"session": str(big), "keepRecentTokens": 2000}, timeout=1800
        )
        out["rss"] = srv.status()
        out["alive"] = srv.alive()
    finally:
        srv.stop()
    return out


def _check(out: dict, big_cut: bool, line_oversize: bool = False) -> None:
    cov = out["recall_global"]["coverage"]
    if big_cut:
        assert "max_sync_source_bytes" in cov["reasons"] and cov["complete"] is False
        assert out["recall_global"]["authoritative"] is False
    line_cov = out["recall_line"]["coverage"]
    assert "max_entry_chars" in line_cov["reasons"]  # the huge entry was cut for the index, and it says so
    (expanded,) = out["expand_line"]["expanded"]
    assert expanded["entryId"] == "10000003"
    assert out["preview_line"]["outcome"] in ("compacted", "skipped", "cancelled")
    if line_oversize:
        # beyond the 64 MiB line limit: recall and expand read the entry up to a cut that
        # says so, coverage names it, and the preview says it skipped the line
        assert "max_line_bytes" in line_cov["reasons"] and out["recall_line"]["authoritative"] is False
        assert expanded["text"].endswith("the rest is in the file]") and "BUILDLOGEND" not in expanded["text"]
        assert any("oversize" in w for w in out["preview_line"].get("warnings", [])), out["preview_line"]
    else:
        assert "max_line_bytes" not in line_cov["reasons"]
        assert expanded["text"].endswith("BUILDLOGEND")  # expansion gives the whole entry back
    assert out["preview_big"]["outcome"] == "compacted"
    assert out["alive"]


def test_big_session_and_long_line_through_the_server(tmp_path):
    out = _scenario(tmp_path, 40 * MiB, 8 * MiB, {"memory": {"maxSyncSourceBytes": 16 * MiB}})
    _check(out, big_cut=True)
    peak_mib = (out["rss"]["VmHWM"] + out["rss"]["ChildrenVmHWM"]) / 1024  # previews run in worker children
    assert peak_mib < 1500, f"server + workers peak RSS {peak_mib:.0f} MiB for a 40 MB session and an 8 MB line"


@pytest.mark.slow
@pytest.mark.skipif(not long_run(), reason="FABRIC_LONG=1 generates a 1 GB session and a 200 MB line")
def test_one_gigabyte_session_and_200_mb_line():
    root = Path(tempfile.mkdtemp(prefix="fabric-huge-", dir=os.environ.get("FABRIC_HUGE_DIR", "/tmp")))
    try:
        out = _scenario(root, 1024 * MiB, 200 * MiB, None)
        _check(out, big_cut=True, line_oversize=True)  # 1 GB > maxSyncSourceBytes (512 MiB by default)
        peak_mib = (out["rss"]["VmHWM"] + out["rss"]["ChildrenVmHWM"]) / 1024  # previews run in worker children
        print(
            f"1 GB session + 200 MB line: server + workers peak RSS {peak_mib:.0f} MiB "
            f"(server {out['rss']['VmHWM'] / 1024:.0f} MiB)"
        )
        assert peak_mib < 12 * 1024
    finally:
        shutil.rmtree(root, ignore_errors=True)
