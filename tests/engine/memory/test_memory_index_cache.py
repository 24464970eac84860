"""Warm index and disk cache: append-only growth, rewrites, tiers, permissions, cancel,
and "corrupting or deleting any cache file changes no result" (hypothesis)."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_kit import DEMO_MTIME, assistant, bash, demo_rows, engine, header, user, write_session

from fabric_lsp.engine.activity import Cancelled, CancelToken
from fabric_lsp.engine.memory import disk_cache
from fabric_lsp.engine.owned_dir import MARKER
from tests.support.examples import profile_examples

CWD = "/home/user/demo"
QUERIES = [
    {"query": "auth login", "scope": "global"},
    {"query": "auth", "scope": "global", "branches": "all"},
    {"scope": "global", "pageSize": 3, "page": 2},
    {"query": "retry bug", "scope": "project"},
    {"query": "a.t", "queryMode": "regex", "scope": "global"},
]


def _corpus(agent: Path) -> list[Path]:
    paths = [write_session(agent, CWD, "2025-01-01_s1.jsonl", demo_rows(), DEMO_MTIME)]
    for i in range(4):
        rows = [header(f"s{i + 2}", f"/p{i % 2}"), user(f"u{i}", None, f"session {i} auth token fix {'x' * i}", 1)]
        rows.append(assistant(f"a{i}", f"u{i}", [{"type": "text", "text": f"retry the login bug number {i}"}], 2))
        rows.append(bash(f"b{i}", f"a{i}", "pytest -k auth", f"{i} failed", 1, 3))
        paths.append(
            write_session(agent, f"/p{i % 2}", f"2025-01-0{i + 2}_s{i + 2}.jsonl", rows, DEMO_MTIME + 100 * (i + 1))
        )
    return paths


def _answers(agent: Path, **cfg) -> list[dict]:
    cfg.setdefault("regex_timeout_ms", 10_000)  # a loaded machine must not time out the regex query
    eng = engine(agent, **cfg)
    try:
        return [eng.recall(q, cwd=CWD) for q in QUERIES] + [eng.sessions({"scope": "global"})]
    finally:
        eng.close()


def test_append_in_place_equals_a_fresh_build(tmp_path: Path):
    agent = tmp_path / "agent"
    path = write_session(agent, CWD, "2025-01-01_s1.jsonl", demo_rows(), DEMO_MTIME)
    eng = engine(agent)
    first = eng.recall({"query": "auth", "scope": "project"}, cwd=CWD)
    state = next(iter(eng._states.values()))
    with path.open("a") as fh:
        for i in range(10):
            parent = "cm1" if i == 0 else f"n{i - 1}"
            fh.write(
                json.dumps(
                    {
                        "type": "message",
                        "id": f"n{i}",
                        "parentId": parent,
                        "timestamp": f"2025-01-01T00:01:{i:02d}.000Z",
                        "message": {"role": "user", "content": f"auth follow-up {i}"},
                    }
                )
                + "\n"
            )
    after = eng.recall({"query": "auth", "scope": "project"}, cwd=CWD)
    assert next(iter(eng._states.values())) is state  # extended in place, not rebuilt
    assert after["totalMatches"] == first["totalMatches"] + 10
    fresh_index = tmp_path / "fresh-index"
    fresh = engine(agent, hot_sessions=50, index_dir=str(fresh_index))
    assert fresh.recall({"query": "auth", "scope": "project"}, cwd=CWD) == after
    # The rewritten shard on disk equals what a fresh build writes.
    name = disk_cache.cache_name(str(path), "active", "shard")
    mine = json.loads((Path(eng.index_dir) / name).read_bytes())
    theirs = json.loads((fresh_index / name).read_bytes())
    assert mine == theirs


def test_append_after_loading_from_disk_extends_in_place(tmp_path: Path):
    agent = tmp_path / "agent"
    path = write_session(agent, CWD, "2025-01-01_s1.jsonl", demo_rows(), DEMO_MTIME)
    engine(agent).recall({"query": "auth", "scope": "project"}, cwd=CWD)
    loaded = engine(agent)  # a restarted server: states come from the disk cache
    loaded.recall({"query": "auth", "scope": "project"}, cwd=CWD)
    state = next(iter(loaded._states.values()))
    assert state.scan is None
    with path.open("a") as fh:
        fh.write(
            json.dumps(
                {
                    "type": "message",
                    "id": "n0",
                    "parentId": "cm1",
                    "timestamp": "2025-01-01T00:01:00.000Z",
                    "message": {"role": "user", "content": "auth again"},
                }
            )
            + "\n"
        )
    after = loaded.recall({"query": "auth", "scope": "project"}, cwd=CWD)
    assert next(iter(loaded._states.values())) is state and state.scan is not None
    fresh = engine(agent, index_dir=str(tmp_path / "other-index"))
    assert fresh.recall({"query": "auth", "scope": "project"}, cwd=CWD) == after


def test_append_on_another_branch_rebuilds_and_moves_the_lineage(tmp_path: Path):
    agent = tmp_path / "agent"
    path = write_session(agent, CWD, "2025-01-01_s1.jsonl", demo_rows(), DEMO_MTIME)
    eng = engine(agent)
    before = eng.expand({"session": str(path), "indices": []})
    with path.open("a") as fh:
        fh.write(
            json.dumps(
                {
                    "type": "message",
                    "id": "alt",
                    "parentId": "u2",
                    "timestamp": "2025-01-01T00:02:00.000Z",
                    "message": {"role": "user", "content": "continue the abandoned path"},
                }
            )
            + "\n"
        )
    out = eng.recall({"query": "abandoned", "scope": "project"}, cwd=CWD)
    assert out["totalMatches"] == 2  # u2 and alt are now the active path
    assert out["items"][0]["segment"]["lineageFingerprint"] != before["lineageFingerprint"]
    assert out == engine(agent).recall({"query": "abandoned", "scope": "project"}, cwd=CWD)


def test_same_size_rewrite_with_restored_mtime_rebuilds(tmp_path: Path):
    agent = tmp_path / "agent"
    path = write_session(agent, CWD, "2025-01-01_s1.jsonl", demo_rows(), DEMO_MTIME)
    eng = engine(agent, hot_sessions=0)
    assert eng.recall({"query": "retry", "scope": "project"}, cwd=CWD)["totalItems"] == 1
    data = path.read_bytes()
    path.write_bytes(data.replace(b"Auth login retry", b"Auth login again"))
    os.utime(path, (DEMO_MTIME, DEMO_MTIME))
    assert eng.recall({"query": "retry", "scope": "project"}, cwd=CWD)["totalItems"] == 0
    assert eng.recall({"query": "again", "scope": "project"}, cwd=CWD)["totalItems"] == 1
    # and a new engine reading the disk cache agrees
    assert engine(agent, hot_sessions=0).recall({"query": "again", "scope": "project"}, cwd=CWD)["totalItems"] == 1


def test_tier_demotion_and_separate_mode_files(tmp_path: Path):
    agent = tmp_path / "agent"
    paths = _corpus(agent)
    eng = engine(agent, hot_sessions=2)
    eng.recall({"query": "auth", "scope": "global"}, cwd=CWD)
    eng.recall({"query": "auth", "scope": "global", "branches": "all"}, cwd=CWD)
    names = {p.name for p in Path(eng.index_dir).iterdir()}
    newest, oldest = paths[-1], paths[0]
    assert disk_cache.cache_name(str(newest), "active", "shard") in names
    assert disk_cache.cache_name(str(newest), "all", "shard") in names
    assert disk_cache.cache_name(str(oldest), "active", "digest") in names
    assert disk_cache.cache_name(str(oldest), "all", "digest") in names
    assert disk_cache.cache_name(str(oldest), "active", "shard") not in names
    # The active digest does not know the abandoned sibling; the all digest does.
    active = json.loads((Path(eng.index_dir) / disk_cache.cache_name(str(oldest), "active", "digest")).read_bytes())
    every = json.loads((Path(eng.index_dir) / disk_cache.cache_name(str(oldest), "all", "digest")).read_bytes())
    assert "abandoned" not in active["vocabulary"] and "abandoned" in every["vocabulary"]
    # Promote the oldest by touching it: its digest goes, a shard comes.
    os.utime(oldest, (DEMO_MTIME + 10_000, DEMO_MTIME + 10_000))
    eng.recall({"query": "auth", "scope": "global"}, cwd=CWD)
    names = {p.name for p in Path(eng.index_dir).iterdir()}
    assert disk_cache.cache_name(str(oldest), "active", "shard") in names
    assert disk_cache.cache_name(str(oldest), "active", "digest") not in names


def test_permissions(tmp_path: Path):
    agent = tmp_path / "agent"
    _corpus(agent)
    eng = engine(agent, hot_sessions=2)
    eng.recall({"query": "auth", "scope": "global"}, cwd=CWD)
    index = Path(eng.index_dir)
    assert stat.S_IMODE(index.stat().st_mode) == 0o700
    files = list(index.iterdir())
    assert files and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)
    assert index == agent / "fabric-lsp" / "memory-index"


def test_configured_index_dir_expands_tilde(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    agent = tmp_path / "agent"
    eng = engine(agent, index_dir="~/idx")
    assert eng.index_dir == str(tmp_path / "home" / "idx")


def test_cancel_leaves_no_partial_record(tmp_path: Path):
    agent = tmp_path / "agent"
    _corpus(agent)
    token = CancelToken()
    seen = []

    def sink(event):
        seen.append(event)
        if len(seen) == 3:
            token.cancel()

    eng = engine(agent, hot_sessions=2)
    with pytest.raises(Cancelled):
        eng.recall({"query": "auth", "scope": "global"}, cwd=CWD, cancel=token, activity=sink)
    assert seen[0].message.startswith("Indexing 0/")
    index = Path(eng.index_dir)
    for p in index.iterdir() if index.exists() else []:
        assert not p.name.startswith(".tmp-")
        if p.name == MARKER:
            continue
        if p.name.endswith((".files.json", ".terms.json")):  # our own sidecars: sealed
            assert disk_cache.sealed(p.read_bytes()), p.name
            continue
        kind = "digest" if p.name.endswith(".digest.json") else "shard"
        assert disk_cache.valid_record(p.read_bytes(), kind, p.stat().st_size)
    # The same engine answers normally afterwards.
    query = {"query": "auth login", "scope": "global"}
    assert query == QUERIES[0]
    assert eng.recall(query, cwd=CWD) == _answers(agent, hot_sessions=2)[0]


CORRUPTIONS = st.sampled_from(["delete", "truncate", "flip", "garbage", "old_version", "swap", "empty", "dir"])


@settings(max_examples=profile_examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_corrupting_or_deleting_any_cache_file_changes_no_result(tmp_path_factory, data):
    base = tmp_path_factory.mktemp("corrupt")
    agent = base / "agent"
    _corpus(agent)
    cfg = {"hot_sessions": 2}
    expected = _answers(agent, **cfg)
    index = agent / "fabric-lsp" / "memory-index"
    files = sorted(p for p in index.iterdir() if p.name != MARKER)  # the marker: test_owned_dir.py
    assert files
    picks = data.draw(st.lists(st.integers(0, 10**6), min_size=1, max_size=3))
    victims = list(dict.fromkeys(files[i % len(files)] for i in picks))
    for victim in victims:
        how = data.draw(CORRUPTIONS)
        raw = victim.read_bytes()
        if how == "delete":
            victim.unlink()
        elif how == "truncate":
            victim.write_bytes(raw[: data.draw(st.integers(0, 10**9)) % max(1, len(raw))])
        elif how == "flip":
            i = data.draw(st.integers(0, 10**9)) % len(raw)
            victim.write_bytes(raw[:i] + bytes([raw[i] ^ 0x55]) + raw[i + 1 :])
        elif how == "garbage":
            victim.write_bytes(b'{"cacheVersion":5,"kind":"shard","entries":[1,2]}')
        elif how == "old_version":
            rec = json.loads(raw)
            rec["cacheVersion"] = 4
            victim.write_bytes(json.dumps(rec).encode())
        elif how == "swap":
            other = files[data.draw(st.integers(0, 10**6)) % len(files)]
            if other.is_file():
                victim.write_bytes(other.read_bytes())
        elif how == "empty":
            victim.write_bytes(b"")
        elif how == "dir":
            victim.unlink()
            victim.mkdir()
    assert _answers(agent, **cfg) == expected
    # and everything left behind is valid again; a directory is never ours to remove
    for p in index.iterdir():
        assert p.is_file() or (p.is_dir() and p in victims), p
    shutil.rmtree(base, ignore_errors=True)


def test_a_flip_that_still_parses_is_caught(tmp_path: Path):
    agent = tmp_path / "agent"
    _corpus(agent)
    expected = _answers(agent, hot_sessions=2)
    for p in (agent / "fabric-lsp" / "memory-index").iterdir():
        raw = p.read_bytes()
        if p.name.endswith(".files.json") or p.name == MARKER:  # file-operation tables: see test_file_history.py
            continue
        i = raw.index(b"auth")
        p.write_bytes(raw[:i] + b"4uth" + raw[i + 4 :])  # same length, still valid JSON
    assert _answers(agent, hot_sessions=2) == expected


def test_deleting_the_whole_index_dir_is_safe(tmp_path: Path):
    agent = tmp_path / "agent"
    _corpus(agent)
    expected = _answers(agent, hot_sessions=2)
    shutil.rmtree(agent / "fabric-lsp")
    assert _answers(agent, hot_sessions=2) == expected


def test_warm_engine_drops_records_of_deleted_sessions_without_a_notification(tmp_path: Path):
    agent = tmp_path / "agent"
    paths = _corpus(agent)
    eng = engine(agent, hot_sessions=2)
    eng.recall({"query": "auth", "scope": "global"}, cwd=CWD)
    index = Path(eng.index_dir)
    gone = paths[0]
    assert any(p.name.startswith(disk_cache.cache_base(str(gone))) for p in index.iterdir())
    gone.unlink()
    eng.recall({"query": "auth", "scope": "global"}, cwd=CWD)
    assert not any(p.name.startswith(disk_cache.cache_base(str(gone))) for p in index.iterdir())


def test_warm_engine_notices_deleted_sessions(tmp_path: Path):
    agent = tmp_path / "agent"
    paths = _corpus(agent)
    eng = engine(agent, hot_sessions=2)
    before = eng.sessions({"scope": "global"})
    assert before["totalItems"] == 5
    paths[1].unlink()
    eng.notify_changed([str(paths[1])])
    after = eng.sessions({"scope": "global"})
    assert after["totalItems"] == 4 and after["coverage"]["complete"]


def test_rewrite_far_from_the_end_then_append_is_not_taken_for_an_append(tmp_path: Path):
    agent = tmp_path / "agent"
    rows = demo_rows() + [
        user(f"pad{i}", "cm1" if i == 0 else f"pad{i - 1}", "padding " * 2000, 10 + i % 40) for i in range(10)
    ]
    path = write_session(agent, CWD, "2025-01-01_s1.jsonl", rows, DEMO_MTIME)
    eng = engine(agent)
    eng.recall({"query": "auth", "scope": "project"}, cwd=CWD)
    data = path.read_bytes()
    assert len(data) > 100_000
    # Same-size rewrite of the first entry (> 64 KiB before the end), then an append.
    path.write_bytes(data.replace(b"Fix the auth login bug", b"Fix the xyzw login bug"))
    with path.open("a") as fh:
        fh.write(
            json.dumps(
                {
                    "type": "message",
                    "id": "tail1",
                    "parentId": "pad9",
                    "timestamp": "2025-01-01T00:09:00.000Z",
                    "message": {"role": "user", "content": "appended line"},
                }
            )
            + "\n"
        )
    out = eng.recall({"query": "xyzw appended", "scope": "project"}, cwd=CWD)
    fresh = engine(agent, index_dir=str(tmp_path / "fresh-index"))
    assert out == fresh.recall({"query": "xyzw appended", "scope": "project"}, cwd=CWD)
    assert out["totalMatches"] == 2
    import hashlib

    assert out["items"][0]["segment"]["sourceHash"] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_single_pass_and_two_pass_reading_agree(tmp_path: Path, monkeypatch):
    from fabric_lsp.engine.memory import state_build

    agent = tmp_path / "agent"
    _corpus(agent)
    one = _answers(agent, hot_sessions=2)
    shutil.rmtree(agent / "fabric-lsp")
    monkeypatch.setattr(state_build, "SINGLE_PASS_MAX_BYTES", 0)  # every file takes the two-pass route
    assert _answers(agent, hot_sessions=2) == one


def test_parallel_cold_builds_agree_with_serial(tmp_path: Path):
    agent = tmp_path / "agent"
    _corpus(agent)
    serial = _answers(agent, hot_sessions=1)
    shutil.rmtree(agent / "fabric-lsp")
    eng = engine(agent, hot_sessions=1, regex_timeout_ms=10_000)
    eng.parallel_workers, eng.parallel_min_bytes = 2, 0  # force the child-process pool
    parallel = [eng.recall(q, cwd=CWD) for q in QUERIES] + [eng.sessions({"scope": "global"})]
    eng.close()
    assert parallel == serial


def test_a_hot_session_built_in_a_child_is_extended_in_place_like_a_fresh_build(tmp_path: Path):
    """Hot shards are built by the child pool too; such a state comes back without the
    line scan an append needs, and the first append restores it from the verified old
    bytes instead of rebuilding: the answers equal a fresh serial build's."""
    agent = tmp_path / "agent"
    paths = _corpus(agent)
    eng = engine(agent, hot_sessions=2, regex_timeout_ms=10_000)
    eng.parallel_workers, eng.parallel_min_bytes = 2, 0  # force the child-process pool
    eng.recall({"query": "auth", "scope": "global"}, cwd=CWD)
    hot = {k[0]: st for k, st in eng._states.items() if st.tier == "hot"}
    assert len(hot) == 2 and all(st.scan is None for st in hot.values())  # built in children
    newest = paths[-1]
    state = hot[str(newest)]
    with open(newest, "a") as fh:
        fh.write(json.dumps(user("u-new", "b3", "zebra appended in place", 4)) + "\n")
    warm = [eng.recall(q, cwd=CWD) for q in QUERIES + [{"query": "zebra", "scope": "global"}]]
    assert eng._states[(str(newest), "active")] is state and state.scan is not None  # extended, not rebuilt
    eng.close()
    shutil.rmtree(agent / "fabric-lsp")
    fresh_eng = engine(agent, hot_sessions=2, regex_timeout_ms=10_000)
    fresh = [fresh_eng.recall(q, cwd=CWD) for q in QUERIES + [{"query": "zebra", "scope": "global"}]]
    fresh_eng.close()
    assert warm == fresh
    assert warm[-1]["items"], "the appended entry is found"


def test_cancel_during_a_parallel_build(tmp_path: Path):
    agent = tmp_path / "agent"
    _corpus(agent)
    token = CancelToken()

    def sink(event):
        if event.message.startswith("Indexing 1/"):
            token.cancel()

    eng = engine(agent, hot_sessions=1)
    eng.parallel_workers, eng.parallel_min_bytes = 2, 0
    with pytest.raises(Cancelled):
        eng.recall({"query": "auth", "scope": "global"}, cwd=CWD, cancel=token, activity=sink)
    # builder children write what they finished (temp file + rename): every record there is
    # whole; a child killed mid-write may leave a temp file, which the next cleanup removes
    index = Path(eng.index_dir)
    names = sorted(p.name for p in index.iterdir()) if index.exists() else []
    for name in names:
        if (name.startswith(".tmp-") and name.endswith(".part")) or name == MARKER:
            continue
        data = (index / name).read_bytes()
        if name.endswith((".files.json", ".terms.json")):  # our own sidecars
            assert disk_cache.sealed(data), name
            continue
        kind = "digest" if name.endswith(".digest.json") else "shard"
        assert disk_cache.valid_record(data, kind, len(data)), name
    assert eng.recall({"query": "auth", "scope": "global"}, cwd=CWD)["coverage"]["complete"]
    assert disk_cache.cleanup(str(index), 1000, 1 << 30)
    assert not [p for p in index.iterdir() if p.name.startswith(".tmp-")]


def test_sessions_pages_cover_every_session_once_in_recency_order(tmp_path: Path):
    agent = tmp_path / "agent"
    _corpus(agent)
    eng = engine(agent, hot_sessions=2)
    whole = eng.sessions({"scope": "global", "pageSize": 50})
    pages = [eng.sessions({"scope": "global", "pageSize": 2, "page": p}) for p in (1, 2, 3, 4)]
    assert [len(p["sessions"]) for p in pages] == [2, 2, 1, 0]
    assert [p["hasNext"] for p in pages] == [True, True, False, False]
    assert all(p["totalItems"] == 5 for p in pages)
    assert [row for p in pages for row in p["sessions"]] == whole["sessions"]


def test_a_listed_session_keeps_its_ref_only_while_its_stat_is_unchanged(tmp_path: Path):
    from fabric_lsp.engine.memory import catalog

    agent = tmp_path / "agent"
    paths = _corpus(agent)
    eng = engine(agent, hot_sessions=2)
    first = {r.file: r for r in catalog.all_refs(eng)}
    again = {r.file: r for r in catalog.all_refs(eng)}
    assert all(again[f] is first[f] for f in first)  # nothing changed: the same Ref objects
    # A new header id with the file's size kept: only the stat identity (mtime, ctime) tells.
    target = paths[2]
    data = target.read_bytes()
    old_id = first[str(target)].id
    new_id = "z" * len(old_id)
    target.write_bytes(data.replace(old_id.encode(), new_id.encode(), 1))
    os.utime(target, ns=(target.stat().st_atime_ns, target.stat().st_mtime_ns + 1_000_000))
    changed = {r.file: r for r in catalog.all_refs(eng)}
    assert changed[str(target)] is not first[str(target)]
    assert changed[str(target)].id == new_id and changed[str(target)].key.size == len(data)
    assert all(changed[f] is first[f] for f in first if f != str(target))
    # A file that is gone leaves the cache with its state.
    paths[0].unlink()
    eng.sessions({"scope": "global"})
    assert str(paths[0]) not in eng.refs and str(paths[0]) not in eng.headers
