"""Helpers for the team tests: members pushing from agent dirs, and the local oracle."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from fabric_lsp.engine.memory.api import MemoryConfig, MemoryEngine
from fabric_lsp.engine.team.api import TeamEngine
from fabric_lsp.engine.team.settings import TeamSettings

ALL_HOT = 100_000


def memory_config(**kw: Any) -> MemoryConfig:
    return MemoryConfig(hot_sessions=ALL_HOT, **kw)


def member_engine(url: str, member: str, projects: list[str], agent_dir: Path,
                  cfg: MemoryConfig | None = None) -> tuple[TeamEngine, MemoryEngine]:
    cfg = cfg or memory_config()
    local = MemoryEngine(cfg, agent_dir=str(agent_dir), index_dir=str(agent_dir.parent / f"index-{member}"))
    settings = TeamSettings(url=url, member=member, projects=tuple(projects))
    return TeamEngine(settings, cfg, lambda: local), local


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

import json  # noqa: E402
import os  # noqa: E402

from fabric_lsp.engine.session.discovery import encode_cwd  # noqa: E402


def ts(second: int) -> str:
    return f"2025-01-01T00:{second // 60 % 60:02d}:{second % 60:02d}.000Z"


def session_rows(sid: str, cwd: str, turns: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """A linear Pi session: `turns` of (role, text), role user | assistant | bash."""
    rows: list[dict[str, Any]] = [{"type": "session", "version": 3, "id": sid, "timestamp": ts(0), "cwd": cwd}]
    parent: str | None = None
    for i, (role, text) in enumerate(turns):
        eid = f"{abs(hash((sid, i))) % (1 << 32):08x}"
        rows.append(entry_row(eid, parent, role, text, i + 1))
        parent = eid
    return rows


def entry_row(eid: str, parent: str | None, role: str, text: str, second: int) -> dict[str, Any]:
    if role == "bash":
        msg: dict[str, Any] = {"role": "bashExecution", "command": text, "output": text[::-1], "cancelled": False,
                               "truncated": False, "exitCode": 0, "timestamp": 1_700_000_000_000}
    elif role == "assistant":
        msg = {"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": 1_700_000_000_000}
    else:
        msg = {"role": "user", "content": text, "timestamp": 1_700_000_000_000}
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": ts(second), "message": msg}


def write_session(agent_dir: Path, cwd: str, name: str, rows: list[dict[str, Any]], mtime_s: float | None = None) -> Path:
    folder = agent_dir / "sessions" / encode_cwd(cwd)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    if mtime_s is not None:
        os.utime(path, (mtime_s, mtime_s))
    return path


def append_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n")


def last_entry_id(path: Path) -> str:
    lines = path.read_text(encoding="utf-8").splitlines()
    return json.loads(lines[-1])["id"]
