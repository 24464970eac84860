"""Live lineage: a session a live Pi holds is previewed on the lease's live leaf (Pi
moved there with /tree, without an append), by the CLI and the server alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fabric_lsp.engine.session.lease import LeaseBook
from fabric_lsp.examples import copy_example_agent_dir
from tests.support.cli import cli_json

SESSION_ID = "01a18ac0-60ba-7a1f-9785-c60c123c3fed"  # the long bundled session


def preview(agent: Path, session: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "fabric_lsp", "preview", session, "--json", "--agent-dir", str(agent)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.stdout, out.stderr
    return json.loads(out.stdout)


def test_preview_follows_the_live_leaf_of_a_held_session(tmp_path):
    agent = copy_example_agent_dir(tmp_path / "agent")
    session = str(next(agent.glob(f"sessions/*/*_{SESSION_ID}.jsonl")))
    entries = [json.loads(line) for line in Path(session).read_text(encoding="utf-8").splitlines()[1:]]
    last = entries[-1]["id"]
    assert preview(agent, session)["leafId"] == last
    earlier = next(e["id"] for e in reversed(entries[: len(entries) // 2]) if e.get("type") == "message")
    book = LeaseBook(agent)
    book.hold(session, pid=os.getpid(), leaf_id=earlier)  # this process stands in for the live Pi
    try:
        held = preview(agent, session)
        assert held["leafId"] == earlier
    finally:
        book.release(session, pid=os.getpid())
    assert preview(agent, session)["leafId"] == last  # released: the file's leaf again


def _two_branch_session(folder: Path) -> Path:
    """root → alpha (abandoned branch) and root → beta (last in file order: the file's leaf)."""
    sid = "01c0ffee-0000-7000-8000-00000000live"
    rows = [
        {"type": "session", "version": 3, "id": sid, "timestamp": "2026-11-01T00:00:00.000Z", "cwd": "/home/user/live"},
        {
            "type": "message",
            "id": "r0000001",
            "parentId": None,
            "timestamp": "2026-11-01T00:00:01.000Z",
            "message": {"role": "user", "content": "start of the work"},
        },
        {
            "type": "message",
            "id": "a0000001",
            "parentId": "r0000001",
            "timestamp": "2026-11-01T00:00:02.000Z",
            "message": {"role": "user", "content": "alphaword branch question"},
        },
        {
            "type": "message",
            "id": "b0000001",
            "parentId": "r0000001",
            "timestamp": "2026-11-01T00:00:03.000Z",
            "message": {"role": "user", "content": "betaword branch question"},
        },
    ]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"2026-11-01T00-00-00-000Z_{sid}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def cli(agent: Path, *args: str) -> dict:
    return cli_json(*args, "--json", "--agent-dir", str(agent))


def test_recall_and_expand_follow_the_live_leaf_of_a_held_session(tmp_path):
    agent = tmp_path / "agent"
    session = str(_two_branch_session(agent / "sessions" / "--home-user-live--"))
    scope = f"session:{session}"

    def alpha_hits() -> int:
        return cli(agent, "recall", "alphaword", "--scope", scope)["totalMatches"]

    def expand_alpha() -> dict:
        return cli(agent, "expand", session, "--entry-ids", "a0000001")

    assert alpha_hits() == 0  # the file's leaf is beta: alpha is off the active branch
    assert "error" in expand_alpha()
    book = LeaseBook(agent)
    book.hold(session, pid=os.getpid(), leaf_id="a0000001")  # Pi navigated to alpha with /tree
    try:
        assert alpha_hits() == 1
        expanded = expand_alpha()
        assert [e["entryId"] for e in expanded["expanded"]] == ["a0000001"]
        assert cli(agent, "recall", "betaword", "--scope", scope)["totalMatches"] == 0
    finally:
        book.release(session, pid=os.getpid())
    assert alpha_hits() == 0  # released: the file's own leaf again (the disk cache kept it)
