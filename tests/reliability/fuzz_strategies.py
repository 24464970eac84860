"""Hypothesis strategies for hostile session files, Pi-shaped entries, typed compaction
instructions and wire params (shared by tests/reliability and bench/reliability)."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import strategies as st

THINKING_SECRET = "zqthinkingsecret7741"
OUTPUT_SECRET = "zqoutputsecret9923"

# ---------------------------------------------------------------- JSON values

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=24)
)
json_values = st.recursive(
    scalars,
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=10), c, max_size=4),
    max_leaves=14,
)

ids = st.sampled_from(["a1", "b2", "c3", "d4", "e5", "f6", "07", "dup"])
maybe_id = ids | st.none() | json_values
timestamps = (
    st.sampled_from(["2026-10-29T00:00:07.404Z", "2026-13-45T99:99:99Z", "", "yesterday", "1970-01-01T00:00:00.000Z"])
    | st.integers(-(2**60), 2**60)
    | st.floats()
    | json_values
)
ENTRY_TYPES = [
    "message",
    "compaction",
    "branch_summary",
    "custom_message",
    "model_change",
    "thinking_level_change",
    "custom",
    "label",
    "session_info",
    "session",
    "weird",
]
ROLES = [
    "user",
    "assistant",
    "toolResult",
    "bashExecution",
    "custom",
    "compactionSummary",
    "branchSummary",
    "system",
    None,
    7,
]
OUTCOMES = ["succeeded", "failed", "aborted", "timed_out", "bogus"]


@st.composite
def content_parts(draw: Any, role: Any) -> Any:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.text(max_size=60))
    if kind == 1:
        return draw(json_values)
    parts = []
    for _ in range(draw(st.integers(0, 4))):
        pk = draw(st.sampled_from(["text", "thinking", "toolCall", "image", "junk"]))
        if pk == "text":
            text = draw(st.text(max_size=80))
            if role == "toolResult" and draw(st.booleans()):
                text += " " + OUTPUT_SECRET
            parts.append({"type": "text", "text": text})
        elif pk == "thinking":
            parts.append({"type": "thinking", "thinking": draw(st.text(max_size=40)) + " " + THINKING_SECRET})
        elif pk == "toolCall":
            parts.append(
                {
                    "type": "toolCall",
                    "id": draw(st.text(max_size=6)),
                    "name": draw(st.text(max_size=8) | json_values),
                    "arguments": draw(
                        st.dictionaries(
                            st.sampled_from(["path", "file", "files", "command", "x"]),
                            st.text(max_size=20) | json_values,
                            max_size=3,
                        )
                        | json_values
                    ),
                }
            )
        elif pk == "image":
            parts.append({"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"})
        else:
            parts.append(draw(json_values))
    return parts


@st.composite
def fabric_trace(draw: Any) -> dict:
    ops = []
    for seq in range(draw(st.integers(0, 3))):
        op: dict[str, Any] = {
            "type": "call",
            "sequence": seq,
            "ref": draw(st.sampled_from(["pi.read", "pi.bash", "x.y", "weird"])),
            "args": draw(st.dictionaries(st.sampled_from(["path", "command"]), st.text(max_size=12), max_size=2)),
            "outcome": draw(st.sampled_from(OUTCOMES[:4])),
        }
        if draw(st.booleans()):
            op["result"] = {"stdout": draw(st.text(max_size=20)) + " " + OUTPUT_SECRET}
        ops.append(op)
    trace = {
        "kind": "pi-fabric.execution",
        "version": 1,
        "outcome": draw(st.sampled_from(OUTCOMES)),
        "phases": ["run"],
        "operations": ops,
        "counts": {"droppedValues": 0, "truncatedValues": 0, "redactedValues": 0, "droppedOperations": 0},
    }
    if draw(st.integers(0, 4)) == 0:  # break it a little
        key = draw(st.sampled_from(sorted(trace)))
        trace[key] = draw(json_values)
    return {"trace": trace}


@st.composite
def pi_entries(draw: Any) -> dict:
    etype = draw(st.sampled_from(ENTRY_TYPES) | json_values)
    entry: dict[str, Any] = {"type": etype}
    if draw(st.integers(0, 9)):
        entry["id"] = draw(ids) if draw(st.integers(0, 5)) else draw(json_values)
    if draw(st.integers(0, 9)):
        entry["parentId"] = draw(maybe_id)
    if draw(st.booleans()):
        entry["timestamp"] = draw(timestamps)
    if etype == "message" and draw(st.integers(0, 9)):
        role = draw(st.sampled_from(ROLES))
        msg: dict[str, Any] = {} if role is None else {"role": role}
        if role == "bashExecution":
            msg.update(
                command=draw(st.text(max_size=20)),
                output=draw(st.text(max_size=30)) + " " + OUTPUT_SECRET,
                exitCode=draw(st.integers(-2, 300) | json_values),
            )
        else:
            msg["content"] = draw(content_parts(role))
        if role == "toolResult":
            msg["toolName"] = draw(st.sampled_from(["bash", "read", "fabric_exec"]) | json_values)
            msg["isError"] = draw(json_values)
            if draw(st.booleans()):
                msg["details"] = draw(fabric_trace())
        if draw(st.booleans()):
            msg["timestamp"] = draw(timestamps)
        entry["message"] = msg if draw(st.integers(0, 9)) else draw(json_values)
    elif etype == "compaction":
        entry.update(
            summary=draw(st.text(max_size=40) | json_values),
            firstKeptEntryId=draw(maybe_id),
            tokensBefore=draw(st.integers(0, 10**6) | json_values),
        )
    elif etype == "branch_summary":
        entry.update(summary=draw(st.text(max_size=40)), fromId=draw(maybe_id))
        if draw(st.booleans()):
            entry["details"] = draw(json_values)
    elif etype == "custom_message":
        entry.update(
            customType=draw(st.text(max_size=8) | json_values),
            content=draw(content_parts("custom")),
            display=draw(st.booleans()),
        )
    elif etype == "session":
        entry.update(version=3, cwd=draw(st.text(max_size=10)))
    for _ in range(draw(st.integers(0, 2))):
        entry[draw(st.text(max_size=6))] = draw(json_values)
    return entry


def dump(value: Any, ascii_only: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":")).encode("utf-8", "surrogatepass")


@st.composite
def session_lines(draw: Any, max_line_bytes: int) -> bytes:
    """One line's bytes (no newline) of a hostile session file."""
    kind = draw(st.integers(0, 19))
    ascii_only = draw(st.booleans())
    if kind <= 8:
        return dump(draw(pi_entries()), ascii_only)
    if kind == 9:
        return dump(draw(json_values), ascii_only)
    if kind == 10:
        return draw(st.binary(max_size=40)).replace(b"\n", b" ")
    if kind == 11:
        return draw(st.sampled_from([b"", b" ", b"\t", b"\r", b"  \x0b\x0c ", "\u00a0".encode()]))
    if kind == 12:
        return draw(
            st.sampled_from(
                [
                    b'{"type":"message","id":"nan","parentId":null,"n":NaN}',
                    b"Infinity",
                    b"[-Infinity]",
                    b'{"a":1}{"b":2}',
                    b'{"a":',
                    b"nul",
                    b"\xff\xfe{}",
                    b'{"type":"message","id":"x\\ud800","parentId":null}',
                    b'"\\u12"',
                ]
            )
        )
    if kind == 13:
        full = dump(draw(pi_entries()), ascii_only)
        return full[: draw(st.integers(0, max(0, len(full) - 1)))].replace(b"\n", b" ")
    if kind == 14:
        return (
            b'{"type":"custom","id":"big","parentId":null,"data":"'
            + b"x" * draw(st.integers(max_line_bytes - 40, max_line_bytes + 64))
            + b'"}'
        )
    if kind == 15:
        depth = draw(st.integers(1, 40))
        return b"[" * depth + b"]" * depth
    if kind == 16:
        return dump(draw(pi_entries()), ascii_only) + b"\r"
    if kind == 17:
        return dump(draw(json_values), ascii_only).replace(b"\n", b" ") + b"  "
    return dump({"type": "session", "id": draw(st.text(max_size=6) | json_values), "cwd": "/w"}, ascii_only)


@st.composite
def session_files(draw: Any, max_line_bytes: int = 512) -> bytes:
    lines = []
    if draw(st.integers(0, 4)):
        lines.append(
            dump(
                {
                    "type": "session",
                    "version": 3,
                    "id": draw(st.sampled_from(["sess-1", "x"])),
                    "timestamp": "2026-10-29T00:00:07.404Z",
                    "cwd": "/home/user/projects/orbit",
                },
                True,
            )
        )
    lines.extend(draw(st.lists(session_lines(max_line_bytes), max_size=14)))
    data = b"\n".join(lines)
    if lines and draw(st.integers(0, 4)):
        data += b"\n"
    return data


# ---------------------------------------------------------------- typed instructions

TYPED_PREFIX = "__pi_fabric_compact_request_v1__:"
short_texts = st.text(max_size=40) | st.text(
    alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=3
)


@st.composite
def typed_payloads(draw: Any) -> str:
    kind = draw(st.integers(0, 6))
    if kind == 0:
        obj: Any = {"version": draw(st.sampled_from([1, 1.0, 2, "1", True, None]))}
        if draw(st.booleans()):
            obj["instructions"] = draw(short_texts | json_values)
        if draw(st.booleans()):
            obj["preserve"] = draw(st.lists(short_texts, max_size=18) | json_values)
        if draw(st.integers(0, 5)) == 0:
            obj[draw(st.text(max_size=6))] = draw(json_values)
        body = json.dumps(obj, ensure_ascii=draw(st.booleans()))
    elif kind == 1:
        body = json.dumps(draw(json_values))
    elif kind == 2:
        body = draw(st.text(max_size=60))
    elif kind == 3:
        depth = draw(st.integers(1, 60))
        body = '{"version":1,"x":' + "[" * depth + "]" * depth + "}"
    elif kind == 4:
        body = '{"version":1,"preserve":[' + ",".join(['"p"'] * draw(st.integers(0, 5000))) + "]}"
    elif kind == 5:
        body = '{"version":1,"version":1}'
    else:
        good = json.dumps({"version": 1, "instructions": draw(st.text(max_size=30)), "preserve": ["a", "b"]})
        pos = draw(st.integers(0, len(good)))
        body = good[:pos] + draw(st.text(max_size=3)) + good[pos + draw(st.integers(0, 3)) :]
    return TYPED_PREFIX + body


def finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(finite(v) for v in value)
    if isinstance(value, dict):
        return all(finite(v) for v in value.values())
    return True


# ---------------------------------------------------------------- wire params

PARAM_KEYS = [
    "session",
    "query",
    "queryMode",
    "scope",
    "branches",
    "page",
    "pageSize",
    "cwd",
    "indices",
    "entryIds",
    "operationAddresses",
    "entryRange",
    "expectedSourceHash",
    "expectedLineageFingerprint",
    "instructions",
    "preserve",
    "reason",
    "contextWindow",
    "reserveTokens",
    "keepRecentTokens",
    "targetContextRatio",
    "tokensBefore",
    "leafId",
    "includeQa",
    "targetId",
    "fromId",
    "replaceInstructions",
    "requestedBy",
    "workDoneToken",
    "bogus",
]


def param_values(key: str) -> Any:
    typical = {
        "query": st.text(max_size=12) | st.sampled_from(["test", "(a|b)+", "[", "read"]),
        "queryMode": st.sampled_from(["literal", "regex", "fuzzy"]),
        "scope": st.sampled_from(
            ["session", "project", "global", "session:", "session:x", "session:/nope.jsonl", "all"]
        ),
        "branches": st.sampled_from(["active", "all", "some"]),
        "page": st.integers(-2, 5),
        "pageSize": st.integers(-1, 300),
        "indices": st.lists(st.integers(-3, 400), max_size=4),
        "entryIds": st.lists(st.text(max_size=8), max_size=3),
        "entryRange": st.fixed_dictionaries({"first": st.integers(-1, 50), "last": st.integers(-1, 50)}),
        "targetContextRatio": st.floats(0, 1),
        "includeQa": st.booleans(),
    }
    strategy = typical.get(key, st.text(max_size=10))
    return strategy | json_values


@st.composite
def wire_params(draw: Any) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(json_values)
    keys = draw(st.lists(st.sampled_from(PARAM_KEYS), max_size=5, unique=True))
    return {k: draw(param_values(k)) for k in keys}


# ---------------------------------------------------------------- valid chains with hostile lines


@st.composite
def pi_chain_sessions(draw: Any) -> bytes:
    """A real conversation chain (user / assistant / tool result, ids and parents right,
    texts up to a few thousand chars) with hostile lines sprinkled in: previews of these
    really compact, and memory really indexes them."""
    lines = [
        dump(
            {
                "type": "session",
                "version": 3,
                "id": "sess-chain",
                "timestamp": "2026-10-29T00:00:07.404Z",
                "cwd": "/home/user/projects/orbit",
            },
            True,
        )
    ]
    parent = None
    for i in range(draw(st.integers(2, 24))):
        eid = f"c{i:07x}"
        role = (
            ["user", "assistant", "toolResult"][i % 3] if draw(st.integers(0, 5)) else draw(st.sampled_from(ROLES[:4]))
        )
        text = draw(st.text(max_size=30)) + " word" * draw(st.integers(0, 600))
        if role == "user":
            msg: dict[str, Any] = {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": i}
        elif role == "assistant":
            msg = {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": THINKING_SECRET}, {"type": "text", "text": text}],
                "stopReason": draw(st.sampled_from(["stop", "toolUse", "error", "aborted"])),
                "timestamp": i,
                "usage": {
                    "input": draw(st.integers(0, 10**6)),
                    "output": 10,
                    "cacheRead": 0,
                    "cacheWrite": 0,
                    "totalTokens": 100,
                },
            }
        elif role == "toolResult":
            msg = {
                "role": "toolResult",
                "toolCallId": f"call{i}",
                "toolName": "bash",
                "content": [{"type": "text", "text": text + " " + OUTPUT_SECRET}],
                "isError": False,
                "timestamp": i,
            }
        else:
            msg = {
                "role": "bashExecution",
                "command": "ls",
                "output": text + " " + OUTPUT_SECRET,
                "exitCode": 0,
                "timestamp": i,
            }
        lines.append(
            dump(
                {
                    "type": "message",
                    "id": eid,
                    "parentId": parent,
                    "timestamp": "2026-10-29T00:00:08.000Z",
                    "message": msg,
                },
                draw(st.booleans()),
            )
        )
        parent = eid
        if draw(st.integers(0, 4)) == 0:
            lines.append(draw(session_lines(512)))
    return b"\n".join(lines) + b"\n"


# ---------------------------------------------------------------- mostly valid wire params


@st.composite
def wire_params_for(draw: Any, method: str) -> Any:
    """Params that mostly pass the strict decoder (so the engine behind it is exercised),
    sometimes with one field replaced by junk."""
    page = {"page": draw(st.integers(1, 3)), "pageSize": draw(st.integers(1, 100))}
    if method == "fabric/recall":
        p: dict[str, Any] = {
            "query": draw(
                st.sampled_from(["test", "read", "fix", "(a|b)+", "[", "é🚀", "", " "]) | st.text(max_size=12)
            ),
            "queryMode": draw(st.sampled_from(["literal", "regex"])),
            "scope": draw(st.sampled_from(["session", "project", "global"])),
            "branches": draw(st.sampled_from(["active", "all"])),
            **page,
        }
    elif method == "fabric/expand":
        sel = draw(st.sampled_from(["indices", "entryIds", "operationAddresses", "entryRange"]))
        value = {
            "indices": st.lists(st.integers(0, 120), min_size=1, max_size=4),
            "entryIds": st.lists(
                st.sampled_from(["3065bcc6", "aa4e0316", "5085a7b8", "nope"]) | st.text(min_size=1, max_size=8),
                min_size=1,
                max_size=3,
            ),
            "operationAddresses": st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=2),
            "entryRange": st.integers(0, 80).flatmap(
                lambda a: st.fixed_dictionaries({"first": st.just(a), "last": st.integers(a, a + 40)})
            ),
        }[sel]
        p = {"session": "placeholder", sel: draw(value), "branches": draw(st.sampled_from(["active", "all"]))}
    else:
        p = {
            "scope": draw(st.sampled_from(["session", "project", "global"])),
            "page": page["page"],
            "pageSize": draw(st.integers(1, 200)),
        }
    if draw(st.integers(0, 3)) == 0:
        p[draw(st.sampled_from(sorted(p) + ["bogus"]))] = draw(json_values)
    return p
