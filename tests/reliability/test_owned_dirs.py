"""Our derived state lives only in directories we own (engine/owned_dir.py, docs/reliability.md
"Security"): a directory named as `indexDir` that holds the user's files, Pi's agent or
sessions dir, $HOME or an ancestor of the agent dir is refused with a warning that names the
setting and the path, and nothing in it is deleted, rewritten or chmodded — checked against a
real server process, byte for byte and mode for mode."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from reliability_kit import RawServer, example_agent, server_env

from fabric_lsp.engine.owned_dir import MARKER


def snapshot(root: Path) -> dict[str, tuple[str, int, bytes]]:
    """Every path below `root` (and root itself) with its kind, mode and bytes (no symlink followed)."""
    out: dict[str, tuple[str, int, bytes]] = {}
    for p in [root, *sorted(root.rglob("*"))]:
        st = p.lstat()
        kind = "link" if stat.S_ISLNK(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else "file"
        data = p.read_bytes() if kind == "file" else (os.readlink(p).encode() if kind == "link" else b"")
        out[str(p.relative_to(root))] = (kind, stat.S_IMODE(st.st_mode), data)
    return out


def user_folder(path: Path) -> Path:
    """What a user keeps in a folder: .json files and a folder whose name ends in .json."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o755)
    (path / "settings.json").write_text('{"editor.fontSize": 14}\n')
    (path / "keybindings.json").write_text("[]\n")
    (path / "backup.json").mkdir()
    (path / "backup.json" / "photo.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a photo")
    (path / "0123456789abcdef-looks-like-ours.json").write_text("{}")  # our pattern, but not ours
    return path


def run(agent: Path, tmp_path: Path, index_dir: str, home: Path | None = None) -> tuple[dict, dict, dict]:
    env = server_env(agent, FABRIC_LSP_BACKGROUND_INDEX="0")  # each request builds what it answers
    if home is not None:
        env["HOME"] = str(home)
    with RawServer(agent, stderr_path=tmp_path / "server.log", env=env) as srv:
        srv.initialize(init_options={"indexDir": index_dir})
        recall = srv.call("fabric/recall", {"query": "orbit", "scope": "global"}, timeout=120)
        srv.call("fabric/sessions", {"scope": "global"}, timeout=120)
        cfg = srv.call("workspace/executeCommand", {"command": "fabric.reload", "arguments": []})
        messages = [n["params"]["message"] for n in srv.notifications if n.get("method") == "window/showMessage"]
    return recall, cfg, {"messages": messages}


def test_a_user_folder_as_index_dir_is_untouched(tmp_path):
    agent = example_agent(tmp_path / "agent")
    folder = user_folder(tmp_path / "my-settings")
    before = snapshot(folder)
    recall, cfg, seen = run(agent, tmp_path, str(folder))
    assert snapshot(folder) == before  # names, bytes and modes
    assert not (folder / MARKER).exists()
    assert any("indexDir" in w and str(folder) in w and "did not create" in w for w in cfg["warnings"]), cfg["warnings"]
    assert any(str(folder) in m for m in seen["messages"]), seen["messages"]  # shown to the user
    # the index went to the default, which is ours, and answers as usual
    default = agent / "fabric-lsp" / "memory-index"
    assert cfg["indexDir"] == str(default) and (default / MARKER).is_file()
    assert recall["totalMatches"] > 0
    assert recall["coverage"]["indexedSessions"] == recall["coverage"]["eligibleSessions"] > 0


PI_FILES = {
    "auth.json": '{"anthropic": {"key": "sk-secret"}}',
    "settings.json": "{}",
    "models.json": '{"providers": {}}',
    "fabric.json": "{}",
}


# ("/" itself is checked without a server, in tests/engine/test_owned_dir.py: a regression
# here must never get the chance to write into the machine's root)
@pytest.mark.parametrize("where", ["agent", "sessions", "home", "ancestor"])
def test_reserved_dirs_are_refused_and_untouched(tmp_path, where):
    home = tmp_path / "home"
    agent = example_agent(home / ".pi" / "agent")
    for name, text in PI_FILES.items():
        (agent / name).write_text(text)
    chosen = {"agent": agent, "sessions": agent / "sessions", "home": home, "ancestor": home / ".pi"}[where]
    watched = agent if where != "home" else home
    before = snapshot(watched)
    recall, cfg, _ = run(agent, tmp_path, str(chosen), home=home)
    after = snapshot(watched)
    # only our own default index dir appeared (below the agent dir); nothing else changed
    new = {k for k in after if k not in before}
    prefix = "fabric-lsp" if where != "home" else ".pi/agent/fabric-lsp"
    assert all(k == prefix or k.startswith(prefix + "/") for k in new), sorted(new)
    assert {k: v for k, v in after.items() if k in before} == before
    assert not (chosen / MARKER).exists()
    assert any("indexDir" in w and f" {chosen} " in w for w in cfg["warnings"]), cfg["warnings"]
    assert recall["totalMatches"] > 0


def test_a_marked_dir_is_used_and_a_new_one_is_created_private(tmp_path):
    agent = example_agent(tmp_path / "agent")
    fresh = tmp_path / "cache" / "fabric"  # neither exists yet
    recall, cfg, _ = run(agent, tmp_path, str(fresh))
    assert cfg["indexDir"] == str(fresh) and not [w for w in cfg["warnings"] if "indexDir" in w]
    assert (fresh / MARKER).is_file() and recall["totalMatches"] > 0
    for d in (tmp_path / "cache", fresh):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700  # created by us
    names = {p.name for p in fresh.iterdir()}
    assert any(n.endswith(".json") for n in names)
    # an empty directory the user made is adopted, and keeps its mode
    empty = tmp_path / "empty"
    empty.mkdir()
    os.chmod(empty, 0o751)
    run(agent, tmp_path, str(empty))
    assert (empty / MARKER).is_file() and stat.S_IMODE(empty.stat().st_mode) == 0o751


def test_a_cache_from_before_the_marker_is_adopted(tmp_path):
    """An index dir written by an older fabric-lsp (only our record names, no marker) keeps working."""
    agent = example_agent(tmp_path / "agent")
    index = agent / "fabric-lsp" / "memory-index"
    run(agent, tmp_path, str(index))
    (index / MARKER).unlink()
    assert [p for p in index.iterdir()]
    recall, cfg, _ = run(agent, tmp_path, str(index))
    assert (index / MARKER).is_file() and not [w for w in cfg["warnings"] if "indexDir" in w]
    assert recall["totalMatches"] > 0


# ---------------------------------------------------------------- what counts as a session


def test_files_outside_the_sessions_dir_need_a_pi_header(tmp_path):
    """`fabric/expand`, a `session:<path>` scope and a preview serve a file outside the
    sessions dir only when it starts with a Pi session header; a link inside sessions/ to
    such a file counts where it points."""
    agent = example_agent(tmp_path / "agent")
    secret = tmp_path / "notes.jsonl"
    secret.write_text('{"type":"message","id":"aaaa0001","message":{"role":"user","content":"my secret"}}\n')
    link = next((agent / "sessions").iterdir()) / "2026-01-01T00-00-00-000Z_link.jsonl"
    link.symlink_to(secret)
    copy = tmp_path / "copy.jsonl"  # a real Pi session copied elsewhere: still served
    copy.write_bytes(sorted((agent / "sessions").rglob("*.jsonl"))[0].read_bytes())
    with RawServer(
        agent, stderr_path=tmp_path / "server.log", env=server_env(agent, FABRIC_LSP_BACKGROUND_INDEX="0")
    ) as srv:
        srv.initialize()
        for target in (secret, link):
            expand = srv.call("fabric/expand", {"session": str(target), "indices": [0]})
            assert expand["error"]["code"] == "session_not_found", expand
            assert "does not start with a Pi session header" in expand["error"]["message"]
            recall = srv.call("fabric/recall", {"query": "secret", "scope": f"session:{target}"})
            assert recall["totalMatches"] == 0 and recall["coverage"]["error"]["code"] == "session_not_found"
            preview = srv.call("fabric/compactionPreview", {"session": str(target)})
            assert "my secret" not in json.dumps(preview) and "Pi session header" in json.dumps(preview)
        assert srv.call("fabric/expand", {"session": str(copy), "indices": [0]})["expanded"]


def test_a_role_never_becomes_markdown_in_a_hover(tmp_path):
    agent = example_agent(tmp_path / "agent")
    session = sorted((agent / "sessions").rglob("*.jsonl"))[0]
    with open(session, "a") as fh:
        fh.write(
            json.dumps(
                {
                    "type": "message",
                    "id": "bad0role",
                    "parentId": None,
                    "timestamp": "2026-11-01T00:00:00.000Z",
                    "message": {"role": "[click](command:workbench.action.terminal.new) **x**", "content": "hi"},
                }
            )
            + "\n"
        )
    line = len(session.read_text().splitlines()) - 1
    with RawServer(agent, stderr_path=tmp_path / "server.log") as srv:
        srv.initialize()
        hover = srv.call(
            "textDocument/hover",
            {"textDocument": {"uri": session.as_uri()}, "position": {"line": line, "character": 2}},
        )
    title = hover["contents"]["value"].splitlines()[0]
    assert "`[click](command:workbench.action.terminal.new) **x**`" in title, title
