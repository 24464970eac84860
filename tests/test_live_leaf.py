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

SESSION_ID = "01a18ac0-60ba-7a1f-9785-c60c123c3fed"  # the long bundled session


def preview(agent: Path, session: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "fabric_lsp", "preview", session, "--json", "--agent-dir", str(agent)],
                         capture_output=True, text=True, timeout=120)
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
