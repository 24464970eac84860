"""Validity checks for generated Pi session files (shape as real Pi 0.80 writes it).

Written independently of bench/corpus.py: plain ``json`` plus the key orders observed in
tests/fixtures/real-sessions. ``check_session_file`` raises AssertionError naming the file,
line and rule that failed, and returns a summary used by feature tests.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[3]


def load_corpus_module():
    """bench/corpus.py is a script, not a package module: load it by path (once)."""
    name = "fabric_bench_corpus"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / "corpus.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


ID_RE = re.compile(r"^[0-9a-f]{8}$")
UUID7_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
ISO_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")

HEADER_KEYS = ["type", "version", "id", "timestamp", "cwd"]
COMMON = ["type", "id", "parentId", "timestamp"]
PAYLOAD = {
    "message": (["message"], []),
    "model_change": (["provider", "modelId"], []),
    "thinking_level_change": (["thinkingLevel"], []),
    "session_info": (["name"], []),
    "label": (["targetId"], ["label"]),
    "compaction": (["summary", "firstKeptEntryId", "tokensBefore"], ["details", "fromHook"]),
    "branch_summary": (["fromId", "summary"], ["details", "fromHook"]),
}
MESSAGE_KEYS = {
    "user": ["role", "content", "timestamp"],
    "toolResult": ["role", "toolCallId", "toolName", "content", "?details", "isError", "timestamp"],
    "bashExecution": [
        "role",
        "command",
        "output",
        "exitCode",
        "cancelled",
        "truncated",
        "?fullOutputPath",
        "timestamp",
        "?excludeFromContext",
    ],
}
ASSISTANT_KEYS = ["role", "content", "api", "provider", "model", "usage", "stopReason", "timestamp"]
USAGE_KEYS = ["input", "output", "cacheRead", "cacheWrite", "?reasoning", "totalTokens", "cost"]
COST_KEYS = ["input", "output", "cacheRead", "cacheWrite", "total"]
BRANCH_PREFIX = (
    "The user explored a different conversation branch before returning here.\nSummary of that exploration:\n\n"
)


def _match_order(keys: list[str], pattern: list[str]) -> bool:
    """keys must follow `pattern` in order; entries starting with '?' are optional."""
    i = 0
    for pat in pattern:
        name = pat.lstrip("?")
        if i < len(keys) and keys[i] == name:
            i += 1
        elif not pat.startswith("?"):
            return False
    return i == len(keys)


@dataclass
class SessionSummary:
    path: Path
    header: dict
    entries: list[dict]
    leaf_id: str
    active_path: list[str]
    types: Counter = field(default_factory=Counter)
    roles: Counter = field(default_factory=Counter)
    features: set = field(default_factory=set)


def _fail(path: Path, line: int, msg: str) -> None:
    raise AssertionError(f"{path.name}:{line}: {msg}")


def check_session_file(path: Path, *, js_number=None) -> SessionSummary:
    data = path.read_bytes()
    if not data.endswith(b"\n"):
        _fail(path, 0, "file does not end with \\n")
    if b"\r" in data:
        _fail(path, 0, "CR found (Pi writes LF only)")
    lines = data.split(b"\n")[:-1]
    if not lines:
        _fail(path, 0, "empty file")
    objs = []
    for n, line in enumerate(lines):
        if not line:
            _fail(path, n, "blank line")
        try:
            obj = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            _fail(path, n, f"line is not UTF-8 JSON: {exc}")
        if not isinstance(obj, dict):
            _fail(path, n, "line is not a JSON object")
        # compact JSON.stringify form: re-encoding with floats kept verbatim gives the same bytes
        keep = json.loads(line, parse_float=lambda s: msgspec.Raw(s.encode()))
        if msgspec.json.encode(keep) != line:
            _fail(path, n, "line is not compact JSON.stringify output (spacing, escaping or key order)")
        if js_number is not None:
            for t in _float_tokens(line):
                if js_number(float(t)) != t:
                    _fail(path, n, f"number {t} is not formatted as JavaScript writes it")
        objs.append(obj)

    header = objs[0]
    keys = list(header)
    if keys not in (HEADER_KEYS, HEADER_KEYS + ["parentSession"]):
        _fail(path, 0, f"header keys {keys}")
    if header["type"] != "session" or header["version"] != 3:
        _fail(path, 0, "header is not a v3 session header")
    if not UUID7_RE.match(header["id"]):
        _fail(path, 0, f"session id {header['id']!r} is not UUIDv7-shaped")
    if not ISO_RE.match(header["timestamp"]) or not header["cwd"].startswith("/"):
        _fail(path, 0, "bad header timestamp/cwd")
    ms = _iso_ms(header["timestamp"])
    if int(header["id"].replace("-", "")[:12], 16) != ms:
        _fail(path, 0, "UUIDv7 time bits differ from the header timestamp")
    expected_name = header["timestamp"].replace(":", "-").replace(".", "-") + "_" + header["id"] + ".jsonl"
    if path.name != expected_name:
        _fail(path, 0, f"file name {path.name} != {expected_name}")

    entries = objs[1:]
    ids: dict[str, dict] = {}
    calls: dict[str, tuple[str, str]] = {}  # toolCallId -> (assistant entry id, name)
    parents: dict[str, str | None] = {}
    summary = SessionSummary(path, header, entries, "", [])
    last_ts = header["timestamp"]
    pending: list[str] = []  # tool calls awaiting results, in order
    for n, e in enumerate(entries, start=1):
        t = e.get("type")
        keys = list(e)
        if t == "custom":
            if keys not in (["type", "customType", "data", "id", "parentId", "timestamp"],):
                _fail(path, n, f"custom key order {keys}")
        elif t == "custom_message":
            if keys not in (
                ["type", "customType", "content", "display", "details", "id", "parentId", "timestamp"],
                ["type", "customType", "content", "display", "id", "parentId", "timestamp"],
            ):
                _fail(path, n, f"custom_message key order {keys}")
            if not isinstance(e["display"], bool):
                _fail(path, n, "custom_message.display is not a bool")
        elif t in PAYLOAD:
            req, opt = PAYLOAD[t]
            if not _match_order(keys, COMMON + req + ["?" + o for o in opt]):
                _fail(path, n, f"{t} key order {keys}")
        else:
            _fail(path, n, f"unexpected entry type {t!r}")
        eid, pid = e["id"], e["parentId"]
        if not isinstance(eid, str) or not ID_RE.match(eid):
            _fail(path, n, f"id {eid!r} is not 8 lowercase hex")
        if eid in ids:
            _fail(path, n, f"duplicate id {eid}")
        if n == 1:
            if pid is not None or t != "model_change":
                _fail(path, n, "first entry must be a model_change with parentId null")
        elif pid not in ids:
            _fail(path, n, f"parentId {pid!r} does not name an earlier entry")
        if not ISO_RE.match(e["timestamp"]) or e["timestamp"] < last_ts:
            _fail(path, n, f"timestamp {e['timestamp']} not ISO or earlier than the previous line")
        last_ts = e["timestamp"]
        ids[eid] = e
        parents[eid] = pid
        summary.types[t] += 1
        if pending and not (t == "message" and e["message"].get("role") == "toolResult"):
            _fail(path, n, f"tool calls {pending} have no results before this entry")
        if t == "message":
            _check_message(path, n, e, ids, calls, pending, summary)
        elif t == "compaction":
            fk = e["firstKeptEntryId"]
            anc = _ancestors(parents, pid)
            if fk != "" and fk not in anc:
                _fail(path, n, f"firstKeptEntryId {fk} is not on the compaction's path")
            if not isinstance(e["tokensBefore"], int) or e["tokensBefore"] <= 0:
                _fail(path, n, "tokensBefore must be a positive integer")
            if not isinstance(e.get("fromHook"), bool):
                _fail(path, n, "fromHook must be a bool")
            summary.features.add("compaction_hook" if e["fromHook"] else "compaction_pi")
            if e["fromHook"] and isinstance(e.get("details"), dict) and e["details"].get("compactor") == "fabric":
                summary.features.add("compaction_fabric_details")
            if "**Turn Context (split turn):**" in e["summary"]:
                summary.features.add("split_turn")
            if fk and _kept_range_has_compaction(ids, parents, fk, pid):
                summary.features.add("compaction_replay")
        elif t == "branch_summary":
            if e["fromId"] != pid:
                _fail(path, n, "branch_summary fromId must equal its parentId (the navigation target)")
            if not e.get("fromHook") and not e["summary"].startswith(BRANCH_PREFIX):
                _fail(path, n, "Pi branch summary without Pi's prefix")
            summary.features.add("branch_summary")
        elif t == "label":
            if e["targetId"] not in ids:
                _fail(path, n, "label targets an unknown entry")
            summary.features.add("label" if "label" in e else "label_clear")
        elif t == "custom_message":
            summary.features.add("custom_message")
        elif t == "session_info":
            summary.features.add("session_info")
        elif t == "model_change" and n > 1:
            summary.features.add("model_change_mid_session")
        # a new child of something other than the previous entry = /tree branch
        if n > 1 and pid != entries[n - 2]["id"]:
            summary.features.add("branch")
    if pending:
        _fail(path, len(entries), f"tool calls {pending} never got results")
    if not any(e["type"] == "message" and e["message"]["role"] == "assistant" for e in entries):
        _fail(path, 0, "no assistant message (Pi writes nothing before the first one)")
    leaf = entries[-1]["id"]
    walk = []
    cur: str | None = leaf
    seen = set()
    while cur is not None:
        if cur in seen:
            _fail(path, 0, "parent cycle")
        seen.add(cur)
        walk.append(cur)
        cur = parents[cur]
    walk.reverse()
    if walk[0] != entries[0]["id"]:
        _fail(path, 0, "active path does not start at the first entry")
    summary.leaf_id = leaf
    summary.active_path = walk
    text = data.decode("utf-8")
    if any(ord(c) > 0xFFFF for c in text):
        summary.features.add("astral")  # emoji
    if re.search("[\u3040-\u30ff\u4e00-\u9fff]", text):
        summary.features.add("cjk")
    if "\u0301" in text or "\u0303" in text:
        summary.features.add("combining")
    return summary


def _float_tokens(line: bytes) -> list[str]:
    """The non-integral number tokens of a JSON line, as written."""
    found: list[str] = []
    json.loads(line, parse_float=lambda s: found.append(s) or 0.0)
    return found


def _kept_range_has_compaction(ids: dict, parents: dict, first_kept: str, start) -> bool:
    """Is there a compaction entry on the path from `start` back to `first_kept` (inclusive)?"""
    cur = start
    while cur is not None:
        if ids[cur]["type"] == "compaction":
            return True
        if cur == first_kept:
            return False
        cur = parents.get(cur)
    return False


def _ancestors(parents: dict, start) -> set:
    out = set()
    cur = start
    while cur is not None and cur not in out:
        out.add(cur)
        cur = parents.get(cur)
    return out


def _iso_ms(ts: str) -> int:
    import datetime as dt

    d = dt.datetime.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.UTC)
    return int(d.timestamp()) * 1000 + int(ts[20:23])


def _check_message(path, n, e, ids, calls, pending, summary) -> None:
    m = e["message"]
    role = m.get("role")
    keys = list(m)
    summary.roles[role] += 1
    if role == "assistant":
        tail = keys[len(ASSISTANT_KEYS) :]
        if keys[: len(ASSISTANT_KEYS)] != ASSISTANT_KEYS or tail not in (["responseId"], ["errorMessage"]):
            _fail(path, n, f"assistant key order {keys}")
        u = m["usage"]
        if not _match_order(list(u), USAGE_KEYS) or list(u["cost"]) != COST_KEYS:
            _fail(path, n, f"usage key order {list(u)}")
        if u["totalTokens"] != u["input"] + u["output"] + u["cacheRead"] + u["cacheWrite"]:
            _fail(path, n, "totalTokens != input+output+cacheRead+cacheWrite")
        if m["stopReason"] == "error":
            if m["content"] != [] or u["totalTokens"] != 0 or not m.get("errorMessage"):
                _fail(path, n, "error message must have empty content, zero usage and errorMessage")
            summary.features.add("provider_error")
        has_calls = False
        for part in m["content"]:
            pt = part.get("type")
            if pt == "toolCall":
                if list(part) != ["type", "id", "name", "arguments"] or not isinstance(part["arguments"], dict):
                    _fail(path, n, "toolCall shape")
                if part["id"] in calls:
                    _fail(path, n, f"duplicate toolCall id {part['id']}")
                calls[part["id"]] = (e["id"], part["name"])
                pending.append(part["id"])
                has_calls = True
                summary.features.add("tool_" + part["name"])
            elif pt == "thinking":
                if list(part) != ["type", "thinking", "thinkingSignature"]:
                    _fail(path, n, "thinking part shape")
            elif pt == "text":
                if list(part) != ["type", "text"]:
                    _fail(path, n, "text part shape")
            else:
                _fail(path, n, f"unexpected assistant part {pt}")
        if has_calls != (m["stopReason"] == "toolUse"):
            _fail(path, n, "stopReason toolUse iff the message has tool calls")
    elif role in MESSAGE_KEYS:
        if not _match_order(keys, MESSAGE_KEYS[role]):
            _fail(path, n, f"{role} key order {keys}")
        if role == "user":
            for part in m["content"]:
                if part["type"] == "image":
                    if list(part) != ["type", "data", "mimeType"]:
                        _fail(path, n, "image part shape")
                    summary.features.add("image")
        elif role == "toolResult":
            if not pending or pending[0] != m["toolCallId"]:
                _fail(path, n, f"toolResult {m['toolCallId']} does not answer the next pending call {pending[:1]}")
            pending.pop(0)
            if calls[m["toolCallId"]][1] != m["toolName"]:
                _fail(path, n, "toolName differs from the call's name")
            if m["isError"]:
                if m.get("details") != {} and m["toolName"] != "fabric_exec":
                    _fail(path, n, "failed tool result must carry details {}")
                summary.features.add("tool_error")
            d = m.get("details") or {}
            if "truncation" in d:
                tr = d["truncation"]
                if not m["content"][0]["text"].startswith(tr["content"]):
                    _fail(path, n, "truncation.content must duplicate the kept output")
                if tr["outputLines"] > tr["maxLines"] or tr["outputBytes"] > tr["maxBytes"]:
                    _fail(path, n, "truncated output exceeds Pi's limits")
                summary.features.add("truncation_" + m["toolName"])
            if m["toolName"] == "edit" and not m["isError"]:
                if list(d) != ["diff", "patch", "firstChangedLine"]:
                    _fail(path, n, "edit details shape")
            if m["toolName"] == "fabric_exec" and "trace" in d:
                summary.features.add("fabric_trace")
        else:
            summary.features.add("bash_execution_excluded" if m.get("excludeFromContext") else "bash_execution")
    else:
        _fail(path, n, f"unexpected message role {role!r}")
