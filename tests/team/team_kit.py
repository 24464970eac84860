"""Helpers for the team tests: members pushing from agent dirs, and the local oracle."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

from fabric_lsp.engine.memory.api import MemoryConfig, MemoryEngine
from fabric_lsp.engine.team.api import TeamEngine
from fabric_lsp.engine.team.settings import TeamSettings
from tests.support.sessions import append_rows as append_rows  # the one session builder, re-exported
from tests.support.sessions import assistant, bash, header, user
from tests.support.sessions import write_session as write_session
from tests.support.wire import WireMemoryEngine, WireTeamEngine

ALL_HOT = 100_000


def memory_config(**kw: Any) -> MemoryConfig:
    return MemoryConfig(hot_sessions=ALL_HOT, **kw)


def member_engine(
    url: str, member: str, projects: list[str], agent_dir: Path, cfg: MemoryConfig | None = None
) -> tuple[TeamEngine, MemoryEngine]:
    cfg = cfg or memory_config()
    local = WireMemoryEngine(cfg, agent_dir=str(agent_dir), index_dir=str(agent_dir.parent / f"index-{member}"))
    settings = TeamSettings(url=url, member=member, projects=tuple(projects))
    return WireTeamEngine(settings, cfg, lambda: local), local


def local_global(local: MemoryEngine, params: dict[str, Any]) -> dict[str, Any]:
    p = dict(params)
    p["scope"] = "global"
    return local.recall(p)


def strip_team(result: dict[str, Any]) -> dict[str, Any]:
    """A team answer less what only a team answer has (scope, member, machine)."""
    out = copy.deepcopy(result)
    out.pop("scope", None)
    for item in out.get("items", []):
        seg = item.get("segment")
        if seg is not None:
            seg.pop("member", None)
            seg.pop("machine", None)
    return out


def strip_local(result: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(result)
    out.pop("scope", None)
    return out


# ---- sessions ---------------------------------------------------------------------------------


def session_rows(sid: str, cwd: str, turns: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """A linear Pi session: `turns` of (role, text), role user | assistant | bash; entry
    ids derived from (sid, turn), the same in every run."""
    rows: list[dict[str, Any]] = [header(sid, cwd)]
    parent: str | None = None
    for i, (role, text) in enumerate(turns):
        eid = hashlib.sha256(f"{sid}\0{i}".encode()).hexdigest()[:8]
        rows.append(entry_row(eid, parent, role, text, i + 1))
        parent = eid
    return rows


def entry_row(eid: str, parent: str | None, role: str, text: str, second: int) -> dict[str, Any]:
    if role == "bash":
        return bash(eid, parent, text, text[::-1], 0, second)
    if role == "assistant":
        return assistant(eid, parent, [{"type": "text", "text": text}], second)
    return user(eid, parent, text, second)


def last_entry_id(path: Path) -> str:
    lines = path.read_text(encoding="utf-8").splitlines()
    return json.loads(lines[-1])["id"]
