"""Deterministic branch summaries (digest §11): typed facts v2 and the bounded envelope.
The strict v2/v1 reader is `fabric_payloads.read_branch_details`, shared with memory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..fabric_payloads import BRANCH_KIND, MAX_ENVELOPE_BYTES, MAX_FACTS
from ..jsstr import js_stringify
from .bounds import clip_utf8, sample_addressed, utf8_bytes
from .projections import project_all
from .render import render_summary, section_headers

# The envelope reader and its limits live with the one Fabric payload layer.
KIND = BRANCH_KIND


# ------------------------------------------------------------------------- facts


def _json_object_roundtrip(v: Any) -> bool:
    return isinstance(v, dict)


def facts_from_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    calls = {ev["toolCallId"]: ev for ev in events if ev["type"] == "toolCall"}
    facts: list[dict[str, Any]] = []
    for ev in events:
        t = ev["type"]
        eid = ev["entryId"]
        if t == "user":
            facts.append(
                {
                    "kind": "user",
                    "entryId": eid,
                    "subordinal": "user",
                    "address": f"{eid}/user",
                    "text": clip_utf8(ev["text"], 2048),
                }
            )
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
            facts.append(
                {
                    "kind": "phase",
                    "entryId": eid,
                    "subordinal": ev["subordinal"],
                    "address": ev["address"],
                    "phase": ev["phase"],
                }
            )
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
            f = {
                "kind": "operation",
                "entryId": eid,
                "subordinal": ev["subordinal"],
                "address": ev["address"],
                "ref": ev["ref"],
            }
            if "provider" in ev:
                f["provider"] = ev["provider"]
            if "action" in ev:
                f["action"] = ev["action"]
            if ev["tool"] is not None:  # a `pi` operation without an action has none (JS: undefined)
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


def _envelope_size(env: dict[str, Any], fact_sizes: list[int]) -> int:
    shell = dict(env)
    shell["facts"] = []
    base = utf8_bytes(js_stringify(shell))
    n = len(fact_sizes)
    return base + sum(fact_sizes) + max(0, n - 1)


def build_envelope(
    entries: list[dict[str, Any]],
    facts: list[dict[str, Any]],
    sections: list[str],
    request: dict[str, Any],
    old_leaf_id: str | None,
) -> dict[str, Any]:
    s = sample_addressed(facts, MAX_FACTS)
    kept = [dict(f) for f in s.values]
    env: dict[str, Any] = {
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
    entries: list[dict[str, Any]],
    decoded: dict[str, Any],
    old_leaf_id: str | None,
    *,
    normalize_fn: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
) -> dict[str, Any] | None:
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
