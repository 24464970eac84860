"""Team recall in the VS Code extension (issue 35): real PostgreSQL (a private cluster,
tests/team/conftest.py), real VS Code (code-server + chromium), the real `fabric-lsp` server.

Two members push the bundled examples from agent dirs that are then deleted (their machine
is "elsewhere": no pushed session file exists here). VS Code's user settings name the
database (`fabric.team.url`, `fabric.team.member`); "Fabric: Recall in the Team…" searches
it into the Recall Results view and an entry opens as the stored entry
(editors/vscode/test/e2e/team.mjs). The expected rows and the stored entry come from the
team engine itself.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest
from vscode_support import report, run_node

from fabric_lsp import protocol
from tests.team.conftest import pg_cluster as pg_cluster  # the fixtures (a private cluster)
from tests.team.conftest import team_db as team_db
from tests.team.conftest import two_members_pushed as two_members_pushed

pytestmark = [pytest.mark.editor, pytest.mark.postgres]

QUERY = "test"


def _rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """(member, machine, sessionId, entryId) of each matched entry, in order."""
    rows = []
    for item in result["items"]:
        seg = item["segment"]
        entries = [e for e in seg["entries"] if e.get("matched")] or seg["entries"][:1]
        rows += [
            {"member": seg["member"], "machine": seg["machine"], "sessionId": seg["sessionId"], "entryId": e["entryId"]}
            for e in entries
        ]
    return rows


def test_team_recall_in_the_results_view(
    two_members_pushed: Any, vscode_tools: dict[str, str], vsix: Path, tmp_path: Path
) -> None:
    cluster, engines = two_members_pushed
    alice = engines[0][0]
    answer = alice.recall({"scope": "team", "query": QUERY, "page": 1, "pageSize": 25})
    assert "error" not in answer["coverage"], answer["coverage"]
    rows = _rows(answer)
    assert {r["member"] for r in rows} == {"alice@test", "bob@test"}, "both members on the first page"
    first = answer["items"][0]["segment"]
    expanded = alice.expand(
        {"member": first["member"], "session": first["sessionFile"], "entryIds": [rows[0]["entryId"]]}
    )
    assert "error" not in expanded, expanded
    other = next(m for m in ("alice@test", "bob@test") if m != first["member"])
    only_other = _rows(alice.recall({"scope": f"team:{other}", "query": QUERY, "page": 1, "pageSize": 25}))
    assert only_other and {r["member"] for r in only_other} == {other}
    for _team, local, agent in engines:
        local.close()
        shutil.rmtree(agent.parent)  # the pushing machine's files are not here
    assert not Path(first["sessionFile"]).exists()
    expect = tmp_path / "team-expect.json"
    expect.write_text(
        json.dumps(
            {
                "query": QUERY,
                "machine": socket.gethostname(),
                "items": rows,
                "first": {"member": first["member"], "note": expanded["note"]},
                "onlyOther": only_other,
                # fabric/teamMembers' answer: the scope list offers these before any team search
                "members": protocol.to_wire(alice.members())["members"],
            }
        ),
        encoding="utf-8",
    )
    agent = tmp_path / "here" / "agent"  # this machine: no sessions of its own
    (agent / "sessions").mkdir(parents=True)
    proc = run_node(
        vscode_tools,
        [
            "test/e2e/team.mjs",
            "--vsix",
            str(vsix),
            "--code-server",
            vscode_tools["codeServer"],
            "--chromium",
            vscode_tools["chromium"],
            "--screenshots",
            os.environ.get("FABRIC_VSCODE_SCREENSHOTS", str(tmp_path / "shots")),
            "--agent-dir",
            str(agent),
            "--team-url",
            cluster.member_url("bob"),
            "--member",
            "bob@test",
            "--expect",
            str(expect),
        ],
        300,
    )
    assert proc.returncode == 0, report(proc)
    assert " 0 failed" in proc.stdout, report(proc)
    for name in (
        '"Recall in the Team…" shows each session under the member who pushed it',
        "a team entry opens as the stored entry, with who pushed it from which machine",
        "the scope list narrows to one member seen in the answer (team:<member>)",
    ):
        assert any(line.startswith(f"ok - {name}") for line in proc.stdout.splitlines()), f"{name!r}\n{report(proc)}"
