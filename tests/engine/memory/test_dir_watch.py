"""The listing kept by inotify notices (dir_watch.py, catalog.FolderListing): after any
sequence of changes to the session folders, a watching engine lists exactly what an engine
that stats every file lists, and recall answers the same; a folder nothing happened in is
not listed again; whenever the notices cannot vouch for a folder it is stat'ed as before.
Real inotify on real files throughout (Linux)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_kit import assistant, engine, header, user, write_session

from fabric_lsp.engine.memory import catalog
from fabric_lsp.engine.memory.catalog import all_refs

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")

CWDS = ["/home/user/alpha", "/home/user/beta", "/home/user/gamma"]


def _session(agent: Path, cwd: str, name: str, words: str, t: int) -> Path:
    rows = [
        header(name, cwd),
        user(f"u-{name}", None, f"{words} shared", 1),
        assistant(f"a-{name}", f"u-{name}", [{"type": "text", "text": words}], 2),
    ]
    return write_session(agent, cwd, f"{name}.jsonl", rows, 1_700_000_000 + t)


def _listed(eng) -> list[tuple[str, int, int, int, str]]:
    with eng.lock:
        return [(r.file, r.key.size, r.key.mtime_ns, r.key.ino, r.id) for r in all_refs(eng) if r.key is not None]


def _pair(agent: Path):
    watched, plain = engine(agent), engine(agent)
    assert watched.watch_folders()
    return watched, plain


def _folders(agent: Path) -> list[Path]:
    return sorted(p for p in (agent / "sessions").iterdir() if p.is_dir())


# one change to the agent dir: (kind, folder index, file index, a small number)
OPS = st.lists(
    st.tuples(
        st.sampled_from(["append", "create", "delete", "rename", "touch", "new_folder", "drop_folder", "replace"]),
        st.integers(0, 5),
        st.integers(0, 5),
        st.integers(0, 1000),
    ),
    max_size=12,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_a_watching_engine_lists_what_stat_lists_after_any_changes(tmp_path_factory, ops):
    agent = tmp_path_factory.mktemp("agent")
    for i, cwd in enumerate(CWDS[:2]):
        for k in range(2):
            _session(agent, cwd, f"s{i}{k}", f"words{i}{k}", 10 * i + k)
    watched, plain = _pair(agent)
    try:
        assert _listed(watched) == _listed(plain)
        for step, (kind, fi, ki, n) in enumerate(ops):
            folders = _folders(agent)
            files = sorted(f for d in folders for f in d.glob("*.jsonl"))
            if kind == "append" and files:
                with open(files[ki % len(files)], "a") as fh:
                    fh.write(json.dumps(user(f"x{step}", None, f"appended {n}", 3)) + "\n")
            elif kind == "create" and folders:
                _session(agent, CWDS[fi % 2], f"c{step}-{n}", f"created{n}", 100 + step)
            elif kind == "delete" and files:
                files[ki % len(files)].unlink()
            elif kind == "rename" and files:
                src = files[ki % len(files)]
                dst = folders[fi % len(folders)] / f"moved{step}-{n}.jsonl"
                os.replace(src, dst)
            elif kind == "touch" and files:
                os.utime(files[ki % len(files)], (1_700_000_500 + n, 1_700_000_500 + n))
            elif kind == "new_folder":
                _session(agent, f"{CWDS[2]}{n}", f"g{step}", f"gamma{n}", 200 + step)
            elif kind == "drop_folder" and folders:
                shutil.rmtree(folders[fi % len(folders)])
            elif kind == "replace" and files:
                target = files[ki % len(files)]
                tmp = target.with_suffix(".tmp")
                tmp.write_text(target.read_text() + json.dumps(user(f"r{step}", None, "replaced", 4)) + "\n")
                os.replace(tmp, target)
            assert _listed(watched) == _listed(plain), (step, kind)
            # the same answers, too, and what an engine that never answered before says
            # (no kept listing, no memo of a previous call: index.load_index)
            q = {"query": "shared", "scope": "global"}
            fresh = engine(agent)
            try:
                expected = fresh.recall(q)
            finally:
                fresh.close()
            assert watched.recall(q) == plain.recall(q) == expected
            assert watched.recall(q) == expected  # (a second call: from the memo)
    finally:
        watched.close()
        plain.close()


class _CountingStats:
    """Counts the folders listed by stat (a spy around the real listing rule)."""

    def __init__(self, monkeypatch) -> None:
        self.folders: list[str] = []
        real = catalog.jsonl_stats

        def counting(folder: str):
            self.folders.append(folder)
            return real(folder)

        monkeypatch.setattr(catalog, "jsonl_stats", counting)


def test_a_folder_nothing_happened_in_is_not_listed_again(tmp_path: Path, monkeypatch):
    agent = tmp_path / "agent"
    a = _session(agent, CWDS[0], "a", "alpha", 1)
    _session(agent, CWDS[1], "b", "beta", 2)
    eng = engine(agent)
    assert eng.watch_folders()
    spy = _CountingStats(monkeypatch)
    try:
        first = _listed(eng)
        assert len(spy.folders) == 2
        spy.folders.clear()
        assert _listed(eng) == first and spy.folders == []  # nothing happened: no stat at all
        with open(a, "a") as fh:
            fh.write(json.dumps(user("more", None, "appended", 3)) + "\n")
        again = _listed(eng)
        assert spy.folders == [str(a.parent)]  # only the folder written to
        assert [r for r in again if r[0] == str(a)][0][1] == a.stat().st_size
    finally:
        eng.close()


def test_without_notices_every_call_stats_every_folder(tmp_path: Path, monkeypatch):
    agent = tmp_path / "agent"
    _session(agent, CWDS[0], "a", "alpha", 1)
    _session(agent, CWDS[1], "b", "beta", 2)
    monkeypatch.setenv("FABRIC_LSP_DIR_WATCH", "0")
    eng = engine(agent)
    assert not eng.watch_folders() and eng.dir_watch is None
    spy = _CountingStats(monkeypatch)
    _listed(eng)
    _listed(eng)
    assert len(spy.folders) == 4
    eng.close()


def test_a_folder_that_cannot_be_watched_is_stated_every_call(tmp_path: Path, monkeypatch):
    agent = tmp_path / "agent"
    a = _session(agent, CWDS[0], "a", "alpha", 1)
    b = _session(agent, CWDS[1], "b", "beta", 2)
    eng = engine(agent)
    assert eng.watch_folders()
    real_watch = eng.dir_watch.watch
    monkeypatch.setattr(eng.dir_watch, "watch", lambda path: path != str(b.parent) and real_watch(path))
    spy = _CountingStats(monkeypatch)
    try:
        _listed(eng)
        spy.folders.clear()
        _listed(eng)
        _listed(eng)
        assert spy.folders == [str(b.parent)] * 2
        assert str(a.parent) not in spy.folders
    finally:
        eng.close()


def test_lost_track_lists_everything_again(tmp_path: Path, monkeypatch):
    agent = tmp_path / "agent"
    _session(agent, CWDS[0], "a", "alpha", 1)
    _session(agent, CWDS[1], "b", "beta", 2)
    eng = engine(agent)
    assert eng.watch_folders()
    spy = _CountingStats(monkeypatch)
    try:
        _listed(eng)
        spy.folders.clear()
        eng.dir_watch._lost = True  # what a queue overflow leaves
        _listed(eng)
        assert len(spy.folders) == 2
        spy.folders.clear()
        _listed(eng)
        assert spy.folders == []
    finally:
        eng.close()


def test_project_scope_uses_the_kept_folder_and_sees_a_new_session(tmp_path: Path):
    agent = tmp_path / "agent"
    _session(agent, CWDS[0], "a", "alpha", 1)
    eng = engine(agent)
    assert eng.watch_folders()
    try:
        q = {"query": "shared", "scope": "project", "cwd": CWDS[0]}
        assert eng.recall(q)["totalItems"] >= 1
        before = eng.recall(q)["totalItems"]
        _session(agent, CWDS[0], "a2", "alpha two", 5)
        assert eng.recall(q)["totalItems"] > before
    finally:
        eng.close()


def test_closing_ends_the_watch(tmp_path: Path):
    agent = tmp_path / "agent"
    _session(agent, CWDS[0], "a", "alpha", 1)
    eng = engine(agent)
    assert eng.watch_folders()
    watch = eng.dir_watch
    _listed(eng)
    eng.close()
    assert watch.fd is None and eng.dir_watch is None and eng.listing is None
    assert _listed(eng)  # still answers, by stat


def test_a_symlinked_project_folder_and_its_target_both_see_a_change(tmp_path: Path):
    """Two names of one directory share one inotify watch: a write through either is a
    change of both (listed, each, as a stat-ing engine lists them)."""
    agent = tmp_path / "agent"
    a = _session(agent, CWDS[0], "a", "alpha", 1)
    (agent / "sessions" / "--linked--").symlink_to(a.parent, target_is_directory=True)
    watched, plain = _pair(agent)
    try:
        assert _listed(watched) == _listed(plain)
        assert len(_listed(plain)) == 2
        with open(a, "a") as fh:
            fh.write(json.dumps(user("more", None, "appended", 3)) + "\n")
        assert _listed(watched) == _listed(plain)
        assert {size for _, size, *_ in _listed(watched)} == {a.stat().st_size}
    finally:
        watched.close()
        plain.close()
