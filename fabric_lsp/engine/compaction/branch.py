"""Deterministic branch summaries (digest §11): typed facts v2, the bounded envelope
and the strict v2/v1 reader."""

from __future__ import annotations

from typing import Any, Callable, Optional

from .bounds import clip_utf8, sample_addressed, utf8_bytes
from ..jsstr import is_blank, is_finite_number, is_safe_int, js_stringify
from .normalize import OUTCOMES
from .projections import project_all
from .render import render_summary, section_headers

KIND = "pi-fabric.branch-summary"
MAX_FACTS = 256
MAX_ENVELOPE_BYTES = 131072
MAX_NODES = 4096
MAX_DEPTH = 16
MAX_MEMBERS = 256
MAX_SECTIONS = 64

_ENVELOPE_KEYS = frozenset(("kind", "version", "source", "facts", "omittedFacts", "sections", "request"))
_SOURCE_KEYS = frozenset(("firstEntryId", "lastEntryId", "entryCount", "oldLeafId"))
_REQUEST_KEYS = frozenset(("text", "sourceBytes", "truncated"))
_BASE = ("kind", "entryId", "subordinal", "address")
_FACT_KEYS = {
    "user": frozenset(_BASE + ("text",)),
    "customMessage": frozenset(_BASE + ("customType", "text", "display", "details")),
    "phase": frozenset(_BASE + ("phase",)),
    "operation": frozenset(_BASE + ("ref", "provider", "action", "tool", "args", "outcome", "error", "result")),
    "fabricRun": frozenset(_BASE + ("name", "description", "outcome")),
}


# ------------------------------------------------------------------------ reader


class _Bad(Exception):
    pass


def _check_json(value: Any, counter: list, depth: int) -> None:
    counter[0] += 1
    if counter[0] > MAX_NODES or depth > MAX_DEPTH:
        raise _Bad()
    if value is None or isinstance(value, (str, bool)):
        return
    if isinstance(value, (int, float)):
        if not is_finite_number(value):
            raise _Bad()
        return
    if isinstance(value, list):
        if len(value) > MAX_MEMBERS:
            raise _Bad()
        for v in value:
            _check_json(v, counter, depth + 1)
        return
    if isinstance(value, dict):
        if len(value) > MAX_MEMBERS:
            raise _Bad()
        for v in value.values():
            _check_json(v, counter, depth + 1)
        return
    raise _Bad()


def _valid_fact(f: Any, version: int) -> bool:
    if not isinstance(f, dict):
        return False
    kind = f.get("kind")
    allowed = _FACT_KEYS.get(kind)
    if allowed is None or (kind == "fabricRun" and version < 2):
        return False
    if any(k not in allowed for k in f):
        return False
    eid, sub, addr = f.get("entryId"), f.get("subordinal"), f.get("address")
    if not (isinstance(eid, str) and isinstance(sub, str) and isinstance(addr, str)) or addr != f"{eid}/{sub}":
        return False
    if kind == "user":
        return isinstance(f.get("text"), str)
    if kind == "customMessage":
        return isinstance(f.get("customType"), str) and isinstance(f.get("text"), str) and isinstance(f.get("display"), bool)
    if kind == "phase":
        return isinstance(f.get("phase"), str)
    if kind == "operation":
        for k in ("provider", "action", "error"):
            if k in f and not isinstance(f[k], str):
                return False
        return (
            isinstance(f.get("ref"), str)
            and isinstance(f.get("tool"), str)
            and isinstance(f.get("args"), dict)
            and f.get("outcome") in OUTCOMES
        )
    # fabricRun
    name = f.get("name")
    if not sub.startswith("call:") or len(sub) <= 5:
        return False
    if not isinstance(name, str) or is_blank(name) or utf8_bytes(name) > 256:
        return False
    if "description" in f and (not isinstance(f["description"], str) or utf8_bytes(f["description"]) > 1024):
        return False
    return f.get("outcome") in OUTCOMES


def _read_envelope(details: Any, version: int) -> Optional[dict]:
    d = details
    if not isinstance(d, dict) or any(k not in _ENVELOPE_KEYS for k in d):
        return None
    if d.get("kind") != KIND or isinstance(d.get("version"), bool) or d.get("version") != version:
        return None
    src = d.get("source")
    if not isinstance(src, dict) or any(k not in _SOURCE_KEYS for k in src):
        return None
    if not isinstance(src.get("firstEntryId"), str) or not isinstance(src.get("lastEntryId"), str):
        return None
    if not is_safe_int(src.get("entryCount")) or src["entryCount"] < 0:
        return None
    if "oldLeafId" in src and not (src["oldLeafId"] is None or isinstance(src["oldLeafId"], str)):
        return None
    facts = d.get("facts")
    if not isinstance(facts, list) or len(facts) > MAX_FACTS:
        return None
    if not is_safe_int(d.get("omittedFacts")) or d["omittedFacts"] < 0:
        return None
    secs = d.get("sections")
    if not isinstance(secs, list) or len(secs) > MAX_SECTIONS or not all(isinstance(s, str) for s in secs):
        return None
    req = d.get("request")
    if not isinstance(req, dict) or any(k not in _REQUEST_KEYS for k in req):
        return None
    if not isinstance(req.get("text"), str) or not is_finite_number(req.get("sourceBytes")) or not isinstance(req.get("truncated"), bool):
        return None
    try:
        _check_json(d, [0], 0)
    except (_Bad, RecursionError):
        return None
    if utf8_bytes(js_stringify(d)) > MAX_ENVELOPE_BYTES:
        return None
    if not all(_valid_fact(f, version) for f in facts):
        return None
    return d


def read_branch_details(details: Any) -> Optional[dict]:
    """A valid v2 envelope, else a valid strict v1 envelope, else None."""
    try:
        return _read_envelope(details, 2) or _read_envelope(details, 1)
    except Exception:
        return None


# ------------------------------------------------------------------------- facts


def _json_object_roundtrip(v: Any) -> bool:
    return isinstance(v, dict)


def facts_from_events(events: list[dict]) -> list[dict]:
    calls = {ev["toolCallId"]: ev for ev in events if ev["type"] == "toolCall"}
    facts: list[dict] = []
    for ev in events:
        t = ev["type"]
        eid = ev["entryId"]
        if t == "user":
            facts.append({"kind": "user", "entryId": eid, "subordinal": "user", "address": f"{eid}/user", "text": clip_utf8(ev["text"], 2048)})
        elif t == "customMessage":
            f = {
                "kind": "customMessage",
                "entryId": eid,
                "subordinal": "custom-message",
                "address": f"{eid}/custom-message",
                "customType": clip_utf8(ev["customType"], 256),
                "text": clip_utf8(ev["text"], 4096),
                "display": ev["display"],
            }
            if "details" in ev:
                f["details"] = ev["details"]
            facts.append(f)
        elif t == "fabricPhase":
            facts.append({"kind": "phase", "entryId": eid, "subordinal": ev["subordinal"], "address": ev["address"], "phase": ev["phase"]})
        elif t == "fabricRun":
            f = {
                "kind": "fabricRun",
                "entryId": eid,
                "subordinal": ev["subordinal"],
                "address": ev["address"],
                "name": clip_utf8(ev["name"], 256),
            }
            if "description" in ev:
                f["description"] = clip_utf8(ev["description"], 1024)
            f["outcome"] = ev["outcome"]
            facts.append(f)
        elif t == "fabricOperation":
            f = {"kind": "operation", "entryId": eid, "subordinal": ev["subordinal"], "address": ev["address"], "ref": ev["ref"]}
            if "provider" in ev:
                f["provider"] = ev["provider"]
            if "action" in ev:
                f["action"] = ev["action"]
            f["tool"] = ev["tool"]
            f["args"] = ev["args"]
            f["outcome"] = ev["outcome"]
            if "error" in ev:
                f["error"] = ev["error"]
            if "result" in ev:
                f["result"] = ev["result"]
            facts.append(f)
        elif t == "toolResult" or t == "bash":
            call = calls.get(ev["toolCallId"]) if ev["toolCallId"] else None
            if call is not None:
                if t == "toolResult" and call["name"] == "fabric_exec":
                    continue
                if not _json_object_roundtrip(call["args"]):
                    continue
                cid = ev["toolCallId"]
                ce = call["entryId"]
                f = {
                    "kind": "operation",
                    "entryId": ce,
                    "subordinal": f"call:{cid}",
                    "address": f"{ce}/call:{cid}",
                    "ref": call["name"],
                    "action": call["name"],
                    "tool": call["name"],
                    "args": call["args"],
                    "outcome": "failed" if ev["isError"] else "succeeded",
                }
                err = ev.get("error") if t == "bash" else (ev["text"] if ev["isError"] and ev["text"] else None)
                if err:
                    f["error"] = clip_utf8(err, 8192)
                facts.append(f)
            elif t == "bash":
                f = {
                    "kind": "operation",
                    "entryId": eid,
                    "subordinal": "bash",
                    "address": f"{eid}/bash",
                    "ref": "bash",
                    "action": "bash",
                    "tool": "bash",
                    "args": {"command": ev["command"]},
                    "outcome": "failed" if ev["isError"] else "succeeded",
                }
                if ev.get("error"):
                    f["error"] = clip_utf8(ev["error"], 8192)
                facts.append(f)
    return facts


def _envelope_size(env: dict, fact_sizes: list[int]) -> int:
    shell = dict(env)
    shell["facts"] = []
    base = utf8_bytes(js_stringify(shell))
    n = len(fact_sizes)
    return base + sum(fact_sizes) + max(0, n - 1)


def build_envelope(entries: list[dict], facts: list[dict], sections: list[str], request: dict, old_leaf_id: Optional[str]) -> dict:
    s = sample_addressed(facts, MAX_FACTS)
    kept = [dict(f) for f in s.values]
    env = {
        "kind": KIND,
        "version": 2,
        "source": {
            "firstEntryId": entries[0].get("id") if entries else "",
            "lastEntryId": entries[-1].get("id") if entries else "",
            "entryCount": len(entries),
            "oldLeafId": old_leaf_id if isinstance(old_leaf_id, str) else None,
        },
        "facts": kept,
        "omittedFacts": s.omitted,
        "sections": sections,
        "request": request,
    }
    sizes = [utf8_bytes(js_stringify(f)) for f in kept]
    if _envelope_size(env, sizes) <= MAX_ENVELOPE_BYTES:
        return env
    for i in range(len(kept) - 1, -1, -1):
        f = kept[i]
        if f["kind"] == "operation" and "result" in f:
            del f["result"]
            sizes[i] = utf8_bytes(js_stringify(f))
            if _envelope_size(env, sizes) <= MAX_ENVELOPE_BYTES:
                return env
    while kept and _envelope_size(env, sizes) > MAX_ENVELOPE_BYTES:
        mid = len(kept) // 2
        del kept[mid]
        del sizes[mid]
        env["omittedFacts"] += 1
    return env


# ----------------------------------------------------------------------- compile


def compile_branch_summary(
    entries: list[dict],
    decoded: dict,
    old_leaf_id: Optional[str],
    *,
    normalize_fn: Callable[[list[dict]], list[dict]],
) -> Optional[dict]:
    """`{summary, details}` or None (nothing to summarize). `decoded` must be ok."""
    events = normalize_fn(entries)
    if not events:
        return None
    sections = project_all(events)
    req_lines = decoded["requestLines"]
    policy = decoded["policy"]
    request = {"text": "\n".join(req_lines), "sourceBytes": policy["sourceBytes"], "truncated": policy["truncated"]}
    headers = section_headers(sections, bool(request["text"]))
    last = entries[-1] if entries else {}
    ts = last.get("timestamp")
    summary = render_summary(
        sections,
        first_entry_id=entries[0].get("id") if entries else None,
        last_entry_id=last.get("id"),
        last_timestamp=ts if isinstance(ts, str) else None,
        request_lines=req_lines,
        summary_kind="branch",
    )
    details = build_envelope(entries, facts_from_events(events), headers, request, old_leaf_id)
    return {"summary": summary, "details": details, "events": events}
