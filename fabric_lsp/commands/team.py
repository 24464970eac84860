"""`fabric-lsp team migrate|push|status`: the team database (docs/team.md).

`migrate` (the database owner, once per release) creates or upgrades the schema and
grants the team role; `push` sends the derived records of the opted-in sessions
(`team.projects`), incrementally, one transaction per session, with a progress bar on a
terminal and `--dry-run` listing what would leave the machine; `status` lists what is
pushed, one object per session file. Team recall itself is `fabric-lsp recall Q --scope
team`. Exit status: 0 success, 1 the database is unavailable or refused, 2 bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import msgspec

from fabric_lsp.commands.face import CliError, add_settings_arguments, cli_config, project_dir


def _settings(args: argparse.Namespace, command: str) -> tuple[Any, Any]:
    from fabric_lsp.engine.team.settings import TeamSettings, TeamSettingsError

    cfg = cli_config(args, f"team {command}")
    try:
        settings = TeamSettings.from_settings(cfg.team)
    except TeamSettingsError as err:
        raise CliError(f"fabric-lsp team {command}: {err}") from None
    return cfg, settings


def _emit(obj: Any) -> None:
    sys.stdout.buffer.write(msgspec.json.encode(obj) + b"\n")
    sys.stdout.buffer.flush()


class _Bar:
    """A one-line progress bar on a terminal (stderr); silent otherwise."""

    def __init__(self) -> None:
        self.live = sys.stderr.isatty()
        self.shown = False

    def __call__(self, done: int, total: int, label: str) -> None:
        if not self.live or total <= 0:
            return
        pct = done * 100 // total
        bar = "#" * (pct * 30 // 100)
        sys.stderr.write(f"\r[{bar:.<30}] {done}/{total} {os.path.basename(label)[:40]}\x1b[K")
        sys.stderr.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="team_command", metavar="ACTION")
    sub.required = True
    m = sub.add_parser("migrate", help="create or upgrade the team schema (the database owner, once)")
    m.add_argument("--url", help="the owner's connection (default: team.url); libpq env and ~/.pgpass apply")
    m.add_argument("--team-role", default="fabric_team", help="the role members belong to (default fabric_team)")
    add_settings_arguments(m)
    pu = sub.add_parser("push", help="push the opted-in sessions (team.projects) incrementally")
    pu.add_argument(
        "--scope",
        choices=("global", "project"),
        default="global",
        help="global: every opted-in session (default); project: those of --cwd",
    )
    pu.add_argument("--dry-run", action="store_true", help="list what would leave the machine; send nothing")
    pu.add_argument("--json", action="store_true", help="print the push report as JSON")
    add_settings_arguments(pu)
    st = sub.add_parser("status", help="what is pushed: one object per session file")
    st.add_argument("--member", help="only this member's sessions")
    st.add_argument("--json", action="store_true", help="print the list as JSON")
    add_settings_arguments(st)
    mb = sub.add_parser("members", help="who pushed: machines, sessions, entries, last push per member")
    mb.add_argument("--json", action="store_true", help="print fabric/teamMembers' answer as JSON")
    add_settings_arguments(mb)


def _run(args: argparse.Namespace) -> int:
    from fabric_lsp.engine.team.db import TeamUnavailable
    from fabric_lsp.engine.team.push import PushError
    from fabric_lsp.engine.team.schema import MigrationError
    from fabric_lsp.engine.team.settings import TeamSettingsError

    command = args.team_command
    try:
        if command == "migrate":
            return _migrate(args)
        if command == "push":
            return _push(args)
        if command == "members":
            return _members(args)
        return _status(args)
    except CliError as err:
        print(err.message, file=sys.stderr)
        return err.code
    except TeamSettingsError as err:
        print(f"fabric-lsp team {command}: {err}", file=sys.stderr)
        return 2
    except TeamUnavailable as err:
        print(f"fabric-lsp team {command}: {err.code}: {err.message}", file=sys.stderr)
        return 1
    except (MigrationError, PushError) as err:
        print(f"fabric-lsp team {command}: {err}", file=sys.stderr)
        return 1
    except Exception as err:  # a database refusal (RLS, rights) names itself
        try:
            import psycopg
        except ImportError:
            raise err from None
        if isinstance(err, psycopg.Error):
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            print(f"fabric-lsp team {command}: the team database refused: {first}", file=sys.stderr)
            return 1
        raise


def _migrate(args: argparse.Namespace) -> int:
    from fabric_lsp.engine.team.db import connect
    from fabric_lsp.engine.team.schema import migrate

    _cfg, settings = _settings(args, "migrate")
    url = args.url or settings.require_url()
    conn = connect(url, check_schema=False)
    try:
        before, after = migrate(conn, args.team_role)
    finally:
        conn.close()
    if before == after:
        print(f"team schema is at version {after}; rights of role {args.team_role} re-granted")
    else:
        print(f"team schema migrated from version {before} to {after}; role {args.team_role} may read and push")
    return 0


def _push(args: argparse.Namespace) -> int:
    from fabric_lsp.engine.memory.api import MemoryConfig, MemoryEngine
    from fabric_lsp.engine.team.api import TeamEngine

    cfg, settings = _settings(args, "push")
    if not settings.projects:
        print(
            "fabric-lsp team push: team.projects is empty: nothing is pushed until you opt projects in "
            '(user-level fabric.json: {"team": {"projects": ["/path/to/project*"]}})',
            file=sys.stderr,
        )
    if not cfg.agent_dir.is_dir():
        raise CliError(
            f"fabric-lsp team push: the Pi agent dir {cfg.agent_dir} does not exist "
            "(set --agent-dir or PI_CODING_AGENT_DIR)"
        )
    memory = MemoryConfig.from_settings(dict(cfg.memory))
    local = MemoryEngine(
        memory, agent_dir=str(cfg.agent_dir), session_dir=str(cfg.session_dir), index_dir=str(cfg.index_dir)
    )
    team = TeamEngine(settings, memory, lambda: local)
    bar = _Bar()
    try:
        report = team.push(local, scope=args.scope, cwd=project_dir(args), dry_run=args.dry_run, progress=bar)
    finally:
        bar.close()
        team.close()
        local.close()
    if args.json:
        _emit(report.as_json())
        return 0
    verb = "would push" if args.dry_run else "pushed"
    for step in report.steps:
        if step.action == "unchanged":
            continue
        what = {
            "new": f"{verb} (new)",
            "replace": f"{verb} (replaced)",
            "append": f"{verb} (appended)",
            "delete": "would remove" if args.dry_run else "removed",
            "skip": "skipped",
        }[step.action]
        detail = f"{step.entries_sent} entries" if step.action in ("new", "replace", "append") else step.reason
        print(f"{what}: {step.session_id}  {step.cwd}  ({detail})")
    counts = report.counts()
    print(
        f"member {report.member} on {report.machine}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        if counts
        else f"member {report.member} on {report.machine}: no sessions in scope"
    )
    return 0


def _status(args: argparse.Namespace) -> int:
    from fabric_lsp.engine.memory.api import MemoryConfig
    from fabric_lsp.engine.team.api import TeamEngine

    cfg, settings = _settings(args, "status")
    team = TeamEngine(settings, MemoryConfig.from_settings(dict(cfg.memory)))
    try:
        rows = team.status(args.member)
    finally:
        team.close()
    if args.json:
        _emit(rows)
        return 0
    if not rows:
        print("nothing is pushed" + (f" by {args.member}" if args.member else ""))
    for row in rows:
        print(
            f"{row['member']}  {row['machine']}  {row['sessionId']}  {row['entryCount']} entries  {row['cwd']}\n"
            f"    {row['sessionFile']}"
        )
    return 0


def _members(args: argparse.Namespace) -> int:
    """The server's `fabric/teamMembers` answer (the same bytes with --json)."""
    from fabric_lsp.engine.memory.api import MemoryConfig
    from fabric_lsp.engine.team.api import TeamEngine

    cfg, settings = _settings(args, "members")
    team = TeamEngine(settings, MemoryConfig.from_settings(dict(cfg.memory)))
    try:
        result = team.members()
    finally:
        team.close()
    code = 0 if result.error is None else (2 if result.error.code == "team_not_configured" else 1)
    if args.json:
        _emit(result)
        return code
    if result.error is not None:
        print(f"fabric-lsp team members: {result.error.code}: {result.error.message}", file=sys.stderr)
        return code
    if not result.members:
        print("nobody has pushed yet (fabric-lsp team push)")
    for m in result.members:
        print(
            f"{m.member}  {m.sessions} sessions  {m.entries} entries  last push {m.last_pushed_at}  "
            f"on {', '.join(m.machines)}"
        )
    return 0


SUBCOMMANDS = {
    "team": ("team recall on PostgreSQL: migrate | push | status | members (docs/team.md)", _args, _run),
}
