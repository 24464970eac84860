"""`fabric-lsp team push`: send the derived records of opted-in sessions, incrementally.

What leaves the machine is exactly what the local hot index holds for a session
(`sessions.build_state`, tier hot, branch mode `active`): the normalized records under the
same privacy policy (`memory.indexToolOutput`, `memory.indexThinking`,
`memory.maxEntryChars`), their term counts and lengths (`hot_index.HotIndex`), the segment
starts, the typed file operations, and the session's identity (id, cwd, source hash,
lineage fingerprint, stat key). Never a raw JSONL line.

Per session (one transaction each):
* not opted in (`team.projects`), or gone from disk, but pushed before: its rows are deleted;
* unchanged stat key and policy: nothing is read or sent;
* the pushed records are a prefix of the current ones (checked by a chained SHA-256 over
  the encoded records): only the new records, their postings and new segment starts go;
* anything else: the session's rows are replaced.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fabric_lsp.engine.jsstr import utf16_sort_key
from fabric_lsp.engine.memory import disk_cache
from fabric_lsp.engine.memory.catalog import Ref, all_refs, project_refs
from fabric_lsp.engine.memory.config import MemoryConfig
from fabric_lsp.engine.memory.core import MemoryState

from .prepare import BRANCHES, PREPARE, PushTask, prepare
from .schema import SCHEMA
from .settings import TeamSettings, machine_name

Progress = Callable[[int, int, str], None]


class PushError(Exception):
    pass


def session_key(member: str, machine: str, session_file: str, branches: str) -> uuid.UUID:
    """The distribution key of a pushed session (stable across pushes)."""
    digest = hashlib.sha256("\0".join((member, machine, session_file, branches)).encode("utf-8", "surrogatepass"))
    return uuid.UUID(bytes=digest.digest()[:16])


def policy_of(cfg: MemoryConfig) -> str:
    """What the pushed records depend on besides the source: a change re-pushes all."""
    return (
        f"team/1;{disk_cache.ENGINE_FORMAT};branches:{BRANCHES};entry:{cfg.max_entry_chars};"
        f"thinking:{'true' if cfg.index_thinking else 'false'};"
        f"tool-output:{'true' if cfg.index_tool_output else 'false'}"
    )


def stat_text(ref: Ref) -> str:
    key = ref.key
    return "" if key is None else ",".join(str(v) for v in key.as_list())


# ---- the plan ------------------------------------------------------------------------------


@dataclass
class Remote:
    skey: uuid.UUID
    session_file: str
    session_id: str
    cwd: str
    stat_key: str
    policy: str
    entry_count: int
    seg_count: int
    records_hash: str
    gen: int


@dataclass
class Step:
    action: str  # "new" | "replace" | "append" | "unchanged" | "delete" | "skip"
    session_file: str
    session_id: str
    cwd: str
    reason: str = ""
    entries_sent: int = 0
    postings_sent: int = 0


@dataclass
class PushReport:
    member: str
    machine: str
    dry_run: bool
    steps: list[Step] = field(default_factory=list[Step])
    pending: int = 0
    pending_reasons: list[str] = field(default_factory=list[str])

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.steps:
            out[s.action] = out.get(s.action, 0) + 1
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "member": self.member,
            "machine": self.machine,
            "dryRun": self.dry_run,
            "counts": self.counts(),
            "pendingSessions": self.pending,
            "pendingReasons": self.pending_reasons,
            "sessions": [
                {
                    "action": s.action,
                    "sessionFile": s.session_file,
                    "sessionId": s.session_id,
                    "cwd": s.cwd,
                    **({"reason": s.reason} if s.reason else {}),
                    "entriesSent": s.entries_sent,
                    "postingsSent": s.postings_sent,
                }
                for s in self.steps
            ],
        }


def _remote_sessions(conn: Any, member: str, machine: str) -> dict[str, Remote]:
    rows = conn.execute(
        f"SELECT skey, session_file, session_id, cwd, stat_key, policy, entry_count, seg_count, records_hash, gen "
        f"FROM {SCHEMA}.sessions WHERE member = %s AND machine = %s AND branches = %s",
        (member, machine, BRANCHES),
    ).fetchall()
    return {r[1]: Remote(*r) for r in rows}


def claim_member(conn: Any, member: str) -> None:
    """Claim `member` for this database role (first push), or check it is ours."""
    with conn.transaction():
        conn.execute(f"INSERT INTO {SCHEMA}.members (member) VALUES (%s) ON CONFLICT (member) DO NOTHING", (member,))
        row = conn.execute(f"SELECT owner, current_user FROM {SCHEMA}.members WHERE member = %s", (member,)).fetchone()
    if row is None or row[0] != row[1]:
        owner = row[0] if row is not None else "?"
        raise PushError(
            f'team.member "{member}" belongs to the database role "{owner}", not to "{row[1] if row else "?"}"; '
            "set team.member to your own name (each member pushes with its own role)"
        )


def _in_project(path: str, folder: str) -> bool:
    return os.path.dirname(path) == folder


def push(
    conn: Any,
    settings: TeamSettings,
    cfg: MemoryConfig,
    core: MemoryState,
    *,
    scope: str = "global",
    cwd: str | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> PushReport:
    """Push (or with `dry_run`, only list) the opted-in sessions of `scope` ("global":
    every session of the agent dir; "project": those of `cwd`)."""
    member, machine = settings.member, machine_name()
    report = PushReport(member, machine, dry_run)
    lock = getattr(core, "lock", None)
    with lock if lock is not None else contextlib.nullcontext():  # (a server's indexer runs meanwhile)
        if scope == "project":
            if not cwd:
                raise PushError("--scope project needs a working directory (--cwd)")
            refs = project_refs(core, cwd)
            from fabric_lsp.engine.session.discovery import encode_cwd

            folder = os.path.join(core.session_dir, encode_cwd(cwd))
        elif scope == "global":
            refs = all_refs(core)
            folder = None
        else:
            raise PushError(f'--scope: unknown scope "{scope}"; expected project or global')
    if not dry_run:
        claim_member(conn, member)
    remote = _remote_sessions(conn, member, machine)
    policy = policy_of(cfg)
    seen: set[str] = set()
    pending_reasons: set[str] = set()
    total = len(refs)
    steps: dict[str, Step] = {}
    todo: list[tuple[Ref, Remote | None]] = []
    for ref in refs:
        seen.add(ref.file)
        old = remote.get(ref.file)
        if not settings.opted_in(ref.cwd):
            if old is not None:
                steps[ref.file] = Step("delete", ref.file, old.session_id, old.cwd, "not opted in")
                if not dry_run:
                    delete_session(conn, old.skey)
            continue
        if old is not None and old.stat_key == stat_text(ref) and old.policy == policy:
            steps[ref.file] = Step("unchanged", ref.file, old.session_id, old.cwd)
            continue
        todo.append((ref, old))
    done = [total - len(todo)]

    def task(ref: Ref, old: Remote | None) -> PushTask:
        skey = session_key(member, machine, ref.file, BRANCHES)
        known = (old.entry_count, old.records_hash, old.gen, old.policy == policy) if old is not None else None
        return PushTask(ref.file, cfg, ref.id, ref.cwd, str(skey), policy, known, dry_run)

    def settle(ref: Ref, ready: dict[str, Any]) -> None:
        if progress is not None:
            progress(done[0], total, ref.file)
        done[0] += 1
        if "missing" in ready:
            report.pending += 1
            pending_reasons.add(ready["missing"])
            steps[ref.file] = Step("skip", ref.file, ref.id, ref.cwd, ready["missing"])
            return
        step = Step(ready["action"], ref.file, ready["sessionId"], ready["cwd"])
        if dry_run:
            step.entries_sent = ready["n"] - ready["start"]
        else:
            skey = session_key(member, machine, ref.file, BRANCHES)
            step.entries_sent, step.postings_sent = write_prepared(
                conn, skey, ready, ref, member=member, machine=machine
            )
        steps[ref.file] = step

    _prepare_all(todo, task, settle, workers=min(getattr(core, "parallel_workers", 1), len(todo)))
    report.steps = [steps[ref.file] for ref in refs if ref.file in steps]
    for path, old in remote.items():
        if path in seen or (folder is not None and not _in_project(path, folder)):
            continue
        report.steps.append(Step("delete", path, old.session_id, old.cwd, "deleted"))
        if not dry_run:
            delete_session(conn, old.skey)
    if progress is not None:
        progress(total, total, "")
    report.pending_reasons = sorted(pending_reasons)
    if not dry_run:
        with conn.transaction():
            conn.execute(
                f"INSERT INTO {SCHEMA}.pushes (member, machine, pushed_at, pending_sessions, pending_reasons) "
                "VALUES (%s, %s, now(), %s, %s) ON CONFLICT (member, machine) DO UPDATE SET "
                "pushed_at = excluded.pushed_at, pending_sessions = excluded.pending_sessions, "
                "pending_reasons = excluded.pending_reasons",
                (member, machine, report.pending, report.pending_reasons),
            )
    return report


def delete_session(conn: Any, skey: uuid.UUID) -> None:
    with conn.transaction():
        for table in ("postings", "entries", "segments", "file_ops", "sessions"):
            conn.execute(f"DELETE FROM {SCHEMA}.{table} WHERE skey = %s", (skey,))


_STAGED = (
    ("entries", "skey, pos, dl, rec"),
    ("segments", "skey, seg, start_pos, start_index"),
    ("postings", "skey, term, gen, pos, tf, dl, seg"),
)


def _staging(conn: Any) -> None:
    for table, _cols in _STAGED:
        conn.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS push_{table} (LIKE {SCHEMA}.{table} INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
        )


def _prepare_all(
    todo: list[tuple[Ref, Remote | None]],
    task: Callable[[Ref, Remote | None], PushTask],
    settle: Callable[[Ref, dict[str, Any]], None],
    *,
    workers: int,
) -> None:
    """Prepare every session of `todo`, in builder processes when there are two or more
    (the database writes of one overlap the builds of the next), else here; `settle`
    gets each one as it is ready (a session whose builder failed is prepared here)."""
    if workers < 2 or len(todo) < 2:
        for ref, old in todo:
            settle(ref, prepare(task(ref, old)))
        return
    from fabric_lsp.engine.memory.build_pool import run_batch

    by_file = {ref.file: (ref, old) for ref, old in todo}

    def on_result(file: str, reply: tuple[str, Any]) -> None:
        ref, old = by_file[file]
        status, value = reply
        settle(ref, value if status == "ok" else prepare(task(ref, old)))

    failed = run_batch(
        ((ref.file, (PREPARE, (task(ref, old),))) for ref, old in todo), workers, on_result, lambda: None, calls=True
    )
    for file in failed:
        ref, old = by_file[file]
        settle(ref, prepare(task(ref, old)))


def write_prepared(
    conn: Any, skey: uuid.UUID, ready: dict[str, Any], ref: Ref, *, member: str, machine: str
) -> tuple[int, int]:
    """Write one prepared session's rows in one transaction; (entries sent, posting rows sent)."""
    # a session pushed before and now replaced loses its old rows; a new one has none
    full = ready["action"] == "replace"
    with conn.transaction():
        if full:
            for table in ("postings", "entries", "segments", "file_ops"):
                conn.execute(f"DELETE FROM {SCHEMA}.{table} WHERE skey = %s", (skey,))
        conn.execute(
            f"INSERT INTO {SCHEMA}.sessions (skey, member, machine, session_file, file_key, branches, session_id, "
            "record_session_id, cwd, source_hash, lineage_fingerprint, leaf_id, mtime, size, stat_key, policy, "
            "entry_count, total_len, seg_count, records_hash, complete, reasons, first_ts, last_ts, gen, pushed_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
            "%s, now()) ON CONFLICT (skey) DO UPDATE SET session_id = excluded.session_id, "
            "record_session_id = excluded.record_session_id, cwd = excluded.cwd, source_hash = excluded.source_hash, "
            "lineage_fingerprint = excluded.lineage_fingerprint, leaf_id = excluded.leaf_id, mtime = excluded.mtime, "
            "size = excluded.size, stat_key = excluded.stat_key, policy = excluded.policy, "
            "entry_count = excluded.entry_count, total_len = excluded.total_len, seg_count = excluded.seg_count, "
            "records_hash = excluded.records_hash, complete = excluded.complete, reasons = excluded.reasons, "
            "first_ts = excluded.first_ts, last_ts = excluded.last_ts, gen = excluded.gen, pushed_at = now()",
            (skey, member, machine, ref.file, utf16_sort_key(ref.file), BRANCHES, *ready["row"]),
        )
        # COPY cannot write a table under row-level security: rows are copied into
        # session-private staging tables and moved with one INSERT each (checked by RLS).
        _staging(conn)
        cur = conn.cursor()
        formats = ("text", "text", ready["postingsFormat"])
        payloads = (ready["entries"], ready["segments"], ready["postings"])
        for (table, cols), payload, fmt in zip(_STAGED, payloads, formats):
            if payload:
                with cur.copy(f"COPY pg_temp.push_{table} ({cols}) FROM STDIN (FORMAT {fmt})") as copy:
                    copy.write(payload)
        for table, cols in _STAGED:
            conn.execute(f"INSERT INTO {SCHEMA}.{table} ({cols}) SELECT {cols} FROM pg_temp.push_{table}")
        if ready["fileOps"] is not None:
            conn.execute(
                f"INSERT INTO {SCHEMA}.file_ops (skey, data) VALUES (%s, %s) "
                "ON CONFLICT (skey) DO UPDATE SET data = excluded.data",
                (skey, ready["fileOps"]),
            )
    return ready["n"] - ready["start"], ready["postingsCount"]
