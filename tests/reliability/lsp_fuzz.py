"""Random JSON-RPC traffic for the malformed-LSP tests and bench/reliability/lsp_fuzz.py.

Seeded (`random.Random`) so a failing message can be regenerated from (seed, index).
Framing (Content-Length) is always right: LSP has no way to resynchronise a stream
whose framing is broken, so hostility lives in the bodies.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

from reliability_kit import frame

FABRIC_METHODS = [
    "fabric/sessions",
    "fabric/recall",
    "fabric/expand",
    "fabric/compactionPreview",
    "fabric/branchSummaryPreview",
    "fabric/compact/status",
    "fabric/compact/cancel",
    "fabric/compact/request",
]
COMMANDS = [
    "fabric.recall",
    "fabric.expand",
    "fabric.compactionPreview",
    "fabric.branchSummaryPreview",
    "fabric.compact.status",
    "fabric.compact.cancel",
    "fabric.sessions",
    "fabric.reload",
    "nope",
    7,
]
STANDARD_REQUESTS = [
    "textDocument/hover",
    "textDocument/definition",
    "workspace/symbol",
    "textDocument/documentSymbol",
    "textDocument/completion",
]
NOTIFICATIONS = [
    "textDocument/didOpen",
    "textDocument/didChange",
    "textDocument/didClose",
    "workspace/didChangeWatchedFiles",
    "workspace/didChangeConfiguration",
    "$/cancelRequest",
    "$/setTrace",
    "fabric/unknownNotification",
]
KEYS = [
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
    "instructions",
    "preserve",
    "reason",
    "contextWindow",
    "keepRecentTokens",
    "targetContextRatio",
    "leafId",
    "includeQa",
    "targetId",
    "fromId",
    "requestedBy",
    "workDoneToken",
    "textDocument",
    "position",
    "command",
    "arguments",
    "settings",
    "changes",
    "id",
    "bogus",
]
WORDS = [
    "test",
    "read",
    "(a|b)+",
    "[",
    "session",
    "global",
    "active",
    "all",
    "regex",
    "literal",
    "",
    " ",
    "pi-entry:x/y",
    "../../etc/passwd",
    "\u0000",
    "\ud800",
    "é",
    "🚀",
    "a" * 300,
]


def rand_value(rng: random.Random, files: list[str], depth: int = 0) -> Any:
    r = rng.random()
    if depth > 3 or r < 0.45:
        return rng.choice(
            [
                None,
                True,
                False,
                0,
                -1,
                1,
                2**31,
                2**53 + 1,
                10**30,
                -0.5,
                1e308,
                3.14,
                rng.choice(WORDS),
                rng.choice(files) if files else "x",
                "file://" + (rng.choice(files) if files else "/x"),
                "session:" + (rng.choice(files) if files else "x"),
                rng.randint(-5, 500),
            ]
        )
    if r < 0.7:
        return [rand_value(rng, files, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(KEYS): rand_value(rng, files, depth + 1) for _ in range(rng.randint(0, 4))}


def valid_params(rng: random.Random, method: str, files: list[str]) -> dict:
    f = rng.choice(files)
    base = {
        "fabric/sessions": {"scope": rng.choice(["global", "project", "session"])},
        "fabric/recall": {
            "query": rng.choice(["test", "read", "fix", "(a|b)+c"]),
            "scope": rng.choice(["global", "project"]),
            "queryMode": rng.choice(["literal", "regex"]),
        },
        "fabric/expand": {"session": f, "indices": [0]},
        "fabric/compactionPreview": {"session": f},
        "fabric/branchSummaryPreview": {"session": f, "targetId": "nope"},
        "fabric/compact/status": {"session": f},
        "fabric/compact/cancel": {"session": f},
        "fabric/compact/request": {"session": "not-a-session-" + str(rng.randint(0, 9))},
    }[method]
    return dict(base)


def mutate(rng: random.Random, params: dict, files: list[str]) -> Any:
    p = dict(params)
    for _ in range(rng.randint(1, 3)):
        op = rng.random()
        if op < 0.35 and p:
            p[rng.choice(sorted(p))] = rand_value(rng, files)
        elif op < 0.6:
            p[rng.choice(KEYS)] = rand_value(rng, files)
        elif op < 0.75 and p:
            p.pop(rng.choice(sorted(p)))
        elif op < 0.85:
            return rand_value(rng, files)
    return p


def message(rng: random.Random, files: list[str], msg_id: str) -> tuple[str, bytes, str | None]:
    """(category, framed bytes, id we expect an answer for, or None)."""
    r = rng.random()
    if r < 0.55:  # our methods, valid or mutated params
        method = rng.choice(FABRIC_METHODS)
        params = valid_params(rng, method, files)
        if method == "fabric/compact/request" or rng.random() < 0.8:
            params = mutate(rng, params, files)
            if method == "fabric/compact/request" and isinstance(params, dict) and "session" in params:
                params["session"] = "not-a-session"  # never commit into the shared copy
        body = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
        return "fabric", frame(body), msg_id
    if r < 0.68:
        cmd = rng.choice(COMMANDS)
        args = rand_value(rng, files) if rng.random() < 0.5 else [rand_value(rng, files)]
        if cmd == "fabric.compact.request":
            args = []
        params = {"command": cmd, "arguments": args} if rng.random() < 0.9 else rand_value(rng, files)
        body = {"jsonrpc": "2.0", "id": msg_id, "method": "workspace/executeCommand", "params": params}
        # params that are not ExecuteCommandParams at all fail lsprotocol's structuring
        envelope_ok = (
            isinstance(params, dict)
            and isinstance(params.get("command"), str)
            and isinstance(params.get("arguments"), list)
        )
        return ("executeCommand" if envelope_ok else "standard"), frame(body), msg_id
    if r < 0.78:
        method = rng.choice(STANDARD_REQUESTS)
        body = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": rand_value(rng, files)}
        return "standard", frame(body), msg_id
    if r < 0.88:
        method = rng.choice(NOTIFICATIONS)
        body = {"jsonrpc": "2.0", "method": method, "params": rand_value(rng, files)}
        return "notification", frame(body), None
    if r < 0.92:
        body = {"jsonrpc": "2.0", "id": msg_id, "method": "unknown/" + rng.choice(WORDS[:6]), "params": {}}
        return "unknown_method", frame(body), msg_id
    if r < 0.95:  # a response to a request the server never sent
        body = {
            "jsonrpc": "2.0",
            "id": rng.randint(10**6, 10**7),
            rng.choice(["result", "error"]): rand_value(rng, files),
        }
        return "stray_response", frame(body), None
    if r < 0.98:  # not JSON, or JSON that is not a message
        raw = rng.choice(
            [
                b"{",
                b'{"jsonrpc":"2.0","id":',
                b"\xff\xfe",
                b"[]",
                b"null",
                b"42",
                b'"str"',
                json.dumps([{"jsonrpc": "2.0", "method": "x"}]).encode(),
            ]
        )
        return "not_a_message", b"Content-Length: %d\r\n\r\n" % len(raw) + raw, None
    # an envelope that is not JSON-RPC 2.0 (answered -32600)
    body = rng.choice(
        [
            {"id": msg_id, "method": "fabric/sessions", "params": {}},
            {"jsonrpc": "1.0", "id": msg_id, "method": "fabric/sessions"},
        ]
    )
    return "bad_envelope", frame(body), msg_id


def traffic(seed: int, n: int, files: list[str]) -> Iterator[tuple[int, str, bytes, str | None]]:
    rng = random.Random(seed)
    for i in range(n):
        cat, data, msg_id = message(rng, files, f"fz-{seed}-{i}")
        yield i, cat, data, msg_id
