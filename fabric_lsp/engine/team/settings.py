"""The `team` settings (user-level only: docs/team.md, docs/configuration.md)."""

from __future__ import annotations

import fnmatch
import getpass
import os
import socket
from dataclasses import dataclass, field
from typing import Any, cast


class TeamSettingsError(ValueError):
    """A `team.*` value of the wrong shape (the message names the key and the fix)."""


def default_member() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry, no LOGNAME: still a name
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    return f"{user}@{socket.gethostname()}"


def machine_name() -> str:
    return socket.gethostname()


@dataclass(frozen=True)
class TeamSettings:
    url: str | None = None
    member: str = field(default_factory=default_member)
    projects: tuple[str, ...] = ()
    auto_push: bool = False

    @classmethod
    def from_settings(cls, raw: Any) -> TeamSettings:
        """Strict: a wrong type is an error naming the key (a team setting decides what
        leaves the machine, so it is never guessed)."""
        if raw is None:
            return cls()
        if not isinstance(raw, dict):
            raise TeamSettingsError("team: must be an object {url, member, projects, autoPush}")
        raw = cast("dict[str, Any]", raw)
        values: dict[str, Any] = {}
        known = {"url", "member", "projects", "autoPush"}
        unknown = sorted(k for k in raw if k not in known)
        if unknown:
            raise TeamSettingsError(f"team.{unknown[0]}: unknown setting; expected url, member, projects, autoPush")
        url = raw.get("url")
        if url is not None:
            if not isinstance(url, str) or not url.strip():
                raise TeamSettingsError("team.url: must be a non-empty string (a libpq URL or key=value string)")
            values["url"] = url.strip()
        member = raw.get("member")
        if member is not None:
            if not isinstance(member, str) or not member.strip():
                raise TeamSettingsError("team.member: must be a non-empty string (default user@host)")
            values["member"] = member.strip()
        projects = raw.get("projects")
        if projects is not None:
            items: list[Any] = cast("list[Any]", projects) if isinstance(projects, list) else []
            if not isinstance(projects, list) or not all(isinstance(p, str) and p.strip() for p in items):
                raise TeamSettingsError("team.projects: must be a list of cwd glob patterns (strings)")
            values["projects"] = tuple(os.path.expanduser(str(p).strip()) for p in items)
        auto = raw.get("autoPush")
        if auto is not None:
            if not isinstance(auto, bool):
                raise TeamSettingsError("team.autoPush: must be true or false")
            values["auto_push"] = auto
        return cls(**values)

    def opted_in(self, cwd: str) -> bool:
        """Whether sessions of `cwd` may be pushed: `cwd` matches one of `projects`
        (shell-style globs, `*` also crosses `/`; nothing matches an empty list)."""
        if not cwd:
            return False
        return any(fnmatch.fnmatchcase(cwd, pattern) for pattern in self.projects)

    def require_url(self) -> str:
        if not self.url:
            raise TeamSettingsError(
                "team.url: not set; put the database URL in your user-level fabric.json "
                '({"team": {"url": "postgresql://…"}}); credentials may come from ~/.pgpass or PG* variables'
            )
        return self.url
