"""Team recall in the Neovim plugin (issue 35): real PostgreSQL (a private cluster,
tests/team/conftest.py), real Neovim 0.11, the real `fabric-lsp` server.

Two members push the bundled examples from agent dirs that are then deleted (their
machine is "elsewhere": no pushed session file exists here). Neovim's server reads the
team settings from its agent dir's `fabric.json` (user-level). The specs under
`team_specs/` search `scope=team` / `scope=team:<member>` and check what each picker and
the quickfix list show and what choosing an item opens; the expected items and stored text
come from the team engine itself (`expect.json` beside the agent dir). A database nobody
listens on, and no `team.url`, give one clear message while local recall keeps working.
"""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.editors.neovim.test_neovim import run_spec
from tests.editors.neovim.test_neovim import workspace as workspace  # the fixture
from tests.team.conftest import pg_cluster as pg_cluster  # the fixtures (a private cluster)
from tests.team.conftest import team_db as team_db
from tests.team.conftest import two_members_pushed as two_members_pushed

pytestmark = [pytest.mark.editor, pytest.mark.postgres]

HERE = Path(__file__).resolve().parent
SPECS = HERE / "team_specs"
QUERY = "test"


def _run(spec: str, ws: dict[str, Path]) -> None:
    result = run_spec(SPECS / spec, ws)
    report = f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    assert result.returncode == 0, report
    assert " 0 failed" in result.stdout, report
    assert "not ok - " not in result.stdout, report


def _settings(ws: dict[str, Path], team: dict[str, Any] | None) -> None:
    """The server's user-level settings (`<agentDir>/fabric.json`, docs/team.md)."""
    path = ws["agent"] / "fabric.json"
    if team is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(json.dumps({"team": team}), encoding="utf-8")


def _plugin_items(result: dict[str, Any]) -> list[dict[str, Any]]:
    """(member, machine, sessionId, entryId) of each matched entry, in order: the rows a
    picker must show for a team answer."""
    rows = []
    for item in result["items"]:
        seg = item["segment"]
        entries = [e for e in seg["entries"] if e.get("matched")] or seg["entries"][:1]
        for e in entries:
            rows.append(
                {
                    "member": seg["member"],
                    "machine": seg["machine"],
                    "sessionId": seg["sessionId"],
                    "entryId": e["entryId"],
                }
            )
    return rows


@pytest.fixture
def pushed(two_members_pushed: Any) -> Any:
    return two_members_pushed


def test_team_recall_in_every_picker_and_quickfix(pushed: Any, workspace: dict[str, Path]) -> None:
    cluster, engines = pushed
    alice, _local, _agent = engines[0]
    params = {"scope": "team", "query": QUERY, "page": 1, "pageSize": 25}
    answer = alice.recall(params)
    assert "error" not in answer["coverage"], answer["coverage"]
    rows = _plugin_items(answer)
    assert {r["member"] for r in rows} == {"alice@test", "bob@test"}, "both members on the first page"
    first = answer["items"][0]["segment"]
    expanded = alice.expand(
        {"member": first["member"], "session": first["sessionFile"], "entryIds": [rows[0]["entryId"]]}
    )
    assert "error" not in expanded, expanded
    only_bob = _plugin_items(alice.recall(dict(params, scope="team:bob@test")))
    for _team, local, agent in engines:
        local.close()
        shutil.rmtree(agent.parent)  # the pushing machine's files are not here
    assert not Path(first["sessionFile"]).exists()
    (workspace["tmp"] / "team-expect.json").write_text(
        json.dumps(
            {
                "query": QUERY,
                "machine": socket.gethostname(),
                "items": rows,
                "onlyBob": only_bob,
                "first": {
                    "member": first["member"],
                    "sessionFile": first["sessionFile"],
                    "entry": expanded["expanded"][0],
                    "note": expanded["note"],
                },
            }
        ),
        encoding="utf-8",
    )
    _settings(workspace, {"url": cluster.member_url("bob"), "member": "bob@test"})
    _run("01_team_recall.lua", workspace)


def test_team_database_down_is_one_clear_message(workspace: dict[str, Path]) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _settings(workspace, {"url": f"postgresql://bob:secret-pw@127.0.0.1:{port}/fabric", "member": "bob@test"})
    (workspace["tmp"] / "team-expect.json").write_text(json.dumps({"port": port}), encoding="utf-8")
    _run("02_team_down.lua", workspace)


def test_team_not_configured_is_one_clear_message(workspace: dict[str, Path]) -> None:
    _settings(workspace, None)
    _run("03_team_not_configured.lua", workspace)
