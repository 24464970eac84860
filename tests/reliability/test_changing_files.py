"""Files changing underneath: appends, truncations, same-size rewrites with a preserved
mtime, deletions and renames, before and during indexing and expansion. Changes are
detected (stale pointer / not found / new hash), and old content is never presented as
current: every answer's sourceHash is the hash of a version of the file that existed
while the call ran, and after the last change every answer is about the final bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from reliability_kit import ORBIT, RawServer, example_agent, long_run, session_files

from fabric_lsp.engine.memory.api import MemoryConfig
from tests.support.wire import WireMemoryEngine

RACE_SECONDS = 60.0 if long_run() else 4.0


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def user_line(eid: str, parent: str, text: str) -> bytes:
    entry = {
        "type": "message",
        "id": eid,
        "parentId": parent,
        "timestamp": "2026-10-29T17:00:00.000Z",
        "message": {"role": "user", "content": text, "timestamp": 1793000000000},
    }
    return (json.dumps(entry, separators=(",", ":")) + "\n").encode()


def last_id(data: bytes) -> str:
    return json.loads(data.splitlines()[-1])["id"]


def same_size_variant(data: bytes, k: int, within_tail: int | None = None) -> bytes:
    """`data` with one ASCII letter of a text field changed (same size, still valid JSON);
    with `within_tail`, only in the last `within_tail` bytes."""
    lo = 0 if within_tail is None else max(0, len(data) - within_tail)
    marks = [i for i in range(lo, len(data)) if data.startswith(b'"text":"', i)]
    pos = marks[k % len(marks)] + len(b'"text":"')
    while not (chr(data[pos]).isalpha() and data[pos - 1] != 0x5C):  # never the letter of an escape
        pos += 1
    ch = data[pos]
    new = ch ^ 0x20  # flip case
    return data[:pos] + bytes([new]) + data[pos + 1 :]


def rewrite_in_place(path: Path, data: bytes) -> None:
    """Overwrite the same inode with same-size bytes, then restore the old mtime."""
    st = os.stat(path)
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def assert_consistent(result_hash: str, entries: list[dict], versions: dict[str, bytes]) -> None:
    """The answer is about one whole version: each entry sits on its line of that version."""
    data = versions[result_hash]
    lines = data.split(b"\n")
    for e in entries:
        eid = e.get("entryId")
        if (
            eid is None
            or "/" in eid
            or e.get("type") not in ("message", "compaction", "branch_summary", "custom_message")
        ):
            continue
        assert f'"id":"{eid}"'.encode() in lines[e["line"]], (eid, e["line"])


# ---------------------------------------------------------------- deterministic changes, real server


@pytest.fixture
def server_and_session(tmp_path):
    agent = example_agent(tmp_path / "agent")
    path = next(p for p in session_files(agent) if "orbit" in str(p) and p.stat().st_size > 100_000)
    srv = RawServer(agent, stderr_path=tmp_path / "server.log")
    srv.initialize(ORBIT)
    yield srv, path
    srv.stop()


def recall(srv: RawServer, path: Path, query: str, **extra: Any) -> dict:
    return srv.call("fabric/recall", {"query": query, "scope": f"session:{path}", **extra})


def segments(result: dict) -> list[dict]:
    return [it["segment"] for it in result["items"] if it["kind"] == "segment"]


def test_changes_are_detected_and_never_served_stale(server_and_session):
    srv, path = server_and_session
    v0 = path.read_bytes()
    first = recall(srv, path, "test")
    h0 = segments(first)[0]["sourceHash"]
    assert h0 == sha(v0)
    fp0 = segments(first)[0]["lineageFingerprint"]

    def expand_stale(expected: str) -> dict:
        return srv.call("fabric/expand", {"session": str(path), "indices": [0], "expectedSourceHash": expected})

    # append
    v1 = v0 + user_line("a99e0001", last_id(v0), "appendedmarkerone")
    with open(path, "ab") as fh:
        fh.write(v1[len(v0) :])
    r = recall(srv, path, "appendedmarkerone")
    assert segments(r) and segments(r)[0]["sourceHash"] == sha(v1)
    assert expand_stale(h0)["error"]["code"] == "stale_pointer"
    assert recall(srv, path, "test", expectedSourceHash=h0)["coverage"]["error"]["code"] == "stale_pointer"
    assert recall(srv, path, "test", expectedLineageFingerprint=fp0)["coverage"]["error"]["code"] == "stale_pointer"
    # truncation back to the original: the appended text is gone
    with open(path, "r+b") as fh:
        fh.truncate(len(v0))
    r = recall(srv, path, "appendedmarkerone")
    assert segments(r) == [] or all(s["sourceHash"] == sha(v0) for s in segments(r))
    assert all("appendedmarkerone" not in e["text"] for s in segments(r) for e in s["entries"])
    assert expand_stale(sha(v1))["error"]["code"] == "stale_pointer"
    # same-size rewrite with the mtime preserved
    h_before = sha(path.read_bytes())
    v2 = same_size_variant(v0, 3)
    time.sleep(0.02)
    rewrite_in_place(path, v2)
    assert len(v2) == len(v0) and os.stat(path).st_size == len(v0)
    r = recall(srv, path, "test")
    assert {s["sourceHash"] for s in segments(r)} == {sha(v2)}
    assert expand_stale(h_before)["error"]["code"] == "stale_pointer"
    ok = srv.call("fabric/expand", {"session": str(path), "indices": [0], "expectedSourceHash": sha(v2)})
    assert ok["sourceHash"] == sha(v2)
    # rename: the old path is gone, the new one is found with the same content
    moved = path.with_name("renamed-" + path.name)
    os.rename(path, moved)
    gone = srv.call("fabric/expand", {"session": str(path), "indices": [0]})
    assert gone["error"]["code"] in ("session_not_found", "source_unavailable"), gone
    assert "text" not in json.dumps(gone["error"])
    r = recall(srv, path, "test")
    assert r["coverage"]["error"]["code"] in ("session_not_found", "source_unavailable")
    r = recall(srv, moved, "test")
    assert {s["sessionFile"] for s in segments(r)} == {str(moved)}
    # deletion
    os.unlink(moved)
    r = srv.call("fabric/recall", {"query": "test", "scope": "global"})
    assert all(s["sessionFile"] not in (str(path), str(moved)) for s in segments(r))
    gone = srv.call("fabric/expand", {"session": str(moved), "indices": [0]})
    assert gone["error"]["code"] in ("session_not_found", "source_unavailable")
    # the file comes back (new inode, different bytes): served fresh
    path.write_bytes(v1)
    r = recall(srv, path, "appendedmarkerone")
    assert segments(r) and segments(r)[0]["sourceHash"] == sha(v1)


# ---------------------------------------------------------------- changes during indexing and expansion


PAGE = 4096  # Linux grows a file's size page by page while one write() copies into it


class Writer(threading.Thread):
    """Cycles the file through versions; records when each version was current.

    A write() of many bytes is not atomic for readers: Linux copies it page by page and
    moves the file's size after each page, so a reader may find the file holding a
    page-aligned prefix of the version being written (seen in CI: a re-created 166 KB
    session read at 163,840 bytes, while the writer thread was descheduled mid-write).
    Those prefixes are states the file really passes through; they are recorded as
    in-flight versions, current only while their write runs. Anything else — bytes mixed
    from two versions, a prefix outside its write — is still a torn read."""

    def __init__(self, path: Path, base: bytes, seed: int, seconds: float) -> None:
        super().__init__(daemon=True)
        self.path, self.base, self.rng, self.seconds = path, base, random.Random(seed), seconds
        self.versions: dict[str, bytes] = {sha(base): base}
        # [hash or None when the path is absent, write started, write finished or None]
        self.timeline: list[list[Any]] = [[sha(base), 0.0, 0.0]]
        # [hash, write started, write finished or None] of the page-aligned prefixes a write passes through
        self.in_flight: list[list[Any]] = []
        self.ops = 0
        self.error: BaseException | None = None

    def begin(self, data: bytes | None, written_from: int | None = None) -> None:
        """Called before a write: a reader may see the new version from now on. With
        `written_from` (the offset one write() of `data`'s tail starts at), the page-aligned
        prefixes it passes through are in-flight versions until `end`."""
        now = time.monotonic()
        h = None if data is None else sha(data)
        if data is not None:
            self.versions[h] = data
            if written_from is not None:
                for cut in [written_from, *range((written_from // PAGE + 1) * PAGE, len(data), PAGE)]:
                    part = data[:cut]
                    ph = sha(part)
                    self.versions.setdefault(ph, part)
                    self.in_flight.append([ph, now, None])
        self.timeline.append([h, now, None])

    def end(self) -> None:
        now = time.monotonic()
        self.timeline[-1][2] = now
        for flight in self.in_flight:
            if flight[2] is None:
                flight[2] = now

    def run(self) -> None:
        try:
            end = time.monotonic() + self.seconds
            current = self.base
            k = 0
            while time.monotonic() < end:
                k += 1
                op = self.rng.choice(["append", "truncate", "rewrite", "rename", "delete", "append"])
                if op == "append":
                    extra = user_line(f"ab{k:06x}", last_id(current), f"racemarker{k}")
                    current = current + extra
                    self.begin(current, written_from=len(current) - len(extra))
                    with open(self.path, "ab") as fh:
                        fh.write(extra)
                elif op == "truncate":
                    # drop the last 1-3 lines (never below 10 lines)
                    ends = [i + 1 for i in range(len(current)) if current[i] == 10]
                    if len(ends) <= 10:
                        continue
                    current = current[: ends[-1 - self.rng.randint(1, min(3, len(ends) - 10))]]
                    self.begin(current)
                    with open(self.path, "r+b") as fh:
                        fh.truncate(len(current))
                elif op == "rewrite":
                    # anywhere in the file; half the time within the last 64 KiB
                    current = same_size_variant(current, k, within_tail=60_000 if self.rng.random() < 0.5 else None)
                    self.begin(current)
                    rewrite_in_place(self.path, current)
                elif op == "rename":
                    tmp = self.path.with_suffix(".moving")
                    self.begin(None)
                    os.rename(self.path, tmp)
                    self.end()
                    time.sleep(self.rng.uniform(0, 0.01))
                    self.begin(current)
                    os.rename(tmp, self.path)
                else:
                    self.begin(None)
                    os.unlink(self.path)
                    self.end()
                    time.sleep(self.rng.uniform(0, 0.01))
                    current = self.base
                    self.begin(current, written_from=0)  # (opened empty, then one write)
                    self.path.write_bytes(current)
                self.end()
                self.ops += 1
                time.sleep(self.rng.uniform(0, 0.02))
        except BaseException as err:  # noqa: BLE001 - reported by the test
            self.error = err

    def current_during(self, h: str, start: float, end: float) -> bool:
        """Was version `h` the file's content at some moment of [start, end]?"""
        for fh, t0, t1 in list(self.in_flight):
            if fh == h and t0 <= end and (t1 is None or t1 >= start):
                return True
        timeline = list(self.timeline)
        for i, (vh, t0, _t1) in enumerate(timeline):
            if vh != h:
                continue
            nxt = timeline[i + 1][2] if i + 1 < len(timeline) else None
            until = float("inf") if nxt is None else nxt
            if t0 <= end and until >= start:
                return True
        return False


def test_changes_during_indexing_and_expansion(tmp_path):
    agent = example_agent(tmp_path / "agent")
    path = next(p for p in session_files(agent) if "orbit" in str(p) and p.stat().st_size > 100_000)
    base = path.read_bytes()
    engine = WireMemoryEngine(MemoryConfig(), agent_dir=str(agent))
    writer = Writer(path, base, seed=5, seconds=RACE_SECONDS)
    writer.start()
    checked: dict[str, int] = {"recall": 0, "expand": 0}
    rng = random.Random(11)
    try:
        while writer.is_alive():
            start = time.monotonic()
            if rng.random() < 0.5:
                res = engine.recall({"query": rng.choice(["test", "racemarker", "read"]), "scope": f"session:{path}"})
                end = time.monotonic()
                err = res["coverage"].get("error")
                if err:
                    assert err["code"] in ("session_not_found", "source_unavailable", "source_changed_during_index"), (
                        err
                    )
                    checked[err["code"]] = checked.get(err["code"], 0) + 1
                    continue
                for seg in segments(res):
                    h = seg["sourceHash"]
                    assert h in writer.versions, "an answer about bytes that were never the file (torn read)"
                    assert writer.current_during(h, start, end), "old content presented as current"
                    assert_consistent(h, seg["entries"], writer.versions)
                checked["recall"] += 1
            else:
                res = engine.expand({"session": str(path), "entryRange": {"first": 0, "last": 5}})
                end = time.monotonic()
                if "error" in res:
                    assert res["error"]["code"] in (
                        "session_not_found",
                        "source_unavailable",
                        "stale_pointer",
                        "index_out_of_bounds",
                    ), res
                    assert set(res) == {"error"}
                    checked[res["error"]["code"]] = checked.get(res["error"]["code"], 0) + 1
                    continue
                h = res["sourceHash"]
                assert h in writer.versions, "expanded bytes that were never the file"
                assert writer.current_during(h, start, end), "old content presented as current"
                assert_consistent(h, res["expanded"], writer.versions)
                checked["expand"] += 1
    finally:
        writer.join()
        engine.close()
    assert writer.error is None, writer.error
    # quiet again: every answer is about the final bytes
    final = path.read_bytes()
    res = engine.recall({"query": "test", "scope": f"session:{path}"})
    assert {s["sourceHash"] for s in segments(res)} == {sha(final)}
    assert engine.expand({"session": str(path), "indices": [0]})["sourceHash"] == sha(final)
    assert checked["recall"] + checked["expand"] > 0
    print(f"race: {writer.ops} file changes, {checked}")


def test_rewrite_outside_the_tail_then_append_is_detected(tmp_path):
    """Found by the race test (fixed in 25fe638): an append after an in-place rewrite far
    from the end must not be taken for a pure append."""
    agent = example_agent(tmp_path / "agent")
    path = next(p for p in session_files(agent) if "orbit" in str(p) and p.stat().st_size > 100_000)
    engine = WireMemoryEngine(MemoryConfig(), agent_dir=str(agent))
    try:
        v0 = path.read_bytes()
        engine.recall({"query": "test", "scope": f"session:{path}"})
        v1 = same_size_variant(v0, 0)  # a letter in the first text field, > 64 KiB before the end
        rewrite_in_place(path, v1)
        with open(path, "ab") as fh:
            fh.write(user_line("a0000001", last_id(v1), "appended"))
        res = engine.recall({"query": "test", "scope": f"session:{path}"})
        assert {s["sourceHash"] for s in segments(res)} == {sha(path.read_bytes())}
    finally:
        engine.close()
