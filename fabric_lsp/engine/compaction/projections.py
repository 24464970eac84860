"""Projections (digest §3-§4): typed events -> bounded section lines."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..jsstr import (
    first_line,
    is_blank,
    js_entries,
    js_string_of,
    js_stringify,
    truncate,
)
from .bounds import ARROW, clip_utf8, omission_line, sample_addressed
from .normalize import transcript_text
from .operations import (
    Op,
    collect_operations,
    created_proof,
    custom_message_line,
    is_bash_op,
    is_file_op,
    nullish_get,
    path_of,
    quoted,
)

if TYPE_CHECKING:
    from ..json_types import JsonValue

MAX_USER_GOAL_LINES = 3
MAX_USER_GOAL_LINE = 1024
MAX_LATER_GOALS = 24
MAX_FILES_PER_KIND = 24
MAX_UNRESOLVED = 24
MAX_RESOLVED = 8
MAX_ACTIVITY = 48
MAX_EARLIER_TURNS = 32
TRANSCRIPT_WINDOW = 40
EM_DASH = "\u2014"


def goal_lines_of(text: str) -> list[str]:
    lines = text.split("\n")
    kept = [truncate(line, MAX_USER_GOAL_LINE) for line in lines if not is_blank(line) or len(lines) == 1]
    if len(kept) > MAX_USER_GOAL_LINES:
        kept = kept[:MAX_USER_GOAL_LINES] + ["\u2026"]
    return kept


def project_goal(events: list[dict[str, Any]]) -> tuple[list[str], int]:
    users = [ev for ev in events if ev["type"] == "user"]
    if not users:
        return [], 0
    lines = goal_lines_of(users[0]["text"])
    s = sample_addressed(users[1:], MAX_LATER_GOALS)
    for i, ev in enumerate(s.values):
        if s.omitted > 0 and i == s.split_index:
            lines.append(omission_line(s.omitted, s.omitted_first, s.omitted_last, "user scope changes"))
        line = truncate(first_line(ev["text"]), 120)
        if line:
            lines.append(f"- {line} [entry {ev['entryId']}]")
    return lines, s.omitted


# --------------------------------------------------------------------------- files

_SEG_SPLIT = re.compile(r"[/\\]")


def common_root(paths: list[str]) -> str:
    if not paths:
        return ""
    segs = [[p for p in _SEG_SPLIT.split(path) if p] for path in paths]
    first = segs[0]
    n = len(first)
    for s in segs[1:]:
        m = 0
        lim = min(n, len(s))
        while m < lim and s[m] == first[m]:
            m += 1
        n = m
        if n == 0:
            break
    if n == 0:
        return ""
    return "/".join(first[:n]) + "/"


def project_files(ops: list[Op]) -> tuple[list[str], int]:
    created: dict[str, dict[str, Any]] = {}
    written: dict[str, dict[str, Any]] = {}
    modified: dict[str, dict[str, Any]] = {}
    read: dict[str, dict[str, Any]] = {}
    for op in ops:
        if op.outcome != "succeeded" or not is_file_op(op):
            continue
        p = op.path
        if p is None:
            continue
        if op.tool == "write":
            target = created if created_proof(op) else written
        elif op.tool == "edit":
            target = modified
        else:
            target = read
        if p not in target:
            target[p] = {"path": p, "entryId": op.address}
    read_list = [v for k, v in read.items() if k not in modified and k not in written and k not in created]
    groups = [
        ("Created:", sample_addressed(created.values(), MAX_FILES_PER_KIND)),
        ("Written:", sample_addressed(written.values(), MAX_FILES_PER_KIND)),
        ("Modified:", sample_addressed(modified.values(), MAX_FILES_PER_KIND)),
        ("Read:", sample_addressed(read_list, MAX_FILES_PER_KIND)),
    ]
    omitted = sum(s.omitted for _, s in groups)
    if all(not s.values and s.omitted == 0 for _, s in groups):
        return [], omitted
    if all(not s.values for _, s in groups):
        # every block empty -> section empty (omissions only happen with values)
        return [], omitted
    root = common_root([v["path"] for _, s in groups for v in s.values])
    lines: list[str] = []
    if root:
        lines.append(f"(under {root})")
    for header, s in groups:
        if not s.values and s.omitted == 0:
            continue
        lines.append(header)
        for i, v in enumerate(s.values):
            if s.omitted > 0 and i == s.split_index:
                lines.append("  " + omission_line(s.omitted, s.omitted_first, s.omitted_last, "file addresses"))
            shown = v["path"].replace(root, "", 1) if root else v["path"]
            lines.append(f"  {shown} [entry {v['entryId']}]")
    return lines, omitted


# ------------------------------------------------------------------------ activity


def _run_pointer(ev: dict[str, Any]) -> str:
    return ev["address"] if ev.get("source") == "branch" else ev["entryId"]


def project_activity(events: list[dict[str, Any]]) -> tuple[list[str], int]:
    items: list[dict[str, Any]] = []
    for ev in events:
        t = ev["type"]
        if t == "fabricRun":
            name = clip_utf8(truncate(ev["name"], 80), 192)
            desc = ""
            if ev.get("description"):
                desc = f" {EM_DASH} " + clip_utf8(truncate(ev["description"], 180), 512)
            items.append({"entryId": _run_pointer(ev), "text": f"- {name}{desc} {ARROW} {ev['outcome']}"})
        elif t == "fabricPhase":
            items.append({"entryId": ev["address"], "text": f"- Phase: {truncate(ev['phase'], 140)}"})
        elif t == "fabricOperation":
            if is_file_op(ev):
                continue
            args: JsonValue = ev["args"]
            if is_bash_op(ev):
                primary = args.get("command") if isinstance(args, dict) else None
            else:
                primary = nullish_get(args, "id", "name", "query", "action")
            detail = ""
            if isinstance(primary, str) and not is_blank(primary):
                detail = f" ({truncate(first_line(primary), 72)})"
            items.append({"entryId": ev["address"], "text": f"- {ev['ref']}{detail} {ARROW} {ev['outcome']}"})
    s = sample_addressed(items, MAX_ACTIVITY)
    lines: list[str] = []
    for i, it in enumerate(s.values):
        if s.omitted > 0 and i == s.split_index:
            lines.append(omission_line(s.omitted, s.omitted_first, s.omitted_last, "Fabric activity records"))
        lines.append(f"{it['text']} [entry {it['entryId']}]")
    return lines, s.omitted


# --------------------------------------------------------------------- outstanding


def _cheap_key(op: Op) -> tuple[str, str | None]:
    """(key, None) for file/bash identities, or (generic prefix, "") when the generic key
    still needs `JSON.stringify(args)`."""
    if is_file_op(op):
        p = op.path
        if p is not None:
            return f"file\0{op.tool}\0{p}", None
    if is_bash_op(op):
        c = op.args.get("command") if isinstance(op.args, dict) else None
        if isinstance(c, str):
            return f"bash\0{op.tool}\0{c}", None
    return f"generic\0{op.ref}\0", ""


def op_key(op: Op) -> str:
    key, rest = _cheap_key(op)
    return key if rest is None else key + js_stringify(op.args)


def project_outstanding(ops: list[Op]) -> tuple[list[str], int]:
    failed: list[tuple[Op, str]] = []
    generic_refs: set[str] = set()
    for op in ops:
        if op.outcome != "succeeded":
            k = op_key(op)
            failed.append((op, k))
            if k.startswith("generic\0"):
                generic_refs.add(op.ref)
    if not failed:
        return [], 0
    wanted = {k for _, k in failed}
    last_success: dict[str, int] = {}
    for op in ops:
        if op.outcome != "succeeded":
            continue
        key, rest = _cheap_key(op)
        if rest is not None:
            if op.ref not in generic_refs:
                continue
            key = key + js_stringify(op.args)
        if key in wanted and op.index > last_success.get(key, -1):
            last_success[key] = op.index
    unresolved: list[tuple[Op, bool]] = []
    resolved: list[tuple[Op, bool]] = []
    for op, k in failed:
        is_resolved = last_success.get(k, -1) > op.index
        (resolved if is_resolved else unresolved).append((op, is_resolved))

    def describe(op: Op) -> str:
        subject = op.ref
        if is_file_op(op) and op.path is not None:
            subject = f"{op.ref} {op.path}"
        elif is_bash_op(op) and isinstance(op.args, dict) and isinstance(op.args.get("command"), str):
            subject = f"{op.ref}: {truncate(first_line(op.args['command']), 140)}"
        err = (
            f": {truncate(first_line(op.error), 140)}" if isinstance(op.error, str) and op.error else f": {op.outcome}"
        )
        return subject + err

    def addr(item: tuple[Op, bool]) -> Any:
        return item[0].address

    lines: list[str] = []
    su = sample_addressed(unresolved, MAX_UNRESOLVED, addr)
    for i, (op, _) in enumerate(su.values):
        if su.omitted > 0 and i == su.split_index:
            lines.append(omission_line(su.omitted, su.omitted_first, su.omitted_last, "open error records"))
        lines.append(f"- {describe(op)} [entry {op.address}]")
    sr = sample_addressed(resolved, MAX_RESOLVED, addr)
    for i, (op, _) in enumerate(sr.values):
        if sr.omitted > 0 and i == sr.split_index:
            lines.append(omission_line(sr.omitted, sr.omitted_first, sr.omitted_last, "resolved error records"))
        lines.append(f"- {describe(op)} [RESOLVED] [entry {op.address}]")
    return lines, su.omitted + sr.omitted


# ------------------------------------------------------------------- earlier turns


def _context_line(ev: dict[str, Any], max_units: int) -> str:
    if ev["type"] == "user":
        return quoted(first_line(ev["text"]), max_units)
    return custom_message_line(ev, max_units)


def project_earlier_turns(events: list[dict[str, Any]]) -> tuple[list[str], int]:
    turns: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    for ev in events:
        t = ev["type"]
        if t == "user" or t == "customMessage":
            if cur is not None:
                turns.append(cur)
            cur = {"context": ev, "tools": {}, "run": None}
            continue
        if cur is None:
            continue
        tools = cur["tools"]
        if t == "fabricRun":
            cur["run"] = ev
        elif t == "toolCall":
            if ev["name"] != "fabric_exec":
                tools[ev["name"]] = tools.get(ev["name"], 0) + 1
        elif t == "bash":
            tools["bash"] = tools.get("bash", 0) + 1
        elif t == "fabricOperation":
            tool = ev["tool"] if ev["tool"] is not None else "undefined"  # JS `String(undefined)`
            tools[tool] = tools.get(tool, 0) + 1

    def render(turn: dict[str, Any]) -> str:
        ctx = turn["context"]
        parts: list[str] = []
        if turn["tools"]:
            parts.append(" ".join(f"{k}:{v}" for k, v in turn["tools"].items()))
        run = turn["run"]
        if run is not None:
            parts.append(f"fabric:{quoted(clip_utf8(run['name'], 128), 48)}{ARROW}{run['outcome']}")
        tail = (" | " + " | ".join(parts)) if parts else ""
        return f"{_context_line(ctx, 80)}{tail} [entry {ctx['entryId']}]"

    s = sample_addressed(turns, MAX_EARLIER_TURNS, lambda t: t["context"]["entryId"])
    lines: list[str] = []
    for i, turn in enumerate(s.values):
        if s.omitted > 0 and i == s.split_index:
            lines.append(omission_line(s.omitted, s.omitted_first, s.omitted_last, "earlier turns"))
        lines.append(render(turn))
    return lines, s.omitted


# ------------------------------------------------------------------------- status


def project_status(events: list[dict[str, Any]], ops: list[Op]) -> list[str]:
    lines: list[str] = []
    last_ctx = last_run = last_note = None
    for ev in events:
        t = ev["type"]
        if t == "user" or t == "customMessage":
            last_ctx = ev
        elif t == "fabricRun":
            last_run = ev
        elif t == "assistantText":
            last_note = ev
    if last_ctx is not None:
        if last_ctx["type"] == "user":
            lines.append(f"Last request: {truncate(first_line(last_ctx['text']), 140)}")
        else:
            lines.append(f"Last context: {custom_message_line(last_ctx, 140)}")
    last_change = None
    for op in ops:
        if is_file_op(op) and op.tool in ("edit", "write"):
            last_change = op
    if last_change is not None:
        p = last_change.path
        lines.append(f"Last change: {last_change.tool}{' ' + p if p is not None else ''}")
    if last_run is not None:
        name = clip_utf8(truncate(last_run["name"], 96), 256)
        lines.append(f"Last execution: {name} {ARROW} {last_run['outcome']} [entry {_run_pointer(last_run)}]")
    if last_note is not None:
        note = truncate(first_line(last_note["text"]), 140)
        if note:
            lines.append(f"Last note: {note}")
    return lines


# ----------------------------------------------------------------------- transcript


def summarize_args(name: str, args: Any) -> str:
    if name == "fabric_exec":
        return "structured execution"
    if name == "bash":
        primary = nullish_get(args, "command", "cmd", "shell")
    elif name == "grep":
        primary = nullish_get(args, "pattern", "query", "regex")
    elif name == "find":
        primary = nullish_get(args, "pattern")
    else:
        primary = path_of(args)
    if isinstance(primary, str) and not is_blank(primary):
        return truncate(first_line(primary), 80)
    return " ".join(f"{k}={truncate(js_string_of(v), 40)}" for k, v in js_entries(args)[:2])


def transcript_line(ev: dict[str, Any]) -> str:
    r = f"(#{ev['index']})"
    t = ev["type"]
    if t == "user":
        return f"{r} user: {truncate(first_line(ev['text']), 100)}"
    if t == "assistantText":
        return f"{r} assistant: {truncate(first_line(ev['text']), 100)}"
    if t == "customMessage":
        return f"{r} {custom_message_line(ev, 100)}"
    if t == "toolCall":
        return f"{r} {ev['name']}({summarize_args(ev['name'], ev['args'])})"
    if t == "toolResult":
        return f"{r} {ARROW} {'error' if ev['isError'] else 'ok'}: {transcript_text(ev)}"
    if t == "bash":
        return f"{r} bash({truncate(first_line(ev['command']), 80)}) {ARROW} {'error' if ev['isError'] else 'ok'}"
    if t == "fabricRun":
        return f"{r} fabric_exec {quoted(clip_utf8(ev['name'], 160), 60)} {ARROW} {ev['outcome']} [entry {_run_pointer(ev)}]"
    if t == "fabricPhase":
        return f"{r} phase({truncate(ev['phase'], 80)}) [{ev['address']}]"
    if t == "fabricOperation":
        return f"{r} {ev['ref']}({summarize_args(ev['tool'], ev['args'])}) {ARROW} {ev['outcome']} [{ev['address']}]"
    return r


def project_transcript(events: list[dict[str, Any]], runs: list[dict[str, Any]] | None = None) -> tuple[list[str], int]:
    """`runs`, when given, are the fabricRun events of `events`."""
    completed = {ev["toolCallId"] for ev in (events if runs is None else runs) if ev["type"] == "fabricRun"}
    remaining = (
        events
        if not completed
        else [
            ev
            for ev in events
            if not (
                (ev["type"] == "toolCall" and ev["name"] == "fabric_exec" and ev["toolCallId"] in completed)
                or (ev["type"] == "toolResult" and ev["toolName"] == "fabric_exec" and ev["toolCallId"] in completed)
            )
        ]
    )
    omitted = len(remaining) - TRANSCRIPT_WINDOW
    lines: list[str] = []
    if omitted > 0:
        lines.append(
            omission_line(omitted, remaining[0]["entryId"], remaining[omitted - 1]["entryId"], "transcript events")
        )
        window = remaining[omitted:]
    else:
        omitted = 0
        window = remaining
    lines.extend(transcript_line(ev) for ev in window)
    return lines, omitted


# --------------------------------------------------------------------------- all


# which projections read an event type (the others skip it: each projection sees, in
# order, the events of the types it reads, and gives the same lines as on all events)
_OPS, _GOAL, _ACTIVITY, _TURNS, _STATUS, _RUNS = range(6)
_ROUTES = {
    "toolCall": (_OPS, _TURNS),
    "toolResult": (_OPS,),
    "bash": (_OPS, _TURNS),
    "fabricOperation": (_OPS, _ACTIVITY, _TURNS),
    "user": (_GOAL, _TURNS, _STATUS),
    "customMessage": (_TURNS, _STATUS),
    "fabricRun": (_ACTIVITY, _TURNS, _STATUS, _RUNS),
    "fabricPhase": (_ACTIVITY,),
    "assistantText": (_STATUS,),
}


def project_all(events: list[dict[str, Any]]) -> dict[str, Any]:
    # one pass sorts the events out by the projections that read them
    subsets: list[list[dict[str, Any]]] = [[] for _ in range(6)]
    appends = [x.append for x in subsets]
    routes = {t: tuple(appends[k] for k in ks) for t, ks in _ROUTES.items()}
    for ev in events:
        for add in routes.get(ev["type"], ()):
            add(ev)
    ops = collect_operations(subsets[_OPS])
    goal, og = project_goal(subsets[_GOAL])
    files, of = project_files(ops)
    activity, oa = project_activity(subsets[_ACTIVITY])
    outstanding, oo = project_outstanding(ops)
    earlier, oe = project_earlier_turns(subsets[_TURNS])
    status = project_status(subsets[_STATUS], ops)
    transcript, ot = project_transcript(events, subsets[_RUNS])
    return {
        "goal": goal,
        "files": files,
        "activity": activity,
        "outstanding": outstanding,
        "earlierTurns": earlier,
        "status": status,
        "transcript": transcript,
        "omittedCounts": {
            "goal": og,
            "files": of,
            "activity": oa,
            "outstanding": oo,
            "earlierTurns": oe,
            "transcript": ot,
        },
    }
