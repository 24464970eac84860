"""Reconstruction QA (digest §13): probes derived from normalized source events (never
from rendered sections), checked as substrings of the rendered summary."""

from __future__ import annotations

import math
import re
from typing import Any

from ..jsstr import first_line, is_blank, js_stringify, truncate
from .bounds import ARROW, clip_utf8, sample_addressed
from .operations import FILE_TOOLS, path_of
from .projections import goal_lines_of

_TRAILING_SEP = re.compile(r"[/\\]+$")
_SEP = re.compile(r"[/\\]")


def _basename(path: str) -> str:
    stripped = _TRAILING_SEP.sub("", path)
    parts = _SEP.split(stripped)
    last = parts[-1] if parts else ""
    return last or path


def _probe(pid: str, cls: str, question: str, answer: str) -> dict[str, Any]:
    return {"id": pid, "class": cls, "question": question, "answer": answer}


def generate_probes(events: list[dict[str, Any]], cut_index: Any) -> list[dict[str, Any]]:
    """The QA probes of the events before `cut_index` (digest order: goal, modified files,
    unresolved errors, last modification, latest Fabric run, earlier turns, footer)."""
    if not isinstance(cut_index, (int, float)) or isinstance(cut_index, bool) or not math.isfinite(cut_index):
        n = 0
    else:
        n = max(0, min(len(events), math.trunc(cut_index)))
    source = events[:n]
    users = [ev for ev in source if ev["type"] == "user"]
    results: dict[str, bool] = {}
    for ev in source:
        if ev["type"] == "toolResult":
            results[ev["toolCallId"]] = ev["isError"]
    calls = [ev for ev in source if ev["type"] == "toolCall"]
    probes: list[dict[str, Any]] = []
    if users:
        probes.append(
            _probe("goal", "content", "What is the original session goal?", "\n".join(goal_lines_of(users[0]["text"])))
        )
    probes += _modified_file_probes(calls, results)
    probes += _unresolved_error_probes(source, calls, results)
    probes += _last_modification_probes(calls)
    probes += _fabric_run_probes(source)
    probes += _earlier_turn_probes(source, users)
    probes.append(_probe("footer-recall", "address", "How is exact history recalled?", "memory.recall"))
    return probes


def _omission(key: str, question: str, s: Any) -> dict[str, Any]:
    return _probe(
        f"{key}:{s.omitted_first}", "address", question, f"source entries {s.omitted_first} {ARROW} {s.omitted_last}"
    )


def _modified_file_probes(calls: list[dict[str, Any]], results: dict[str, bool]) -> list[dict[str, Any]]:
    """Files a successful edit/write changed, per tool in first-seen order (sampled)."""
    per_tool: dict[str, list[dict[str, Any]]] = {}
    seen: set[tuple[str, str]] = set()
    for ev in calls:
        if ev["name"] not in ("edit", "write"):
            continue
        if results.get(ev["toolCallId"]) is not False:
            continue
        p = path_of(ev["args"])
        if p is None or (ev["name"], p) in seen:
            continue
        seen.add((ev["name"], p))
        per_tool.setdefault(ev["name"], []).append({"entryId": ev["entryId"], "index": ev["index"], "path": p})
    probes: list[dict[str, Any]] = []
    for tool, items in per_tool.items():
        s = sample_addressed(items, 24)
        for it in s.values:
            probes.append(
                _probe(
                    f"modified-file:{it['index']}:{it['path']}",
                    "content",
                    f"Which file did {tool} change?",
                    _basename(it["path"]),
                )
            )
        if s.omitted > 0:
            probes.append(_omission("modified-file-omission", f"Where are the omitted {tool} file addresses?", s))
    return probes


def _unresolved_error_probes(
    source: list[dict[str, Any]], calls: list[dict[str, Any]], results: dict[str, bool]
) -> list[dict[str, Any]]:
    """Failed tool results and bash runs not followed by a success on the same file or
    command (sampled)."""
    call_by_id = {ev["toolCallId"]: ev for ev in calls}
    last_ok_file: dict[str, int] = {}
    for ev in calls:
        if ev["name"] in FILE_TOOLS and results.get(ev["toolCallId"]) is False:
            p = path_of(ev["args"])
            if p is not None:
                last_ok_file[p] = max(last_ok_file.get(p, -1), ev["index"])
    last_ok_bash: dict[str, int] = {}
    for ev in source:
        if ev["type"] == "bash" and not ev["isError"] and not is_blank(ev["command"]):
            last_ok_bash[ev["command"]] = max(last_ok_bash.get(ev["command"], -1), ev["index"])
    unresolved: list[dict[str, Any]] = []
    for ev in source:
        if ev["type"] == "toolResult" and ev["isError"]:
            call = call_by_id.get(ev["toolCallId"])
            p = path_of(call["args"]) if call is not None else None
            if p is not None and last_ok_file.get(p, -1) > ev["index"]:
                continue
            sig = truncate(first_line(ev["text"]), 140)
            answer = f"{ev['toolName']} {p}: {sig}" if p is not None else f"{ev['toolName']}: {sig}"
            unresolved.append({"entryId": ev["entryId"], "index": ev["index"], "answer": answer})
        elif ev["type"] == "bash" and ev["isError"]:
            cmd = ev["command"]
            if not is_blank(cmd) and last_ok_bash.get(cmd, -1) > ev["index"]:
                continue
            unresolved.append(
                {"entryId": ev["entryId"], "index": ev["index"], "answer": f"bash: {truncate(first_line(cmd), 140)}"}
            )
    s = sample_addressed(unresolved, 24)
    probes = [
        _probe(f"unresolved-error:{it['index']}", "content", "Which error is still open?", it["answer"])
        for it in s.values
    ]
    if s.omitted > 0:
        probes.append(_omission("unresolved-error-omission", "Where are the omitted open errors?", s))
    return probes


def _last_modification_probes(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    last_mod = last_path = None
    for ev in calls:
        if ev["name"] in ("edit", "write"):
            path = path_of(ev["args"])
            if path is not None:
                last_mod, last_path = ev, path
    if last_mod is None or last_path is None:
        return []
    return [_probe(f"last-modification:{last_mod['index']}", "content", "What was modified last?", last_path)]


def _fabric_run_probes(source: list[dict[str, Any]]) -> list[dict[str, Any]]:
    runs = [ev for ev in source if ev["type"] == "fabricRun"]
    if not runs:
        return []
    run = runs[-1]
    pointer = run["address"] if run.get("source") == "branch" else run["entryId"]
    name = clip_utf8(truncate(run["name"], 96), 256)
    return [
        _probe(
            f"last-fabric-run:{run['index']}",
            "content",
            "What was the latest Fabric run?",
            f"{name} {ARROW} {run['outcome']}",
        ),
        _probe(
            f"last-fabric-run-address:{run['index']}",
            "address",
            "Where is the latest Fabric run?",
            f"[entry {pointer}]",
        ),
    ]


def _earlier_turn_probes(source: list[dict[str, Any]], users: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Earlier user turns (all but the last, sampled); those before the transcript window
    also by address."""
    earlier = users[:-1]
    window_start = source[-40]["index"] if len(source) >= 40 else (source[0]["index"] if source else 0)
    s = sample_addressed(earlier, 32)
    probes: list[dict[str, Any]] = []
    for ev in s.values:
        answer = f'"{truncate(first_line(ev["text"]), 80)}"'
        probes.append(
            _probe(f"earlier-turn-count:{ev['index']}", "content", "Which earlier turn is summarized?", answer)
        )
        if ev["index"] < window_start:
            probes.append(
                _probe(
                    f"earlier-turn-address:{ev['index']}",
                    "address",
                    "Which earlier turn lies before the transcript?",
                    answer,
                )
            )
    if s.omitted > 0:
        probes.append(_omission("earlier-turn-omission", "Where are the omitted earlier turns?", s))
    return probes


def check_probes(summary: str, probes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    failures: list[dict[str, Any]] = []
    for p in probes:
        if p["answer"] not in summary:
            failures.append(
                {
                    "id": p["id"],
                    "class": p["class"],
                    "reason": f"summary does not contain expected answer {js_stringify(p['answer'])}",
                }
            )
    return failures


def qa_report(summary: str, probes: list[dict[str, Any]]) -> dict[str, Any]:
    failures = check_probes(summary, probes)
    failed = {f["id"] for f in failures}

    def score(cls: str | None) -> float:
        sel = [p for p in probes if cls is None or p["class"] == cls]
        if not sel:
            return 1
        bad = sum(1 for p in sel if p["id"] in failed)
        v = (len(sel) - bad) / len(sel)
        return int(v) if v.is_integer() else v

    return {
        "score": score(None),
        "contentScore": score("content"),
        "addressScore": score("address"),
        "failures": failures,
        "probes": len(probes),
    }
