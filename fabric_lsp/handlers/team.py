"""`fabric/teamMembers`: who pushed to the team database (docs/team.md), for the editors'
`team:<member>` scope lists."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fabric_lsp import protocol
from fabric_lsp.handlers.registry import feature
from fabric_lsp.handlers.request_runner import run_request

if TYPE_CHECKING:
    from fabric_lsp.server import FabricServer


@feature(protocol.TEAM_MEMBERS)
async def team_members(ls: FabricServer, raw: Any) -> Any:
    return await run_request(
        ls,
        protocol.TEAM_MEMBERS,
        raw,
        lambda _p, _c, _a: ls.engines.team_members(),
        title="Fabric: team members",
        long=False,
    )
