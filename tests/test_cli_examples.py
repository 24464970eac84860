"""`fabric-lsp examples DIR`: the bundled agent dir and the projects its sessions worked on,
written out for a new user; it never deletes or overwrites what it did not write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fabric_lsp.commands.examples import MARKER, write_examples
from fabric_lsp.engine.session import encode_cwd, resolve_session
from fabric_lsp.examples import example_session_dir
from fabric_lsp.examples.projects import example_projects


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fabric_lsp", *args], capture_output=True, text=True, timeout=120, env=env
    )


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.jsonl"))}


def _all_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _iso_s(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _unmoved(data: bytes, dest: Path) -> bytes:
    """A written session with its project paths moved back to where it was recorded."""
    first, _, rest = data.partition(b"\n")
    header = json.loads(first)
    header["cwd"] = header["cwd"].replace(str(dest / "projects"), "/home/user/projects")
    return (
        json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
        + b"\n"
        + rest.replace(str(dest / "projects").encode(), b"/home/user/projects")
    )


def test_writes_the_sessions_and_their_projects_and_prints_next_steps(tmp_path: Path) -> None:
    dest = tmp_path / "new" / "agent"
    out = run("examples", str(dest))
    assert out.returncode == 0, out.stderr
    sessions = _tree(dest / "sessions")
    assert len(sessions) == 7
    originals = {Path(k).name: v for k, v in _tree(example_session_dir()).items()}
    for rel, data in sessions.items():
        header = json.loads(data.split(b"\n", 1)[0])
        # cwd rewritten to the project under DIR; the folder is Pi's encoding of that cwd
        name = Path(header["cwd"]).name
        assert header["cwd"] == str(dest / "projects" / name), header
        assert Path(rel).parent.name == encode_cwd(header["cwd"])
        # everything else as recorded (parentSession points at the copy of its parent)
        original = json.loads(originals[Path(rel).name].split(b"\n", 1)[0])
        if "parentSession" in original:
            parent = Path(header.pop("parentSession"))
            assert parent.is_file() and parent.name == Path(original.pop("parentSession")).name
        assert (
            _unmoved(json.dumps(header, separators=(",", ":")).encode() + b"\n" + data.split(b"\n", 1)[1], dest)
            == json.dumps(original, separators=(",", ":")).encode()
            + b"\n"
            + originals[Path(rel).name].split(b"\n", 1)[1]
        )
        assert b"/home/user/projects/" not in data  # no path still points at the recording machine
    # the projects, as the sessions left them
    projects = example_projects()
    assert sorted(projects) == ["/home/user/projects/ledger", "/home/user/projects/orbit"]
    for cwd, files in projects.items():
        root = dest / "projects" / Path(cwd).name
        assert {str(p.relative_to(root)): p.read_text() for p in root.rglob("*") if p.is_file()} == files
    assert "def compute_frame(" in (dest / "projects" / "orbit" / "orbit" / "tle.py").read_text()
    assert f"--agent-dir {dest}" in out.stdout and f"PI_CODING_AGENT_DIR={dest}" in out.stdout
    assert "fabric-lsp preview 01a18ac0" in out.stdout
    assert f"nvim {dest}/projects/orbit/orbit/tle.py" in out.stdout and f"code {dest}/projects/orbit" in out.stdout
    for f in (dest / "sessions").rglob("*.jsonl"):
        assert os.access(f, os.W_OK)  # a writable copy: intents may be committed to it
        last = json.loads(f.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1])["timestamp"]
        assert abs(f.stat().st_mtime - _iso_s(last)) < 1  # mtime = last append, as Pi leaves it
    marker = json.loads((dest / MARKER).read_text())
    assert sorted(marker["files"]) == sorted(_all_files(dest).keys() - {MARKER})


def test_the_library_call_without_projects_copies_the_sessions_as_recorded(tmp_path: Path) -> None:
    written = write_examples(tmp_path / "agent")
    assert len(written) == 7
    assert _tree(tmp_path / "agent" / "sessions") == _tree(example_session_dir())
    assert not (tmp_path / "agent" / "projects").exists()


def test_the_project_file_has_its_history_and_recall_finds_the_project(tmp_path: Path) -> None:
    dest = tmp_path / "agent"
    assert run("examples", str(dest)).returncode == 0
    source = dest / "projects" / "orbit" / "orbit" / "tle.py"
    history = run("history", "--json", "--agent-dir", str(dest), str(source))
    assert history.returncode == 0, history.stderr
    result = json.loads(history.stdout)
    assert len(result["sessions"]) == 3, result
    assert {s["cwd"] for s in result["sessions"]} == {str(dest / "projects" / "orbit")}
    recall = run(
        "recall",
        "--json",
        "--agent-dir",
        str(dest),
        "--scope",
        "project",
        "--cwd",
        str(dest / "projects" / "orbit"),
        "convert_anomaly",
    )
    assert recall.returncode == 0, recall.stderr
    assert json.loads(recall.stdout)["items"], recall.stdout


def test_refuses_a_non_empty_dir_it_did_not_write_even_with_force(tmp_path: Path) -> None:
    dest = tmp_path / "agent"
    (dest / "sessions" / "--old--").mkdir(parents=True)
    (dest / "settings.json").write_text("{}")
    (dest / "sessions" / "--old--" / "x.jsonl").write_text("{}\n")
    before = _all_files(dest)
    for args in (["examples", str(dest)], ["examples", "--force", str(dest)]):
        out = run(*args)
        assert out.returncode == 2, out.stdout + out.stderr
        assert "not empty" in out.stderr and "was not written by `fabric-lsp examples`" in out.stderr, out.stderr
        assert _all_files(dest) == before  # nothing written, nothing deleted
    file_in_the_way = tmp_path / "file"
    file_in_the_way.write_text("x")
    out = run("examples", "--force", str(file_in_the_way))
    assert out.returncode == 2 and "not a directory" in out.stderr
    assert file_in_the_way.read_text() == "x"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run("examples", str(empty)).returncode == 0  # an empty directory is fine


def test_force_rewrites_only_what_it_wrote(tmp_path: Path) -> None:
    dest = tmp_path / "agent"
    assert run("examples", str(dest)).returncode == 0
    again = run("examples", str(dest))
    assert again.returncode == 2 and "--force" in again.stderr and "already holds the examples" in again.stderr
    mine = dest / "sessions" / "--mine--" / "s.jsonl"
    mine.parent.mkdir()
    mine.write_text("{}\n")
    (dest / "projects" / "orbit" / "notes.txt").write_text("my notes")
    (dest / "settings.json").write_text('{"a": 1}')
    session = next((dest / "sessions").glob("*orbit*/*01a1820f*.jsonl"))
    pristine = session.read_bytes()
    session.write_bytes(pristine + b'{"appended":true}\n')  # e.g. a committed compaction
    # a file of an older examples version that this one no longer writes: removed
    stale = dest / "sessions" / session.parent.name / "2020-01-01T00-00-00-000Z_old.jsonl"
    stale.write_text("{}\n")
    marker = json.loads((dest / MARKER).read_text())
    marker["files"].append(str(stale.relative_to(dest)))
    (dest / MARKER).write_text(json.dumps(marker))
    forced = run("examples", "--force", str(dest))
    assert forced.returncode == 0, forced.stderr
    assert session.read_bytes() == pristine
    assert not stale.exists()
    assert mine.read_text() == "{}\n" and (dest / "projects" / "orbit" / "notes.txt").read_text() == "my notes"
    assert (dest / "settings.json").read_text() == '{"a": 1}'


def test_an_unlisted_file_in_the_way_stops_it_before_anything_is_written(tmp_path: Path) -> None:
    dest = tmp_path / "agent"
    assert run("examples", str(dest)).returncode == 0
    marker = json.loads((dest / MARKER).read_text())
    target = dest / "projects" / "orbit" / "orbit" / "tle.py"
    marker["files"].remove("projects/orbit/orbit/tle.py")  # as if the user had written tle.py
    (dest / MARKER).write_text(json.dumps({**marker, "kind": "fabric-lsp examples"}))
    target.write_text("the user's own file")
    session = next((dest / "sessions").glob("*orbit*/*01a1820f*.jsonl"))
    session.write_bytes(session.read_bytes() + b'{"appended":true}\n')
    before = _all_files(dest)
    out = run("examples", "--force", str(dest))
    assert out.returncode == 2 and str(target) in out.stderr and "was not written by" in out.stderr, out.stderr
    assert _all_files(dest) == before


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")
def test_never_follows_a_symbolic_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    # DIR itself a link (to an empty directory): refused
    link = tmp_path / "link"
    empty = tmp_path / "empty-target"
    empty.mkdir()
    link.symlink_to(empty, target_is_directory=True)
    out = run("examples", str(link))
    assert out.returncode == 2 and "symbolic link" in out.stderr
    assert list(empty.iterdir()) == []
    # a directory below DIR replaced by a link to elsewhere: refused, the elsewhere untouched
    dest = tmp_path / "agent"
    assert run("examples", str(dest)).returncode == 0
    import shutil

    shutil.rmtree(dest / "projects" / "ledger")
    (dest / "projects" / "ledger").symlink_to(outside, target_is_directory=True)
    out = run("examples", "--force", str(dest))
    assert out.returncode == 2 and "symbolic link" in out.stderr, out.stderr
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    (dest / "projects" / "ledger").unlink()
    # a listed file replaced by a link: refused, the link's target untouched
    target = dest / "projects" / "orbit" / "orbit" / "tle.py"
    target.unlink()
    target.symlink_to(outside / "keep.txt")
    out = run("examples", "--force", str(dest))
    assert out.returncode == 2 and "not a regular file" in out.stderr, out.stderr
    assert (outside / "keep.txt").read_text() == "keep"
    # the marker itself a link: refused
    target.unlink()
    (dest / MARKER).unlink()
    (dest / MARKER).symlink_to(outside / "keep.txt")
    out = run("examples", "--force", str(dest))
    assert out.returncode == 2 and "symbolic link" in out.stderr, out.stderr
    assert (outside / "keep.txt").read_text() == "keep"


def test_the_printed_commands_work(tmp_path: Path) -> None:
    dest = tmp_path / "agent"
    assert run("examples", str(dest)).returncode == 0
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(dest)}
    preview = run("preview", "--json", "01a18ac0", env=env)
    assert preview.returncode == 0, preview.stderr
    result = json.loads(preview.stdout)
    assert result["outcome"] == "compacted" and result["tokensBefore"] >= 120_000
    assert result["sessionFile"] == resolve_session("01a18ac0", str(dest / "sessions"))
    sessions = run("sessions", "--agent-dir", str(dest), "--scope", "global", "--json")
    assert sessions.returncode == 0, sessions.stderr
    assert json.loads(sessions.stdout)["totalItems"] == 7


def test_session_prefixes_resolve_in_preview_and_expand(tmp_path: Path) -> None:
    dest = tmp_path / "agent"
    assert run("examples", str(dest)).returncode == 0
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(dest)}
    expand = run("expand", "--agent-dir", str(dest), "--entry-ids", "97e8c51f", "--json", "01a182b4", env=env)
    assert expand.returncode == 0, expand.stderr
    assert json.loads(expand.stdout)["sessionId"] == "01a182b4-1092-7a6b-8cc6-b138f37cc8ab"
    short = run("expand", "--agent-dir", str(dest), "--entry-ids", "97e8c51f", "--json", "01a182b", env=env)
    assert "session_not_found" in short.stdout + short.stderr  # 7 characters are never a prefix
