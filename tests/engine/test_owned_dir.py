"""engine/owned_dir.py and the index dir's file operations (disk_cache.py): whatever a directory
holds, the cache only ever removes or rewrites regular files with its own record names, in a
directory that carries its marker, never through a symlink, and chmods nothing it did not
create. Property tests over generated directory contents."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_lsp.engine import owned_dir
from fabric_lsp.engine.memory import disk_cache
from fabric_lsp.engine.owned_dir import MARKER, DirRefused
from fabric_lsp.engine.private_dir import make_private_dir
from tests.support.examples import profile_examples

OURS = [
    "0123456789abcdef-s.jsonl.json",
    "fedcba9876543210-s.jsonl.digest.json",
    "0000000000000000-x.all.files.json",
    "1111111111111111-y.terms.json",
    disk_cache.SNAPSHOT_FILE,
    ".tmp-abc.part",
]
FOREIGN = [
    "settings.json",
    "keybindings.json",
    "backup.json",
    "photo.jpg",
    ".tmp-x",
    "notes.part",
    "0123456789ABCDEF-upper.json",
    "0123-short.json",
    "auth.json",
]
KINDS = st.sampled_from(["file", "dir", "link-file", "link-dir", "garbage"])
ENTRIES = st.dictionaries(st.sampled_from(OURS + FOREIGN), KINDS, max_size=10)


def snapshot(root: Path) -> dict[str, tuple[str, int, bytes]]:
    out: dict[str, tuple[str, int, bytes]] = {}
    for p in [root, *sorted(root.rglob("*"))]:
        st_ = p.lstat()
        kind = "link" if stat.S_ISLNK(st_.st_mode) else "dir" if stat.S_ISDIR(st_.st_mode) else "file"
        data = p.read_bytes() if kind == "file" else (os.readlink(p).encode() if kind == "link" else b"")
        out[str(p.relative_to(root))] = (kind, stat.S_IMODE(st_.st_mode), data)
    return out


def populate(folder: Path, outside: Path, entries: dict[str, str]) -> None:
    (outside / "secret.json").write_text('{"key": "value"}')
    (outside / "dir").mkdir(exist_ok=True)
    (outside / "dir" / "inner.json").write_text("{}")
    for name, kind in entries.items():
        p = folder / name
        if kind == "file":
            p.write_text('{"cacheVersion": 5, "kind": "shard"}')
        elif kind == "garbage":
            p.write_bytes(b"\x00not json")
        elif kind == "dir":
            p.mkdir()
            (p / "photo.jpg").write_bytes(b"\xff\xd8")
        elif kind == "link-file":
            p.symlink_to(outside / "secret.json")
        else:
            p.symlink_to(outside / "dir", target_is_directory=True)


@settings(max_examples=profile_examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=ENTRIES, marked=st.booleans())
def test_cleanup_and_writes_never_touch_what_is_not_ours(tmp_path_factory, entries, marked):
    base = tmp_path_factory.mktemp("owned")
    folder, outside = base / "index", base / "outside"
    folder.mkdir()
    outside.mkdir()
    os.chmod(folder, 0o755)
    populate(folder, outside, entries)
    if marked:
        (folder / MARKER).write_bytes(owned_dir.MARKER_BODY)
    before, before_outside = snapshot(folder), snapshot(outside)
    try:
        disk_cache.claim_index_dir(
            str(folder), agent_dir=str(base / "agent"), session_dir=str(base / "agent" / "sessions")
        )
        claimed = True
    except DirRefused as err:
        claimed = False
        assert str(folder) in str(err) and "indexDir" in str(err)
    disk_cache.cleanup(str(folder), 1000, 1 << 30)
    for name in OURS:
        disk_cache.write_atomic(str(folder), name, b'{"written": true}')
        disk_cache.remove(str(folder), name)
    disk_cache.write_atomic(str(folder), "0123456789abcdef-kept.json", b"{}")
    after = snapshot(folder)
    assert snapshot(outside) == before_outside  # never through a symlink
    assert after["."][1] == 0o755  # never chmodded
    for name, (kind, mode, data) in before.items():
        if name == ".":
            continue
        top = name.split("/", 1)[0]
        removable = (
            kind == "file" and "/" not in name and (disk_cache.is_record_name(top) or owned_dir.OwnedDir.is_temp(top))
        )
        if not removable:
            assert after.get(name) == (kind, mode, data), name  # not ours: exactly as it was
    if not claimed:
        assert after == before  # a refused directory: nothing at all happened
    else:
        assert (folder / MARKER).is_file()
        assert (folder / "0123456789abcdef-kept.json").read_bytes() == b"{}"


def test_claim_refuses_reserved_places(tmp_path, monkeypatch):
    home = tmp_path / "home"
    agent = home / ".pi" / "agent"
    (agent / "sessions").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    kw = {"agent_dir": str(agent), "session_dir": str(agent / "sessions")}
    # "/" only through the read-only check: a regression must never get to write there
    assert "filesystem root" in (disk_cache.index_dir_refusal("/", **kw) or "")
    for path, words in (
        (agent, "is the Pi agent dir"),
        (agent / "sessions", "is the Pi sessions dir"),
        (home, "is your home directory"),
        (home / ".pi", "contains the Pi agent dir"),
        (agent / "sessions" / "x", "is inside the Pi sessions dir"),
    ):
        with pytest.raises(DirRefused) as err:
            disk_cache.claim_index_dir(str(path), **kw)
        assert words in str(err.value) and str(path) in str(err.value)
        assert disk_cache.index_dir_refusal(str(path), **kw) == str(err.value)
    assert not list(home.rglob(MARKER))
    # a link to the agent dir is the agent dir
    (tmp_path / "alias").symlink_to(agent)
    with pytest.raises(DirRefused, match="is the Pi agent dir"):
        disk_cache.claim_index_dir(str(tmp_path / "alias"), **kw)


def test_private_dirs_chmod_only_what_they_create(tmp_path):
    existing = tmp_path / "existing"
    existing.mkdir()
    os.chmod(existing, 0o755)
    make_private_dir(existing / "a" / "b")
    assert stat.S_IMODE(existing.stat().st_mode) == 0o755
    assert stat.S_IMODE((existing / "a").stat().st_mode) == 0o700
    assert stat.S_IMODE((existing / "a" / "b").stat().st_mode) == 0o700
    os.chmod(existing / "a", 0o750)
    make_private_dir(existing / "a")
    assert stat.S_IMODE((existing / "a").stat().st_mode) == 0o750


def test_reads_never_follow_a_link(tmp_path):
    folder = tmp_path / "index"
    owned_dir.claim(str(folder), setting="indexDir", is_ours=disk_cache.is_record_name)
    (tmp_path / "secret.json").write_text("secret")
    (folder / "0123456789abcdef-s.jsonl.json").symlink_to(tmp_path / "secret.json")
    assert disk_cache.read_cache_file(str(folder), "0123456789abcdef-s.jsonl.json", 1 << 20) is None
    assert disk_cache.read_cache_file(str(folder), "settings.json", 1 << 20) is None  # not a name of ours
    # a directory whose marker was taken away is not ours any more
    (folder / MARKER).unlink()
    assert not disk_cache.write_atomic(str(folder), "0123456789abcdef-t.json", b"{}")
    assert not (folder / "0123456789abcdef-t.json").exists()
