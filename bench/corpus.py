#!/usr/bin/env python3
"""Deterministic generator of realistic Pi agent dirs (session JSONL, format v3).

Everything comes from the seed: one ``random.Random`` per session, synthetic increasing
timestamps, no clock, no global random state. The same arguments give byte-identical files.

The files copy the *shape* of what Pi 0.80 writes (see tests/fixtures/real-sessions):
compact ``JSON.stringify`` lines (raw UTF-8, JS number formatting), Pi's key order, 8-hex
entry ids, UUIDv7 session ids, ``<agentDir>/sessions/<encoded cwd>/<ts>_<id>.jsonl``.
Conversations are coding tasks over a small in-memory project model, so a ``read`` shows the
file as it is at that point, an ``edit`` replaces text that really is in the file, ``grep``
returns lines that exist, and test runs name real functions.

Usage::

    python bench/corpus.py --out DIR [--sessions N] [--target-bytes B] [--seed S]
    python bench/corpus.py --example --out fabric_lsp/examples/agent
    python bench/corpus.py --single CWD --tiny --target-bytes B --out DIR   # many ~100-byte entries

Importable: ``generate_agent_dir``, ``generate_session``, ``generate_tiny_session``,
``generate_example_agent_dir``.
"""

from __future__ import annotations

import argparse
import base64
import datetime as _dt
import difflib
import math
import os
import struct
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any

import msgspec

__all__ = [
    "generate_agent_dir",
    "generate_session",
    "generate_tiny_session",
    "generate_example_agent_dir",
    "encode_cwd",
    "js_number",
    "EXAMPLE_SEED",
]

EXAMPLE_SEED = 20261130
_ENCODER = msgspec.json.Encoder()
_EPOCH_2026 = 1767225600000  # 2026-01-01T00:00:00Z in ms

# --------------------------------------------------------------------------- serialization


def js_number(x: float | int) -> str:
    """Format a number as JavaScript's ``Number.prototype.toString`` does (finite values)."""
    if isinstance(x, bool):
        raise TypeError("bool is not a number")
    if isinstance(x, int):
        return str(x)
    if x != x or x in (math.inf, -math.inf):
        raise ValueError("non-finite number")
    if x == 0:
        return "0"
    r = repr(abs(x))
    sign = "-" if x < 0 else ""
    if "e" in r:
        mant, exp_s = r.split("e")
        exp = int(exp_s)
    else:
        mant, exp = r, 0
    if "." in mant:
        ip, fp = mant.split(".")
    else:
        ip, fp = mant, ""
    digits = (ip + fp).lstrip("0")
    # decimal exponent n such that value = 0.d1d2... * 10^n
    n = len(ip) + exp if ip != "0" else exp - (len(fp) - len(fp.lstrip("0")))
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    es = f"e+{e}" if e >= 0 else f"e-{-e}"
    if k == 1:
        return sign + digits + es
    return sign + digits[0] + "." + digits[1:] + es


def _raw_num(x: float | int) -> msgspec.Raw:
    return msgspec.Raw(js_number(x).encode())


def encode_line(obj: dict) -> bytes:
    """One JSONL line as Pi writes it: ``JSON.stringify(entry) + "\\n"`` (raw UTF-8)."""
    return _ENCODER.encode(obj) + b"\n"


def iso(ms: int) -> str:
    d = _dt.datetime.fromtimestamp(ms // 1000, _dt.UTC)
    return d.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


def encode_cwd(cwd: str) -> str:
    """Pi's per-cwd session folder name: drop one leading separator, map / \\ : to -, wrap in --."""
    s = cwd
    if s[:1] in ("/", "\\"):
        s = s[1:]
    return "--" + s.replace("/", "-").replace("\\", "-").replace(":", "-") + "--"


def uuid7(ms: int, rng: Random) -> str:
    """A UUIDv7-shaped id: 48-bit ms timestamp, version 7, variant 10, bits from ``rng``."""
    rand_a = rng.getrandbits(12)
    rand_b = rng.getrandbits(62)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _zlib_stored(data: bytes) -> bytes:
    """A zlib stream of stored (uncompressed) deflate blocks: byte-identical on every zlib build."""
    out = bytearray(b"\x78\x01")
    for i in range(0, max(len(data), 1), 65535):
        block = data[i : i + 65535]
        final = 1 if i + 65535 >= len(data) else 0
        out += bytes([final]) + struct.pack("<HH", len(block), 0xFFFF ^ len(block)) + block
    return bytes(out) + struct.pack(">I", zlib.adler32(data))


def tiny_png(rng: Random, size: int = 8) -> str:
    """A valid tiny PNG (solid colour with a stripe) as base64."""
    r, g, b = rng.randrange(256), rng.randrange(256), rng.randrange(256)
    rows = []
    for y in range(size):
        row = bytearray([0])
        for x in range(size):
            row += bytes((255 - r, 255 - g, 255 - b)) if x == y else bytes((r, g, b))
        rows.append(bytes(row))
    raw = _zlib_stored(b"".join(rows))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", raw)
        + chunk(b"IEND", b"")
    )
    return base64.b64encode(png).decode()


def _first_line(text: str, limit: int = 80) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def _tokens(chars: int) -> int:
    return (chars + 3) // 4


# --------------------------------------------------------------------------- vocabulary

_UNICODE_BITS = [
    "naïve",
    "café",
    "résumé",
    "Zürich",
    "São Paulo",
    "façade",
    "e\u0301tat",
    "n\u0303",
    "日本語",
    "中文注释",
    "한국어",
    "Ünïcödé",
    "über",
    "Ελληνικά",
    "кириллица",
    "🚀",
    "✅",
    "🙈",
    "🐛",
    "⚠️",
    "👍🏽",
    "€",
    "¥",
    "円",
    "±",
    "→",
    "—",
    "…",
    "µs",
    "°C",
    "\u00a0NBSP",
]

_ERROR_MESSAGES = [
    '429 {"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 80,000 input tokens per minute."}}',
    '529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
    '400: {"message":"Invalid request: context too long for model","type":"server_error"}',
    '500 {"type":"error","error":{"type":"api_error","message":"Internal server error"}}',
    "terminated",
    "fetch failed",
]


@dataclass(frozen=True)
class ModelSpec:
    provider: str
    api: str
    model: str
    call_style: str  # "call" | "toolu"
    thinking_sig: str  # "reasoning_content" | "anthropic" | "responses"
    price_in: float  # $ per token
    price_out: float
    price_cache_read: float
    price_cache_write: float
    window: int


MODELS = [
    ModelSpec(
        "anthropic", "anthropic-messages", "claude-sonnet-4-5", "toolu", "anthropic", 3e-6, 15e-6, 3e-7, 3.75e-6, 200000
    ),
    ModelSpec("openai", "openai-responses", "gpt-5.1-codex", "call", "responses", 1.25e-6, 10e-6, 1.25e-7, 0.0, 272000),
    ModelSpec(
        "openrouter",
        "openai-completions",
        "qwen/qwen3-coder",
        "call",
        "reasoning_content",
        2.2e-7,
        9.5e-7,
        0.0,
        0.0,
        262144,
    ),
    ModelSpec(
        "anthropic", "anthropic-messages", "claude-haiku-4-5", "toolu", "anthropic", 1e-6, 5e-6, 1e-7, 1.25e-6, 200000
    ),
]

THINKING_LEVELS = ["off", "minimal", "low", "medium", "high", "xhigh"]


@dataclass
class ProjectSpec:
    name: str
    lang: str  # "py" | "ts"
    package: str
    modules: list[str]
    nouns: list[str]
    verbs: list[str]
    errors: list[str]
    goals: list[str]
    extra_files: dict[str, str] = field(default_factory=dict)


ORBIT = ProjectSpec(
    name="orbit",
    lang="py",
    package="orbit",
    modules=["tle", "propagate", "frames", "ephemeris", "passes"],
    nouns=[
        "epoch",
        "satellite",
        "perigee",
        "apogee",
        "inclination",
        "anomaly",
        "ephemeris",
        "frame",
        "drag_term",
        "mean_motion",
        "eccentricity",
        "ground_track",
        "pass_window",
        "elevation",
        "azimuth",
        "tle_line",
        "checksum",
        "julian_date",
    ],
    verbs=[
        "parse",
        "compute",
        "propagate",
        "convert",
        "validate",
        "normalize",
        "load",
        "predict",
        "interpolate",
        "resolve",
    ],
    errors=[
        "ValueError: day is out of range for month",
        "AssertionError: assert 0.9999 == 1.0",
        "KeyError: 'mean_motion'",
        "ZeroDivisionError: float division by zero",
        "TypeError: unsupported operand type(s) for -: 'datetime.datetime' and 'NoneType'",
        "orbit.tle.ChecksumError: checksum mismatch on line 2 (expected 7, got 3)",
        "IndexError: list index out of range",
    ],
    goals=[
        "Fix the TLE epoch parsing for leap years",
        "Make pass prediction robust when the satellite never rises",
        "Speed up the SGP4 propagation loop",
        "Add ECEF to geodetic conversion with tests",
        "Clean up the ephemeris interpolation API",
    ],
    extra_files={
        "README.md": "# orbit\n\nTiny satellite-tracking helpers: TLE parsing, SGP4-ish propagation,\nframe conversions and pass prediction.\n\nRun the tests with `pytest -q`.\n",
        "pyproject.toml": '[project]\nname = "orbit"\nversion = "0.4.2"\nrequires-python = ">=3.11"\ndependencies = ["numpy>=1.26"]\n',
    },
)

LEDGER = ProjectSpec(
    name="ledger",
    lang="ts",
    package="src",
    modules=["ledger", "accounts", "currency", "journal", "reconcile"],
    nouns=[
        "account",
        "balance",
        "journal",
        "posting",
        "currency",
        "invoice",
        "settlement",
        "fxRate",
        "entry",
        "statement",
        "period",
        "ledgerId",
        "amount",
        "counterparty",
        "rounding",
        "trialBalance",
    ],
    verbs=["post", "compute", "reconcile", "convert", "validate", "format", "load", "close", "apply", "split"],
    errors=[
        "TypeError: Cannot read properties of undefined (reading 'amount')",
        "AssertionError: expected 100.01 to be 100 // Object.is equality",
        "Error: Unbalanced journal: debits 120.00 != credits 119.99",
        'RangeError: Invalid currency code: "XBT"',
        "AssertionError: expected [ 'EUR', 'JPY' ] to deeply equal [ 'EUR', 'USD' ]",
        "SyntaxError: Unexpected token '}' in JSON at position 211",
    ],
    goals=[
        "Fix rounding in multi-currency settlements",
        "Add a reconcile command for bank statements",
        "Make the journal reject unbalanced postings",
        "Support JPY (円) amounts without minor units",
        "Refactor account lookup to use ledgerId",
    ],
    extra_files={
        "README.md": "# ledger\n\nDouble-entry bookkeeping service. Amounts are integers in minor units\n(cents; ¥/円 has none). Run `npm test` (vitest).\n",
        "package.json": '{\n  "name": "ledger",\n  "version": "2.3.0",\n  "type": "module",\n  "scripts": { "test": "vitest run" }\n}\n',
    },
)

_EXTRA_NAMES = ["atlas", "quill", "harbor", "beacon", "tundra", "mosaic", "relay", "sparrow"]
_EXTRA_NOUNS = [
    "buffer",
    "cursor",
    "session",
    "token",
    "shard",
    "snapshot",
    "manifest",
    "checkpoint",
    "payload",
    "schema",
    "cache_key",
    "worker",
    "queue",
    "lease",
    "replica",
    "segment",
    "offset",
    "digest",
    "bucket",
    "tenant",
    "quota",
    "index",
]
_EXTRA_VERBS = [
    "flush",
    "decode",
    "encode",
    "merge",
    "compact",
    "rotate",
    "fetch",
    "sync",
    "render",
    "schedule",
    "evict",
    "hydrate",
    "persist",
    "replay",
]
_EXTRA_ERRORS_PY = [
    "RuntimeError: lease expired before flush",
    "KeyError: 'tenant_id'",
    "TimeoutError: worker did not acknowledge within 30s",
    "json.decoder.JSONDecodeError: Expecting ',' delimiter: line 1 column 88",
    "AssertionError: assert 3 == 4",
    "PermissionError: [Errno 13] Permission denied: '/var/lib/cache'",
]
_EXTRA_ERRORS_TS = [
    "TypeError: Cannot read properties of null (reading 'offset')",
    "Error: ECONNREFUSED 127.0.0.1:6379",
    "AssertionError: expected 3 to be 4",
    "RangeError: Maximum call stack size exceeded",
    "Error: snapshot mismatch for manifest.json",
]


def _camel(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _snake(name: str) -> str:
    out = []
    for ch in name:
        if ch.isupper():
            out.append("_" + ch.lower())
        else:
            out.append(ch)
    return "".join(out)


def extra_project(index: int, rng: Random) -> ProjectSpec:
    name = _EXTRA_NAMES[index % len(_EXTRA_NAMES)] + ("" if index < len(_EXTRA_NAMES) else str(index))
    lang = "py" if index % 2 == 0 else "ts"
    nouns = rng.sample(_EXTRA_NOUNS, 12)
    verbs = rng.sample(_EXTRA_VERBS, 8)
    if lang == "ts":
        nouns = [_camel(n) for n in nouns]
    modules = rng.sample(["core", "store", "api", "sync", "codec", "worker", "config", "metrics"], 5)
    errors = _EXTRA_ERRORS_PY if lang == "py" else _EXTRA_ERRORS_TS
    goals = [f"Fix the {rng.choice(nouns)} handling in {m}" for m in modules[:3]] + [
        f"Add {rng.choice(verbs)} support for {rng.choice(nouns)}",
        f"Investigate flaky {rng.choice(modules)} tests",
    ]
    readme = f"# {name}\n\nInternal service ({'Python' if lang == 'py' else 'TypeScript'}).\n"
    return ProjectSpec(
        name=name,
        lang=lang,
        package=name if lang == "py" else "src",
        modules=modules,
        nouns=nouns,
        verbs=verbs,
        errors=list(errors),
        goals=goals,
        extra_files={"README.md": readme},
    )


# --------------------------------------------------------------------------- project model


class Project:
    """A tiny mutable source tree the conversations operate on."""

    def __init__(self, spec: ProjectSpec, cwd: str, rng: Random):
        self.spec = spec
        self.cwd = cwd
        self.lang = spec.lang
        self.files: dict[str, str] = {}
        self.functions: dict[str, list[str]] = {}  # path -> function names
        self.tests: dict[str, list[str]] = {}  # source path -> test names
        for mod in spec.modules:
            path, text, fns = self._make_module(mod, rng)
            self.files[path] = text
            self.functions[path] = fns
            tpath, ttext, tnames = self._make_tests(mod, path, fns, rng)
            self.files[tpath] = ttext
            self.tests[path] = tnames
        for p, t in spec.extra_files.items():
            self.files[p] = t

    # -- code generation
    def _fn_name(self, rng: Random) -> str:
        verb, noun = rng.choice(self.spec.verbs), rng.choice(self.spec.nouns)
        if self.lang == "py":
            return f"{verb}_{_snake(noun)}"
        return verb + noun[:1].upper() + noun[1:]

    def _make_module(self, mod: str, rng: Random) -> tuple[str, str, list[str]]:
        spec = self.spec
        names: list[str] = []
        while len(names) < rng.randint(3, 6):
            n = self._fn_name(rng)
            if n not in names:
                names.append(n)
        if self.lang == "py":
            path = f"{spec.package}/{mod}.py"
            out = [
                f'"""{mod.capitalize()} helpers for {spec.name}."""',
                "",
                "from __future__ import annotations",
                "",
                "import logging",
                "import math",
                "",
                "log = logging.getLogger(__name__)",
                "",
            ]
            for n in names:
                a, b = rng.sample(["value", "data", "items", "epoch", "record", "limit", "scale", "ts"], 2)
                noun = n.split("_", 1)[1]
                out += [
                    "",
                    f"def {n}({a}, {b}=None):",
                    f'    """{n.split("_")[0].capitalize()} the {noun.replace("_", " ")} from `{a}`."""',
                    f"    if {a} is None:",
                    f'        raise ValueError("{noun} requires {a}")',
                    f"    result = {rng.choice(['math.fsum', 'sum', 'sorted', 'list'])}({a}) if isinstance({a}, (list, tuple)) else {a}",
                    f'    log.debug("{n}: %r -> %r", {a}, result)',
                    f"    return result if {b} is None else result * {b}",
                ]
            return path, "\n".join(out) + "\n", names
        path = f"src/{mod}.ts"
        out = [f"// {mod} module of {spec.name}", 'import { strict as assert } from "node:assert";', ""]
        for n in names:
            a, b = rng.sample(["value", "input", "items", "ledgerId", "opts", "limit", "rate"], 2)
            out += [
                f"export function {n}({a}: unknown, {b}?: number): unknown {{",
                f"  if ({a} === undefined) {{",
                f'    throw new TypeError("{n} requires {a}");',
                "  }",
                f"  const result = Array.isArray({a}) ? {a}.length : {a};",
                f"  return {b} === undefined ? result : Number(result) * {b};",
                "}",
                "",
            ]
        return path, "\n".join(out), names

    def _make_tests(self, mod: str, path: str, fns: list[str], rng: Random) -> tuple[str, str, list[str]]:
        names = []
        if self.lang == "py":
            tpath = f"tests/test_{mod}.py"
            out = [f"from {self.spec.package}.{mod} import {', '.join(fns)}", ""]
            for fn in fns:
                case = rng.choice(["empty", "none", "scaled", "roundtrip", "negative"])
                t = f"test_{fn}_{case}"
                names.append(t)
                out += ["", f"def {t}():", f"    assert {fn}([1, 2, 3], 2) == 12"]
            return tpath, "\n".join(out) + "\n", names
        tpath = f"test/{mod}.test.ts"
        out = [
            'import { describe, expect, it } from "vitest";',
            f'import {{ {", ".join(fns)} }} from "../src/{mod}";',
            "",
            f'describe("{mod}", () => {{',
        ]
        for fn in fns:
            case = rng.choice(["handles empty input", "rejects undefined", "scales by rate", "keeps minor units"])
            t = f"{fn} {case}"
            names.append(t)
            out += [f'  it("{t}", () => {{', f"    expect({fn}([1, 2, 3], 2)).toBe(6);", "  });"]
        out += ["});", ""]
        return tpath, "\n".join(out), names

    # -- queries
    def source_paths(self) -> list[str]:
        return [p for p in self.functions]

    def listing(self, path: str = ".") -> str:
        if path in (".", "", "./"):
            names = {".git/"}
            for p in self.files:
                head, sep, _ = p.partition("/")
                names.add(head + "/" if sep else head)
            return "\n".join(sorted(names, key=lambda s: (s.lower(), s)))
        prefix = path.rstrip("/") + "/"
        names = set()
        for p in self.files:
            if p.startswith(prefix):
                rest = p[len(prefix) :]
                head, sep, _ = rest.partition("/")
                names.add(head + "/" if sep else head)
        return "\n".join(sorted(names, key=lambda s: (s.lower(), s)))

    def find(self, suffix: str) -> str:
        return "\n".join(sorted(p for p in self.files if p.endswith(suffix)))

    def grep(self, pattern: str, limit: int = 100) -> list[str]:
        out = []
        for p in sorted(self.files):
            for i, line in enumerate(self.files[p].split("\n"), 1):
                if pattern in line:
                    out.append(f"{p}:{i}: {line}")
                    if len(out) >= limit:
                        return out
        return out

    def test_command(self, target: str | None = None) -> str:
        if self.lang == "py":
            return f"pytest -q {target}" if target else "pytest -q"
        return f"npx vitest run {target}" if target else "npm test"

    def test_file_for(self, path: str) -> str:
        mod = path.rsplit("/", 1)[-1].split(".")[0]
        return f"tests/test_{mod}.py" if self.lang == "py" else f"test/{mod}.test.ts"

    def total_tests(self) -> int:
        return sum(len(v) for v in self.tests.values())


# --------------------------------------------------------------------------- session writer


@dataclass
class Node:
    id: str
    kind: str  # entry type or message role
    tokens: int
    cut: bool  # valid cut point for Pi's compaction
    turn_start: bool
    turn_end: bool = False
    files_read: tuple[str, ...] = ()
    files_modified: tuple[str, ...] = ()
    done: str | None = None  # the task this turn completed (for summaries)
    note: str | None = None  # one transcript line (for hook-compaction summaries)


class SessionWriter:
    """Appends entries to one session file exactly as Pi serializes them."""

    SYSTEM_TOKENS = 3100

    def __init__(
        self,
        fh,
        rng: Random,
        *,
        start_ms: int,
        cwd: str,
        project: Project,
        model: ModelSpec,
        thinking: str,
        session_id: str,
        parent_session: str | None = None,
    ):
        self.fh = fh
        self.rng = rng
        self.now = start_ms
        self.cwd = cwd
        self.project = project
        self.model = model
        self.thinking = thinking
        self.ids: set[str] = set()
        self.leaf: str | None = None
        self.path: list[Node] = []
        self.ctx_from = 0  # index in path where Pi's context starts (compaction summary node or 0)
        self.first_kept_index: int | None = None  # firstKeptEntryId of the latest compaction
        self.ctx_tokens = 0
        self.last_prompt_tokens = 0
        self.bytes = 0
        self.entries = 0
        self.read_files: list[str] = []
        self.modified_files: list[str] = []
        self.done_items: list[str] = []
        self.goal: str | None = None
        self.pending_calls: list[tuple[str, str, dict]] = []
        header = {"type": "session", "version": 3, "id": session_id, "timestamp": iso(start_ms), "cwd": cwd}
        if parent_session:
            header["parentSession"] = parent_session
        self._write(header)
        self.tick(20, 40)

    # -- low level
    def tick(self, lo: int, hi: int) -> int:
        self.now += self.rng.randint(lo, hi)
        return self.now

    def _write(self, obj: dict) -> None:
        line = encode_line(obj)
        self.fh.write(line)
        self.bytes += len(line)

    def new_id(self) -> str:
        while True:
            i = f"{self.rng.getrandbits(32):08x}"
            if i not in self.ids:
                self.ids.add(i)
                return i

    def _push(self, node: Node) -> None:
        self.path.append(node)
        self.ctx_tokens += node.tokens
        self.leaf = node.id
        self.entries += 1

    def entry(
        self,
        etype: str,
        payload: dict,
        *,
        kind: str | None = None,
        tokens: int = 0,
        cut: bool = False,
        turn_start: bool = False,
        turn_end: bool = False,
        files_read=(),
        files_modified=(),
        note: str | None = None,
    ) -> str:
        eid = self.new_id()
        obj = {"type": etype, "id": eid, "parentId": self.leaf, "timestamp": iso(self.now)}
        obj.update(payload)
        self._write(obj)
        self._push(
            Node(
                eid,
                kind or etype,
                tokens,
                cut,
                turn_start,
                turn_end,
                tuple(files_read),
                tuple(files_modified),
                note=note,
            )
        )
        return eid

    # -- entry types
    def model_change(self, model: ModelSpec) -> str:
        self.model = model
        return self.entry("model_change", {"provider": model.provider, "modelId": model.model})

    def thinking_change(self, level: str) -> str:
        self.thinking = level
        return self.entry("thinking_level_change", {"thinkingLevel": level})

    def session_info(self, name: str) -> str:
        self.tick(200, 3000)
        return self.entry("session_info", {"name": name})

    def label(self, target: str, label: str | None) -> str:
        self.tick(500, 9000)
        payload: dict[str, Any] = {"targetId": target}
        if label is not None:
            payload["label"] = label
        return self.entry("label", payload)

    def custom(self, custom_type: str, data: Any) -> str:
        self.tick(1, 30)
        eid = self.new_id()
        obj = {
            "type": "custom",
            "customType": custom_type,
            "data": data,
            "id": eid,
            "parentId": self.leaf,
            "timestamp": iso(self.now),
        }
        self._write(obj)
        self._push(Node(eid, "custom", 0, False, False))
        return eid

    def custom_message(self, custom_type: str, content: Any, display: bool, details: Any = None) -> str:
        self.tick(1, 30)
        eid = self.new_id()
        obj: dict[str, Any] = {
            "type": "custom_message",
            "customType": custom_type,
            "content": content,
            "display": display,
        }
        if details is not None:
            obj["details"] = details
        obj.update({"id": eid, "parentId": self.leaf, "timestamp": iso(self.now)})
        self._write(obj)
        text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
        self._push(Node(eid, "custom_message", _tokens(_utf16_len(text)), True, True))
        return eid

    def user(self, text: str, images: list[str] | None = None) -> str:
        self.tick(4000, 90000)
        content: list[dict] = [{"type": "text", "text": text}]
        chars = _utf16_len(text)
        for img in images or []:
            content.append({"type": "image", "data": img, "mimeType": "image/png"})
            chars += 4800
        msg = {"role": "user", "content": content, "timestamp": self.now - self.rng.randint(0, 4)}
        return self.entry(
            "message",
            {"message": msg},
            kind="user",
            tokens=_tokens(chars),
            cut=True,
            turn_start=True,
            note="user: " + _first_line(text),
        )

    def _usage(self, out_tokens: int) -> dict:
        m = self.model
        prompt = self.SYSTEM_TOKENS + self.ctx_tokens
        cached = min(self.last_prompt_tokens, prompt) if m.price_cache_read or m.api != "openai-completions" else 0
        cached = max(0, cached - self.rng.randint(0, 3))
        new = prompt - cached
        cache_write = new if m.price_cache_write and self.rng.random() < 0.7 else 0
        inp = new - cache_write
        self.last_prompt_tokens = prompt + out_tokens
        reasoning = self.rng.randint(0, out_tokens) if self.thinking != "off" else 0
        total = inp + out_tokens + cached + cache_write
        c_in, c_out = inp * m.price_in, out_tokens * m.price_out
        c_cr, c_cw = cached * m.price_cache_read, cache_write * m.price_cache_write
        return {
            "input": inp,
            "output": out_tokens,
            "cacheRead": cached,
            "cacheWrite": cache_write,
            "reasoning": reasoning,
            "totalTokens": total,
            "cost": {
                "input": _raw_num(c_in),
                "output": _raw_num(c_out),
                "cacheRead": _raw_num(c_cr),
                "cacheWrite": _raw_num(c_cw),
                "total": _raw_num(c_in + c_out + c_cr + c_cw),
            },
        }

    def _call_id(self) -> str:
        r = self.rng
        if self.model.call_style == "toolu":
            alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
            return "toolu_01" + "".join(r.choice(alphabet) for _ in range(22))
        if self.model.api == "openai-responses":
            return f"call_{r.getrandbits(96):024x}|fc_{r.getrandbits(128):032x}"
        return f"call_{r.getrandbits(80):020x}"

    def _response_id(self) -> str:
        r = self.rng
        if self.model.api == "anthropic-messages":
            return "msg_01" + "".join(
                r.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz123456789") for _ in range(22)
            )
        if self.model.api == "openai-responses":
            return f"resp_{r.getrandbits(192):048x}"
        return f"chatcmpl-{r.getrandbits(64):016x}"

    def _thinking_part(self, text: str) -> dict:
        sig = self.model.thinking_sig
        part = {"type": "thinking", "thinking": text}
        if sig == "reasoning_content":
            part["thinkingSignature"] = "reasoning_content"
        elif sig == "anthropic":
            part["thinkingSignature"] = base64.b64encode(self.rng.randbytes(48)).decode()
        else:
            part["thinkingSignature"] = (
                '{"type":"reasoning","id":"rs_' + f"{self.rng.getrandbits(128):032x}" + '","summary":[]}'
            )
        return part

    def assistant(
        self,
        *,
        thinking: str | None = None,
        text: str | None = None,
        calls: list[tuple[str, dict]] | None = None,
        stop: str | None = None,
    ) -> list[tuple[str, str, dict]]:
        """Append an assistant message; returns the tool calls as (callId, name, args)."""
        start = self.tick(15, 2500)
        content: list[dict] = []
        chars = 0
        if thinking and self.thinking != "off":
            content.append(self._thinking_part(thinking))
            chars += _utf16_len(thinking)
        if text:
            content.append({"type": "text", "text": text})
            chars += _utf16_len(text)
        out_calls = []
        for name, args in calls or []:
            cid = self._call_id()
            content.append({"type": "toolCall", "id": cid, "name": name, "arguments": args})
            chars += _utf16_len(name) + _utf16_len(_ENCODER.encode(args).decode())
            out_calls.append((cid, name, args))
        out_tokens = max(1, _tokens(chars))
        self.tick(300 + out_tokens * 8, 900 + out_tokens * 25)
        stop = stop or ("toolUse" if out_calls else "stop")
        msg = {
            "role": "assistant",
            "content": content,
            "api": self.model.api,
            "provider": self.model.provider,
            "model": self.model.model,
            "usage": self._usage(out_tokens),
            "stopReason": stop,
            "timestamp": start,
            "responseId": self._response_id(),
        }
        reads = tuple(a.get("path") for _c, n, a in out_calls if n == "read" and a.get("path"))
        mods = tuple(a.get("path") for _c, n, a in out_calls if n in ("edit", "write") and a.get("path"))
        if out_calls:
            note = "; ".join(
                f"{n}({a.get('path') or a.get('command') or a.get('pattern') or ''})" for _c, n, a in out_calls
            )
        else:
            note = "assistant: " + _first_line(text or thinking or "")
        self.entry(
            "message",
            {"message": msg},
            kind="assistant",
            tokens=_tokens(chars),
            cut=True,
            turn_end=(stop == "stop"),
            files_read=reads,
            files_modified=mods,
            note=note,
        )
        for p in reads:
            if p not in self.read_files:
                self.read_files.append(p)
        for p in mods:
            if p not in self.modified_files:
                self.modified_files.append(p)
        return out_calls

    def assistant_error(self, message: str, delay_ms: int) -> str:
        self.now += delay_ms
        start = self.now
        self.tick(40, 900)
        zero = {
            "input": 0,
            "output": 0,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 0,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        }
        msg = {
            "role": "assistant",
            "content": [],
            "api": self.model.api,
            "provider": self.model.provider,
            "model": self.model.model,
            "usage": zero,
            "stopReason": "error",
            "timestamp": start,
            "errorMessage": message,
        }
        return self.entry("message", {"message": msg}, kind="assistant", tokens=0, cut=True)

    def result(
        self, call: tuple[str, str, dict], text: str, *, is_error: bool = False, details: Any = None, slow: bool = False
    ) -> str:
        self.tick(30, 4000) if slow else self.tick(1, 60)
        msg: dict[str, Any] = {
            "role": "toolResult",
            "toolCallId": call[0],
            "toolName": call[1],
            "content": [{"type": "text", "text": text}],
        }
        if details is not None:
            msg["details"] = details  # fabric_exec keeps its trace even when it failed
        elif is_error:
            msg["details"] = {}  # Pi's built-in tools: a thrown error always has details {}
        msg["isError"] = is_error
        msg["timestamp"] = self.now
        return self.entry(
            "message",
            {"message": msg},
            kind="toolResult",
            tokens=_tokens(_utf16_len(text)),
            note=("→ error: " if is_error else "→ ok: ") + _first_line(text),
        )

    def bash_execution(
        self,
        command: str,
        output: str,
        exit_code: int | None,
        *,
        exclude: bool = False,
        truncated: bool = False,
        full_output_path: str | None = None,
    ) -> str:
        self.tick(3000, 40000)
        msg: dict[str, Any] = {
            "role": "bashExecution",
            "command": command,
            "output": output,
            "exitCode": exit_code,
            "cancelled": False,
            "truncated": truncated,
        }
        if full_output_path:
            msg["fullOutputPath"] = full_output_path
        msg["timestamp"] = self.now
        if exclude:
            msg["excludeFromContext"] = True
        return self.entry(
            "message",
            {"message": msg},
            kind="bashExecution",
            tokens=_tokens(_utf16_len(command) + _utf16_len(output)),
            cut=True,
            turn_start=True,
            note=f"bash({command})" + (" → error" if exit_code else ""),
        )

    def mark_done(self, text: str) -> None:
        self.path[-1].done = text
        self.done_items.append(text)

    def _recompute_from_path(self) -> None:
        """After /tree navigation, what is 'done' and which files were touched follow the path."""
        self.done_items = [n.done for n in self.path if n.done]
        self.read_files = list(dict.fromkeys(p for n in self.path for p in n.files_read))
        self.modified_files = list(dict.fromkeys(p for n in self.path for p in n.files_modified))

    # -- tree operations
    def branch_to(
        self, index: int, *, summary: str | None = None, details: Any = None, from_hook: bool = False
    ) -> str | None:
        """/tree navigation to path[index]; with a summary, append a branch_summary as Pi does."""
        target = self.path[index]
        abandoned = self.path[index + 1 :]
        self.path = self.path[: index + 1]
        self.leaf = target.id
        if self.ctx_from > index:
            self.ctx_from = 0
        self.ctx_tokens = sum(n.tokens for n in self.path[self.ctx_from :])
        self.last_prompt_tokens = 0
        self._recompute_from_path()
        if summary is None:
            return None
        self.tick(2000, 15000)
        payload: dict[str, Any] = {"fromId": target.id, "summary": summary}
        if details is None:
            mods = sorted({p for n in abandoned for p in n.files_modified})
            reads = sorted({p for n in abandoned for p in n.files_read} - set(mods))
            details = {"readFiles": reads, "modifiedFiles": mods}  # Pi lists read-only files apart
        payload["details"] = details
        payload["fromHook"] = from_hook
        return self.entry(
            "branch_summary",
            payload,
            kind="branch_summary",
            tokens=_tokens(_utf16_len(summary)),
            cut=True,
            turn_start=True,
        )

    def find_cut(self, keep_tokens: int) -> int | None:
        """Pi's findCutPoint (simplified): first cut point at/after the keep-recent boundary."""
        acc = 0
        start = self.ctx_from + 1 if self.ctx_from else 0
        pos = None
        for i in range(len(self.path) - 1, start - 1, -1):
            acc += self.path[i].tokens
            if acc >= keep_tokens:
                pos = i
                break
        if pos is None:
            return None
        for j in range(pos, len(self.path)):
            if self.path[j].cut and self.path[j].kind != "toolResult":
                return j if j > start else None
        return None

    def compaction(
        self, summary: str, first_kept_index: int | None, *, details: Any = None, from_hook: bool = False
    ) -> str:
        tokens_before = self.SYSTEM_TOKENS + self.ctx_tokens
        kept_id = self.path[first_kept_index].id if first_kept_index is not None else ""
        self.tick(8000, 60000)
        payload: dict[str, Any] = {"summary": summary, "firstKeptEntryId": kept_id, "tokensBefore": tokens_before}
        if details is None:
            mods = sorted(set(self.modified_files))
            details = {"readFiles": sorted(set(self.read_files) - set(mods)), "modifiedFiles": mods}
        payload["details"] = details
        payload["fromHook"] = from_hook
        kept = sum(n.tokens for n in self.path[first_kept_index:]) if first_kept_index is not None else 0
        self.first_kept_index = first_kept_index
        eid = self.entry("compaction", payload, kind="compaction", tokens=0)
        self.ctx_from = len(self.path) - 1
        self.path[-1].tokens = _tokens(_utf16_len(summary))
        self.ctx_tokens = self.path[-1].tokens + kept
        self.last_prompt_tokens = 0
        return eid


# --------------------------------------------------------------------------- text helpers


def _pi_summary(
    w: SessionWriter,
    *,
    split_turn: bool,
    branch: bool,
    done: list[str] | None = None,
    reads: list[str] | None = None,
    mods: list[str] | None = None,
) -> str:
    """Pi's default summary layout (goal, progress, decisions, next steps, file lists)."""
    p = w.project
    goal = w.goal or p.spec.goals[0]
    done = (done if done is not None else w.done_items)[-6:] or ["Explored the project layout"]
    mods = mods if mods is not None else w.modified_files
    reads = reads if reads is not None else w.read_files
    lines = [
        "## Goal",
        goal,
        "",
        "## Constraints & Preferences",
        "- Keep changes minimal",
        f"- Run `{p.test_command()}` before finishing",
        "",
        "## Progress",
        "### Done",
        *[f"- [x] {d}" for d in done],
        "",
        "### In Progress",
        f"- [ ] {w.rng.choice(p.spec.goals)}",
        "",
        "### Blocked",
        "- (none)",
        "",
        "## Key Decisions",
        f"- **Validate inputs early**: `{w.rng.choice(list(p.functions.values()))[0]}` raises on missing data",
        "",
        "## Next Steps",
        f"1. {w.rng.choice(p.spec.goals)}",
        "2. Re-run the full test suite",
        "",
        "## Critical Context",
        f"- Tests: `{p.test_command()}`",
        f"- Project root: `{p.cwd}`",
    ]
    text = "\n".join(lines)
    if split_turn:
        text += (
            "\n\n---\n\n**Turn Context (split turn):**\n\n## Original Request\n"
            + goal
            + "\n\n## Early Progress\n- Read the failing module and reproduced the error\n\n## Context for Suffix\n- The edit is half done; tests not yet re-run"
        )
    mods = sorted(set(mods))
    only_read = sorted(set(reads) - set(mods))
    if only_read:
        text += "\n\n<read-files>\n" + "\n".join(only_read) + "\n</read-files>"
    if mods:
        text += "\n\n<modified-files>\n" + "\n".join(mods) + "\n</modified-files>"
    if branch:
        text = (
            "The user explored a different conversation branch before returning here.\n"
            "Summary of that exploration:\n\n" + text
        )
    return text


def _fabric_summary_and_details(w: SessionWriter, first_kept: str) -> tuple[str, dict]:
    """A compaction as Fabric's session_before_compact hook would return it (details v2 shape)."""
    start = w.path[w.ctx_from].id if w.ctx_from else w.path[0].id
    idx = next((i for i, n in enumerate(w.path) if n.id == first_kept), len(w.path))
    summarized = w.path[(w.ctx_from + 1 if w.ctx_from else 0) : idx]
    last = summarized[-1].id if summarized else start
    first = summarized[0].id if summarized else start
    ts = iso(w.now)
    goal = w.goal or w.project.spec.goals[0]
    mods = w.modified_files[-5:]
    blocks = ["[Session Goal]\n" + goal]
    if mods:
        blocks.append("[Files And Changes]\nModified:\n" + "\n".join(f"  {m}" for m in mods))
    blocks.append("[Current Status]\nLast request: " + goal)
    notes = [n.note for n in summarized if n.note]
    blocks.append("---\n" + "\n".join(f"(#{i + 1}) {t}" for i, t in enumerate(notes[:24])))
    blocks.append(
        f"---\n[compacted {ts}; cumulative source entries {first} → {last}]\n"
        "For exact pre-summary history, use memory.recall on this range, then memory.expand by stable entry or operation address."
    )
    summary = "\n\n".join(blocks) + "\n"
    sections = ["[Session Goal]"] + (["[Files And Changes]"] if mods else []) + ["[Current Status]"]
    details = {
        "compactor": "fabric",
        "version": 2,
        "sections": sections,
        "coverage": {
            "cumulativeSourceRange": {"first": w.path[0].id, "last": last},
            "liveCutRange": {"first": first, "last": last},
        },
        "counts": {
            "branchEntries": len(w.path),
            "cumulativeSourceEntries": idx,
            "sourceEvents": len(summarized),
            "liveCutEntries": len(summarized),
            "priorFabricV1": 0,
            "priorFabricV2": 0,
        },
        "omittedCounts": {
            "goal": 0,
            "files": 0,
            "activity": 0,
            "outstanding": 0,
            "earlierTurns": 0,
            "transcript": max(0, len(notes) - 24),
            "preserve": 0,
            "thinking": 0,
        },
        "instructionPolicy": {
            "mode": "none",
            "canonicalized": False,
            "sourceBytes": 0,
            "truncated": False,
            "preserveCount": 0,
            "omittedPreserveCount": 0,
        },
        "stableAddresses": {
            "firstKeptEntryId": first_kept,
            "cumulativeSourceRange": {"first": w.path[0].id, "last": last},
            "recall": "session-entry-id-range",
        },
        "timestamp": ts,
    }
    return summary, details


def _sprinkle(rng: Random, text: str, p: float) -> str:
    if rng.random() < p:
        return text + " " + rng.choice(_UNICODE_BITS)
    return text


def _clip_lines(lines: list[str], *, tail: bool) -> tuple[list[str], str]:
    """Pi's truncation: keep at most 2000 lines and 51200 bytes (head for read, tail for bash)."""
    max_lines, max_bytes = 2000, 51200
    seq = reversed(lines) if tail else iter(lines)
    kept: list[str] = []
    size = 0
    by = "lines"
    for line in seq:
        b = len(line.encode()) + (1 if kept else 0)
        if len(kept) >= max_lines:
            by = "lines"
            break
        if size + b > max_bytes:
            by = "bytes"
            break
        kept.append(line)
        size += b
    if tail:
        kept.reverse()
    return kept, by


def _truncation(kept: list[str], all_lines: list[str], by: str) -> dict:
    content = "\n".join(kept)
    total = "\n".join(all_lines)
    return {
        "content": content,
        "truncated": True,
        "truncatedBy": by,
        "totalLines": len(all_lines),
        "totalBytes": len(total.encode()),
        "outputLines": len(kept),
        "outputBytes": len(content.encode()),
        "lastLinePartial": False,
        "firstLineExceedsLimit": False,
        "maxLines": 2000,
        "maxBytes": 51200,
    }


# --------------------------------------------------------------------------- tasks


class Tasks:
    """Coding-task conversations; each method appends one or more complete turns."""

    def __init__(self, w: SessionWriter, unicode_rate: float, tools_all: bool):
        self.w = w
        self.p = w.project
        self.r = w.rng
        self.u = unicode_rate
        self.tools_all = tools_all
        self.log_pool: list[str] | None = None

    # helpers
    def _say(self, text: str) -> str:
        return _sprinkle(self.r, text, self.u)

    def _pick_fn(self) -> tuple[str, str]:
        path = self.r.choice(self.p.source_paths())
        return path, self.r.choice(self.p.functions[path])

    def _failure_output(self, path: str, fn: str, err: str, passed: int) -> str:
        p = self.p
        tfile = p.test_file_for(path)
        test = next((t for t in p.tests.get(path, []) if fn in t), f"test_{fn}")
        if p.lang == "py":
            lineno = self._line_of(path, f"def {fn}(") or 1
            bar = "=" * 29
            return (
                f"{bar} test session starts {bar}\nplatform linux -- Python 3.11.7, pytest-8.3.4, pluggy-1.5.0\n"
                f"rootdir: {p.cwd}\ncollected {passed + 1} items\n\n{tfile} {'.' * min(passed, 40)}F\n\n"
                f"{'=' * 35} FAILURES {'=' * 35}\n{'_' * 20} {test} {'_' * 20}\n\n    def {test}():\n"
                f">       assert {fn}([1, 2, 3], 2) == 12\n\n{tfile}:4: \n"
                f"{'_ ' * 40}\n\n{path}:{lineno + 5}: in {fn}\n    result = sum(value)\nE   {err}\n\n"
                f"{'=' * 29} short test summary info {'=' * 29}\nFAILED {tfile}::{test} - {err}\n"
                f"{'=' * 24} 1 failed, {passed} passed in {self.r.uniform(0.2, 9):.2f}s {'=' * 24}\n"
            )
        lineno = self._line_of(path, f"function {fn}(") or 1
        return (
            f"\n RUN  v2.1.8 {p.cwd}\n\n ❯ {tfile} ({passed + 1} tests | 1 failed) {self.r.randint(5, 900)}ms\n"
            f"   × {p.spec.modules[0]} > {test}\n\n⎯⎯⎯⎯⎯⎯⎯ Failed Tests 1 ⎯⎯⎯⎯⎯⎯⎯\n\n"
            f" FAIL  {tfile} > {test}\n{err}\n ❯ {fn} {path}:{lineno + 4}:{self.r.randint(3, 40)}\n"
            f" ❯ {tfile}:{self.r.randint(5, 60)}:12\n\n⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯\n\n"
            f" Test Files  1 failed | {len(p.spec.modules) - 1} passed ({len(p.spec.modules)})\n"
            f"      Tests  1 failed | {passed} passed ({passed + 1})\n   Duration  {self.r.uniform(0.3, 6):.2f}s\n"
        )

    def _pass_output(self) -> str:
        p = self.p
        n = p.total_tests()
        if p.lang == "py":
            return f"{'.' * min(n, 70)}{' ' * max(0, 72 - min(n, 70))}[100%]\n{n} passed in {self.r.uniform(0.2, 9):.2f}s\n"
        return (
            f"\n RUN  v2.1.8 {p.cwd}\n\n ✓ {len(p.spec.modules)} test files\n\n Test Files  {len(p.spec.modules)} passed ({len(p.spec.modules)})\n"
            f"      Tests  {n} passed ({n})\n   Duration  {self.r.uniform(0.3, 6):.2f}s\n"
        )

    def _line_of(self, path: str, needle: str) -> int | None:
        for i, line in enumerate(self.p.files.get(path, "").split("\n"), 1):
            if needle in line:
                return i
        return None

    def _edit_result(self, path: str, old: str, new: str) -> tuple[str, dict]:
        before = self.p.files[path]
        after = before.replace(old, new, 1)
        self.p.files[path] = after
        a, b = before.split("\n"), after.split("\n")
        patch = "".join(difflib.unified_diff([x + "\n" for x in a], [x + "\n" for x in b], path, path, n=3))
        sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
        width = len(str(max(len(a), len(b))))
        out: list[str] = []
        first = None
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag == "equal":
                ctx = list(range(i1, i2))
                if len(ctx) > 8:
                    head = ctx[:4] if out else []
                    tail = ctx[-4:]
                    if out:
                        for i in head:
                            out.append(f" {i + 1:>{width}} {a[i]}")
                    out.append(" " * (width + 1) + " ...")
                    for i in tail:
                        out.append(f" {i + 1:>{width}} {a[i]}")
                else:
                    for i in ctx:
                        out.append(f" {i + 1:>{width}} {a[i]}")
                continue
            if first is None:
                first = j1 + 1
            for i in range(i1, i2):
                out.append(f"-{i + 1:>{width}} {a[i]}")
            for j in range(j1, j2):
                out.append(f"+{j + 1:>{width}} {b[j]}")
        return (
            f"Successfully replaced 1 block(s) in {path}.",
            {"diff": "\n".join(out), "patch": patch, "firstChangedLine": first or 1},
        )

    def _guard_edit(self, path: str, fn: str) -> tuple[str, str] | None:
        text = self.p.files[path]
        lines = text.split("\n")
        start = self._line_of(path, f"def {fn}(") if self.p.lang == "py" else self._line_of(path, f"function {fn}(")
        if not start:
            return None
        # anchor: the signature line plus the next line keeps the old text unique in the file
        sig, nxt = lines[start - 1], lines[start]
        old = sig + "\n" + nxt + "\n"
        if text.count(old) != 1:
            return None
        n = self.r.randint(1, 999)
        arg = sig[sig.index("(") + 1 :].split(",")[0].split(":")[0].strip() or "value"
        if self.p.lang == "py":
            guard = self.r.choice(
                [
                    f"    if isinstance({arg}, dict) and not {arg}:  # guard #{n}\n        return None\n",
                    f"    # handle empty input (issue #{n})\n    if {arg} == []:\n        return 0\n",
                    f'    if isinstance({arg}, str):\n        raise TypeError("{arg} must not be a string (#{n})")\n',
                ]
            )
            new = sig + "\n" + nxt + "\n" + guard if '"""' in nxt else sig + "\n" + guard + nxt + "\n"
        else:
            guard = self.r.choice(
                [
                    f"  if (Array.isArray({arg}) && {arg}.length === 0) return 0; // #{n}\n",
                    f'  // keep minor units as integers (#{n})\n  if (typeof {arg} === "number" && !Number.isInteger({arg})) throw new RangeError("{arg}");\n',
                ]
            )
            new = sig + "\n" + guard + nxt + "\n"
        return old, new

    # tasks ----------------------------------------------------------------
    def fix_test(self, *, wrong_anchor: bool | None = None) -> None:
        w, p, r = self.w, self.p, self.r
        path, fn = self._pick_fn()
        err = r.choice(p.spec.errors)
        tfile = p.test_file_for(path)
        prompt = r.choice(
            [
                f"`{p.test_command()}` fails in {tfile} with `{err}`. Can you fix it?",
                f"CI is red: {err}. Looks like it comes from `{fn}`. Please fix and keep the API stable.",
                f"Please fix the failing test for {fn} ({tfile}).",
            ]
        )
        w.user(self._say(prompt))
        mentioned = err.split(":")[0] if "fails in" in prompt or "CI is red" in prompt else None
        calls = w.assistant(
            thinking=(f"The failure mentions {mentioned}. " if mentioned else "") + f"Read {path} and the test first.",
            text=r.choice([None, "Let me look at the module and its test."]),
            calls=[("read", {"path": path}), ("read", {"path": tfile})],
        )
        w.result(calls[0], p.files[path])
        w.result(calls[1], p.files[tfile])
        calls = w.assistant(
            thinking="Reproduce the failure before changing anything.",
            calls=[("bash", {"command": p.test_command(tfile)})],
        )
        passed = max(0, len(p.tests.get(path, [])) - 1)
        w.result(
            calls[0],
            self._failure_output(path, fn, err, passed) + "\n\nCommand exited with code 1",
            is_error=True,
            slow=True,
        )
        edit = self._guard_edit(path, fn)
        if edit is None:
            w.assistant(text=f"`{fn}` is not defined where the traceback says; the test may import a stale build.")
            return
        old, new = edit
        if wrong_anchor if wrong_anchor is not None else r.random() < 0.3:
            bad = old.replace("\n", "  \n", 1)
            calls = w.assistant(
                thinking=f"Add a guard at the top of {fn}.",
                calls=[("edit", {"path": path, "edits": [{"oldText": bad, "newText": new}]})],
            )
            w.result(
                calls[0],
                f"Could not find the exact text in {path}. The old text must match exactly "
                "including all whitespace and newlines.",
                is_error=True,
            )
            think = "The anchor had trailing spaces; use the exact text from the file."
        else:
            think = f"Add a guard at the top of {fn}."
        calls = w.assistant(
            thinking=think, calls=[("edit", {"path": path, "edits": [{"oldText": old, "newText": new}]})]
        )
        msg, details = self._edit_result(path, old, new)
        w.result(calls[0], msg, details=details)
        calls = w.assistant(calls=[("bash", {"command": p.test_command()})])
        w.result(calls[0], self._pass_output(), slow=True)
        w.assistant(
            thinking="All green.",
            text=self._say(
                f"Fixed `{fn}` in `{path}`: it now guards against the input that raised `{err.split(':')[0]}`. "
                f"All {p.total_tests()} tests pass."
            ),
        )
        w.mark_done(f"Fixed {fn} in {path} ({err.split(':')[0]})")

    def explore(self) -> None:
        w, p, r = self.w, self.p, self.r
        path, fn = self._pick_fn()
        w.user(
            self._say(
                r.choice(
                    [
                        f"Where is `{fn}` used?",
                        f"Give me an overview of how {fn} is wired in.",
                        f"Which modules call {fn}? I want to rename it.",
                    ]
                )
            )
        )
        calls = []
        if not self.tools_all and r.random() < 0.5:
            calls = w.assistant(thinking="List the project first.", calls=[("ls", {"path": "."})])
            w.result(calls[0], "Tool ls not found", is_error=True)
            calls = w.assistant(calls=[("bash", {"command": f'grep -rn "{fn}" .'})])
            hits = p.grep(fn)
            w.result(calls[0], "\n".join(f"./{h.replace(': ', ':', 1)}" for h in hits) + "\n", slow=True)
        else:
            calls = w.assistant(
                thinking=f"Search for {fn} and list the source files.",
                calls=[
                    ("grep", {"pattern": fn, "path": "."}),
                    ("find", {"pattern": "*.py" if p.lang == "py" else "*.ts"}),
                ],
            )
            hits = p.grep(fn)
            w.result(calls[0], "\n".join(hits) if hits else "No matches found")
            w.result(calls[1], p.find(".py" if p.lang == "py" else ".ts"))
            if r.random() < 0.5:
                calls = w.assistant(calls=[("ls", {"path": "."})])
                w.result(calls[0], p.listing("."))
        calls = w.assistant(calls=[("read", {"path": path, "offset": 1, "limit": 80})])
        w.result(calls[0], "\n".join(p.files[path].split("\n")[:80]))
        users = sorted({h.split(":", 1)[0] for h in p.grep(fn)})
        w.assistant(
            text=self._say(
                f"`{fn}` is defined in `{path}` and referenced from "
                + ", ".join(f"`{u}`" for u in users)
                + ". Renaming it touches "
                f"{len(users)} file(s); the tests import it directly."
            )
        )
        w.mark_done(f"Mapped usages of {fn}")

    def add_feature(self) -> None:
        w, p, r = self.w, self.p, self.r
        noun = r.choice(p.spec.nouns)
        verb = r.choice(p.spec.verbs)
        if p.lang == "py":
            name = f"{verb}_{_snake(noun)}_batch"
            path = f"{p.spec.package}/{_snake(noun)}_batch.py"
            content = (
                f'"""Batch {verb} for {noun}."""\n\nfrom __future__ import annotations\n\n\n'
                f'def {name}(items, *, chunk=256):\n    """{verb.capitalize()} every {noun} in chunks of `chunk`."""\n'
                f"    out = []\n    for start in range(0, len(items), chunk):\n        out.extend(items[start:start + chunk])\n    return out\n"
            )
            tpath = f"tests/test_{_snake(noun)}_batch.py"
            tcontent = f"from {p.spec.package}.{_snake(noun)}_batch import {name}\n\n\ndef test_{name}_chunks():\n    assert {name}(list(range(600)), chunk=256) == list(range(600))\n"
        else:
            name = f"{verb}{noun[:1].upper()}{noun[1:]}Batch"
            path = f"src/{noun}Batch.ts"
            content = (
                f"// Batch {verb} for {noun}.\nexport function {name}<T>(items: T[], chunk = 256): T[] {{\n"
                "  const out: T[] = [];\n  for (let i = 0; i < items.length; i += chunk) out.push(...items.slice(i, i + chunk));\n  return out;\n}\n"
            )
            tpath = f"test/{noun}Batch.test.ts"
            tcontent = (
                f'import {{ expect, it }} from "vitest";\nimport {{ {name} }} from "../src/{noun}Batch";\n\n'
                f'it("{name} keeps order", () => {{\n  expect({name}([1, 2, 3], 2)).toEqual([1, 2, 3]);\n}});\n'
            )
        w.user(self._say(f"Add a `{name}` helper in {path} with a test. Chunk size should default to 256."))
        calls = w.assistant(
            thinking=f"New module {path}; write it and a test, then run the suite.",
            calls=[("write", {"path": path, "content": content}), ("write", {"path": tpath, "content": tcontent})],
        )
        for call, (fp, fc) in zip(calls, [(path, content), (tpath, tcontent)]):
            p.files[fp] = fc
            w.result(call, f"Successfully wrote {len(fc.encode())} bytes to {fp}")
        p.functions.setdefault(path, [name])
        p.tests.setdefault(path, [f"test_{name}_chunks" if p.lang == "py" else f"{name} keeps order"])
        calls = w.assistant(calls=[("bash", {"command": p.test_command()})])
        w.result(calls[0], self._pass_output(), slow=True)
        w.assistant(text=self._say(f"Added `{name}` in `{path}` and `{tpath}`. Tests pass ({p.total_tests()})."))
        w.mark_done(f"Added {name} ({path})")

    def missing_file(self) -> None:
        w, p, r = self.w, self.p, self.r
        doc = r.choice(["docs/architecture.md", "docs/rounding.md", "CONTRIBUTING.md", "docs/release.md"])
        w.user(self._say(f"Update {doc} with a note about the last change."))
        calls = w.assistant(thinking=f"Read {doc} first.", calls=[("read", {"path": doc})])
        w.result(calls[0], f"ENOENT: no such file or directory, access '{p.cwd}/{doc}'", is_error=True)
        content = (
            f"# {doc.rsplit('/', 1)[-1][:-3].capitalize()}\n\n" + "\n".join(f"- {d}" for d in w.done_items[-3:]) + "\n"
        )
        calls = w.assistant(
            text=f"{doc} does not exist yet; creating it.", calls=[("write", {"path": doc, "content": content})]
        )
        p.files[doc] = content
        w.result(calls[0], f"Successfully wrote {len(content.encode())} bytes to {doc}")
        w.assistant(text=self._say(f"Created `{doc}` with a summary of the recent changes."))
        w.mark_done(f"Wrote {doc}")

    def _logs(self, n: int) -> list[str]:
        r, p = self.r, self.p
        if self.log_pool is None:
            comps = p.spec.modules
            fns = [f for fs in p.functions.values() for f in fs]
            levels = ["INFO"] * 6 + ["DEBUG"] * 3 + ["WARN", "ERROR"]
            pool = []
            for _ in range(1500):
                lvl = r.choice(levels)
                comp = r.choice(comps)
                if lvl == "ERROR":
                    msg = f"{r.choice(fns)} failed: {r.choice(p.spec.errors)} (request_id={r.getrandbits(40):010x})"
                elif lvl == "WARN":
                    msg = f"slow {r.choice(p.spec.nouns)} lookup in {r.choice(fns)}: {r.randint(200, 9000)}ms"
                else:
                    msg = f"{r.choice(fns)} processed {r.choice(p.spec.nouns)} batch={r.randint(0, 99999)} in {r.uniform(0.1, 99):.2f}ms"
                if r.random() < self.u:
                    msg += " " + r.choice(_UNICODE_BITS)
                pool.append((lvl, comp, msg))
            self.log_pool = pool  # type: ignore[assignment]
        base = r.randint(0, 86400 * 20)
        out = []
        pool = self.log_pool
        choice = r.choice
        for i in range(n):
            lvl, comp, msg = choice(pool)  # type: ignore[misc]
            t = base + i
            out.append(
                f"2026-01-{1 + t // 86400 % 28:02d}T{t // 3600 % 24:02d}:{t // 60 % 60:02d}:{t % 60:02d}Z {lvl} {comp}: {msg}"
            )
        return out

    def long_output(self, *, size: str = "big") -> None:
        """A bash run whose output Pi truncates (tail kept) and a read Pi truncates (head kept)."""
        w, p, r = self.w, self.p, self.r
        log_path = f"/tmp/pi-bash-{r.getrandbits(64):016x}.log"
        if size == "big":
            w.user(
                self._say(
                    r.choice(
                        [
                            "Run the whole suite verbosely and show me the log.",
                            "The nightly job logged a lot of errors; have a look at the output.",
                            "Can you check the service log for warnings?",
                        ]
                    )
                )
            )
            cmd = f"{p.test_command()} -vv 2>&1" if p.lang == "py" else "npx vitest run --reporter=verbose 2>&1"
            lines = self._logs(r.randint(2200, 6000))
            read_path = r.choice(["logs/service.log", "logs/nightly.log", "build/test-report.txt"])
            rlines = self._logs(r.randint(2100, 5000))
        else:
            data = "data/catalog.csv" if p.lang == "py" else "data/transactions.csv"
            w.user(self._say(f"How many records are in {data}? Show me the last ids."))
            cmd = f"cut -d, -f1 {data}"
            n = r.randint(2300, 2600)
            ids = [str(10000 + 7 * i + r.randint(0, 6)) for i in range(n)]
            lines = ids
            read_path = data
            rlines = [f"{ids[i]},{r.choice(p.spec.nouns)[:8]},{r.randint(0, 999)}" for i in range(n)]
        calls = w.assistant(thinking="Run it and look at the tail.", calls=[("bash", {"command": cmd})])
        kept, by = _clip_lines(lines, tail=True)
        first = len(lines) - len(kept) + 1
        limit = " (50.0KB limit)" if by == "bytes" else ""
        text = (
            "\n".join(kept)
            + f"\n\n[Showing lines {first}-{len(lines)} of {len(lines)}{limit}. Full output: {log_path}]"
        )
        w.result(
            calls[0], text, details={"truncation": _truncation(kept, lines, by), "fullOutputPath": log_path}, slow=True
        )
        p.files[read_path] = "\n".join(rlines) + "\n"
        calls = w.assistant(calls=[("read", {"path": read_path})])
        kept, by = _clip_lines(rlines, tail=False)
        limit = " (50.0KB limit)" if by == "bytes" else ""
        text = (
            "\n".join(kept)
            + f"\n\n[Showing lines 1-{len(kept)} of {len(rlines) + 1}{limit}. Use offset={len(kept) + 1} to continue.]"
        )
        w.result(calls[0], text, details={"truncation": _truncation(kept, rlines, by)})
        if size == "big":
            errors = [ln for ln in kept if " ERROR " in ln][:3]
            note = ("\n".join(f"- `{e[:160]}`" for e in errors)) if errors else "- no ERROR lines in the first part"
            w.assistant(
                text=self._say(f"The output was truncated by Pi (full log in `{log_path}`). Highlights:\n{note}")
            )
        else:
            w.assistant(
                text=f"`{read_path}` has {len(rlines)} records; the last ids are {', '.join(lines[-3:])}. "
                f"Pi truncated both outputs (full bash output in `{log_path}`)."
            )
        w.mark_done(f"Reviewed {read_path}")

    def provider_errors(self, *, retries: int | None = None, recover: bool | None = None) -> None:
        w, p, r = self.w, self.p, self.r
        w.user(
            self._say(
                r.choice(
                    [
                        f"Summarize what changed in {r.choice(p.source_paths())} today.",
                        "What is left on the TODO list?",
                        "Please double-check the last fix.",
                    ]
                )
            )
        )
        msg = r.choice(_ERROR_MESSAGES)
        n = retries if retries is not None else r.randint(1, 4)
        delay = 0
        for i in range(n):
            w.assistant_error(msg, delay)
            delay = 2000 * (2**i)
        if recover if recover is not None else r.random() < 0.6:
            w.now += delay
            w.assistant(
                thinking="Answer from what I already know.",
                text=self._say("Recent work: " + "; ".join(w.done_items[-3:] or ["nothing committed yet"]) + "."),
            )

    def user_bash(self, *, exclude: bool | None = None) -> None:
        w, p, r = self.w, self.p, self.r
        cmd, out, code = r.choice(
            [
                ("git status --short", " M " + "\n M ".join(sorted(p.source_paths())[:2]) + "\n?? notes.txt\n", 0),
                ("git diff --stat", f" {p.source_paths()[0]} | {r.randint(2, 30)} ++++---\n 1 file changed\n", 0),
                (
                    "git log --oneline -3",
                    "\n".join(f"{r.getrandbits(28):07x} {d}" for d in (w.done_items[-3:] or ["init"])) + "\n",
                    0,
                ),
                (p.test_command(), self._pass_output(), 0),
                (
                    "make lint",
                    f"{p.source_paths()[0]}:3:1: F401 'math' imported but unused\nmake: *** [Makefile:12: lint] Error 1\n",
                    2,
                ),
            ]
        )
        ex = exclude if exclude is not None else r.random() < 0.3
        w.bash_execution(cmd, out, code, exclude=ex)

    def image_question(self) -> None:
        w, p, r = self.w, self.p, self.r
        w.user(
            self._say(f"Here is a screenshot of the {r.choice(p.spec.nouns)} chart — the colours look off. Thoughts?"),
            images=[tiny_png(r)],
        )
        w.assistant(
            thinking="The image is a tiny chart; the stripe suggests an inverted palette.",
            text="The diagonal stripe uses the inverted palette, so the colour map is applied twice. "
            "Check the renderer's `invert` flag.",
        )

    def fabric_exec(self) -> None:
        w, p, r = self.w, self.p, self.r
        w.user(self._say("Audit the release: read the changelog, run the tests and ask the reviewer agent."))
        name = r.choice(["Audit release", "Verify build", "Check docs"])
        code = (
            'const log = await pi.read({ path: "CHANGELOG.md" });\nphase("Verify");\n'
            f'const t = await pi.bash({{ command: "{p.test_command()}" }});\nreturn {{ ok: t.exitCode === 0 }};'
        )
        calls = w.assistant(
            thinking="Batch this in one fabric_exec run.",
            calls=[("fabric_exec", {"code": code, "display": {"name": name, "description": "Read, test, review"}})],
        )
        ok = r.random() < 0.6
        ops = [
            {
                "type": "call",
                "sequence": 0,
                "ref": "pi.read",
                "provider": "pi",
                "action": "read",
                "args": {"path": "CHANGELOG.md"},
                "outcome": "succeeded",
            },
            {
                "type": "call",
                "sequence": 1,
                "ref": "pi.bash",
                "provider": "pi",
                "action": "bash",
                "args": {"command": p.test_command()},
                "outcome": "succeeded" if ok else "failed",
            },
            {
                "type": "call",
                "sequence": 2,
                "ref": "agents.run",
                "provider": "agents",
                "action": "run",
                "args": {},
                "outcome": "succeeded",
            },
        ]
        if not ok:
            ops[1]["failureStage"] = "invoke"
            ops[1]["error"] = "Call failed during invoke: exit 1"
        trace = {
            "kind": "pi-fabric.execution",
            "version": 1,
            "outcome": "succeeded" if ok else "failed",
            "phases": ["Inspect", "Verify"],
            "operations": ops,
            "counts": {"droppedValues": 0, "truncatedValues": 0, "redactedValues": 0, "droppedOperations": 0},
        }
        if not ok:
            trace["error"] = "Execution failed"
        out = "ok: true\n" if ok else "ok: false\nerror: tests failed\n"
        w.result(
            calls[0],
            out,
            is_error=not ok and r.random() < 0.5,
            details={"success": ok, "trace": trace, "outputFormat": "yaml"},
        )
        w.assistant(text=f'Fabric run "{name}" {"succeeded" if ok else "failed: the test step exited with 1"}.')
        w.mark_done(f"Ran fabric audit ({'ok' if ok else 'failed'})")

    def extension_note(self) -> None:
        w, p, r = self.w, self.p, self.r
        w.custom("todo-state", {"open": r.randint(0, 9), "note": f"keep {r.choice(p.spec.nouns)} API stable"})
        if r.random() < 0.7:
            w.custom_message(
                "reminder",
                self._say(f"Reminder: keep the public API of {p.spec.package} stable."),
                True,
                {"source": "reminder-ext", "n": r.randint(1, 9)},
            )
        else:
            w.custom_message(
                "pi-fabric-agent-complete",
                [{"type": "text", "text": "Agent reviewer finished"}],
                False,
                {"id": f"a{r.randint(1, 99)}", "status": "completed"},
            )

    def chat(self) -> None:
        w, p, r = self.w, self.p, self.r
        q = r.choice(
            [
                "Thanks! Anything risky in that change?",
                "Explain the design choice briefly.",
                "Is the test coverage good enough here?",
            ]
        )
        w.user(self._say(q))
        w.assistant(
            thinking="Short answer.",
            text=self._say(
                f"The change is local to {r.choice(p.source_paths())}; the main risk is callers relying on the old "
                f"behaviour for {r.choice(p.spec.nouns)}. The tests cover the happy path and the new guard."
            ),
        )
        w.mark_done(f"Discussed: {q}")


# --------------------------------------------------------------------------- sessions


def _session_file_name(start_ms: int, session_id: str) -> str:
    return iso(start_ms).replace(":", "-").replace(".", "-") + "_" + session_id + ".jsonl"


def _resolve_spec(cwd: str) -> ProjectSpec:
    name = cwd.rstrip("/").rsplit("/", 1)[-1]
    if name == "orbit":
        return ORBIT
    if name == "ledger":
        return LEDGER
    idx = sum(map(ord, name)) % len(_EXTRA_NAMES)
    spec = extra_project(idx, Random(f"project:{name}"))
    spec.name = name
    spec.extra_files = {"README.md": f"# {name}\n\nInternal service.\n"}
    return spec


def _session_header_and_start(rng: Random, start_ms: int | None, seed: Any) -> tuple[int, str]:
    if start_ms is None:
        start_ms = _EPOCH_2026 + Random(f"start:{seed}").randint(0, 300 * 86400_000)
    return start_ms, uuid7(start_ms, rng)


def _run_plan(w: SessionWriter, tasks: Tasks, plan: list[tuple[str, dict]]) -> None:
    for name, kw in plan:
        _STEP[name](w, tasks, **kw)


def _step_branch(w: SessionWriter, t: Tasks, *, summary: bool = True, back: int = 2) -> None:
    ends = [i for i, n in enumerate(w.path) if n.turn_end and i > w.ctx_from]
    if len(ends) <= back:
        return
    idx = ends[-1 - back]
    if summary:
        abandoned = w.path[idx + 1 :]
        reads = list(dict.fromkeys(p for n in abandoned for p in n.files_read))
        mods = list(dict.fromkeys(p for n in abandoned for p in n.files_modified))
        text = _pi_summary(
            w, split_turn=False, branch=True, done=[n.done for n in abandoned if n.done], reads=reads, mods=mods
        )
        w.branch_to(idx, summary=text)
        if w.rng.random() < 0.5:
            w.label(w.leaf, "alt-branch")  # type: ignore[arg-type]
    else:
        w.branch_to(idx)


def _step_compaction(
    w: SessionWriter,
    t: Tasks,
    *,
    keep: int = 20000,
    hook: bool = False,
    split: bool | None = None,
    replay: bool = False,
) -> None:
    if replay and w.ctx_from and w.first_kept_index is not None and w.first_kept_index < w.ctx_from:
        # Pi's prepareCompaction starts its search at the previous firstKeptEntryId, so with a short
        # tail the kept range can hold the previous compaction, whose summary Pi then replays.
        j = w.first_kept_index
        w.compaction(_pi_summary(w, split_turn=False, branch=False), j)
        return
    j = w.find_cut(keep)
    if j is None:
        j = next((i for i in range(len(w.path) - 1, w.ctx_from, -1) if w.path[i].turn_start), None)
        if j is None or j <= w.ctx_from:
            return
    if split is True and w.path[j].turn_start:
        k = next((i for i in range(j + 1, len(w.path)) if w.path[i].kind == "assistant" and w.path[i].cut), None)
        if k is not None:
            j = k
    if split is False and not w.path[j].turn_start:
        k = next((i for i in range(j, w.ctx_from, -1) if w.path[i].turn_start), None)
        if k is None:
            return
        j = k
    if hook:
        summary, details = _fabric_summary_and_details(w, w.path[j].id)
        w.compaction(summary, j, details=details, from_hook=True)
    else:
        summary = _pi_summary(w, split_turn=not w.path[j].turn_start, branch=False)
        w.compaction(summary, j)


def _step_kickoff(w: SessionWriter, t: Tasks, *, goal: str, text: str) -> None:
    """The user states a new goal; the agent looks at the tree and answers with a plan."""
    w.goal = goal
    p = w.project
    w.user(f"{goal}. {text}")
    calls = w.assistant(
        thinking=f"New goal: {goal}. Look at the layout before planning.", calls=[("ls", {"path": "."})]
    )
    w.result(calls[0], p.listing("."))
    mods = ", ".join(f"`{m}`" for m in p.source_paths()[:3])
    w.assistant(
        thinking="Plan in small steps, tests after each.",
        text=(
            f'Plan for "{goal}":\n1. Reproduce and measure with `{p.test_command()}`.\n'
            f"2. Work through {mods} one function at a time, running the tests after each edit.\n"
            "3. Add batch helpers where callers loop, with tests.\n4. Note the changes in docs/."
        ),
    )
    w.mark_done(f"Planned: {goal}")


def _step_model(w: SessionWriter, t: Tasks, *, model: int | None = None, thinking: str | None = None) -> None:
    w.tick(1000, 20000)
    m = MODELS[model] if model is not None else w.rng.choice([m for m in MODELS if m != w.model])
    w.model_change(m)
    w.thinking_change(thinking or w.rng.choice(THINKING_LEVELS))


_STEP: dict[str, Callable[..., None]] = {
    "fix_test": lambda w, t, **kw: t.fix_test(**kw),
    "explore": lambda w, t, **kw: t.explore(**kw),
    "add_feature": lambda w, t, **kw: t.add_feature(**kw),
    "missing_file": lambda w, t, **kw: t.missing_file(**kw),
    "long_output": lambda w, t, **kw: t.long_output(**kw),
    "provider_errors": lambda w, t, **kw: t.provider_errors(**kw),
    "user_bash": lambda w, t, **kw: t.user_bash(**kw),
    "image": lambda w, t, **kw: t.image_question(**kw),
    "fabric_exec": lambda w, t, **kw: t.fabric_exec(**kw),
    "extension_note": lambda w, t, **kw: t.extension_note(**kw),
    "chat": lambda w, t, **kw: t.chat(**kw),
    "branch": _step_branch,
    "compaction": _step_compaction,
    "model": _step_model,
    "session_info": lambda w, t, name: w.session_info(name),
    "label": lambda w, t, label: w.label(next(n.id for n in reversed(w.path) if n.kind == "assistant"), label),
    "unlabel": lambda w, t: w.label(next(n.id for n in reversed(w.path) if n.kind == "assistant"), None),
    "goal": lambda w, t, text: setattr(w, "goal", text),
    "pause": lambda w, t, lo_s, hi_s: w.tick(lo_s * 1000, hi_s * 1000),
    "kickoff": lambda w, t, goal, text: _step_kickoff(w, t, goal=goal, text=text),
}

_RANDOM_TASKS = [
    ("fix_test", 30),
    ("explore", 16),
    ("add_feature", 10),
    ("missing_file", 6),
    ("provider_errors", 5),
    ("user_bash", 6),
    ("image", 2),
    ("fabric_exec", 4),
    ("extension_note", 4),
    ("chat", 10),
]


def _write_session(
    fh,
    *,
    target_bytes: int,
    seed: Any,
    cwd: str,
    start_ms: int | None,
    plan: list[tuple[str, dict]] | None,
    parent_session: str | None = None,
    model_index: int | None = None,
) -> tuple[int, str, int]:
    rng = Random(f"session:{seed}:{cwd}")
    start_ms, sid = _session_header_and_start(rng, start_ms, seed)
    project = Project(_resolve_spec(cwd), cwd, Random(f"project:{cwd}"))
    model = MODELS[model_index] if model_index is not None else rng.choice(MODELS)
    thinking = rng.choice(["off", "low", "medium", "high"])
    w = SessionWriter(
        fh,
        rng,
        start_ms=start_ms,
        cwd=cwd,
        project=project,
        model=model,
        thinking=thinking,
        session_id=sid,
        parent_session=parent_session,
    )
    w.model_change(model)
    w.thinking_change(thinking)
    w.goal = rng.choice(project.spec.goals)
    big = target_bytes >= 1_000_000
    tasks = Tasks(w, unicode_rate=0.04, tools_all=rng.random() < 0.5)
    if plan is not None:
        _run_plan(w, tasks, plan)
        return start_ms, sid, w.now
    names = [n for n, _ in _RANDOM_TASKS]
    weights = [wt for _, wt in _RANDOM_TASKS]
    if big:
        names.append("long_output")
        weights.append(2.0)
    elif target_bytes >= 150_000:
        names.append("long_output")
        weights.append(4)
    if rng.random() < 0.4:
        w.session_info(_sprinkle(rng, w.goal, 0.2))
    window_tokens = int(w.model.window * rng.uniform(0.55, 0.8))
    n_task = 0
    first = True
    while first or w.bytes < target_bytes:
        name = "fix_test" if first and target_bytes > 12_000 else ("chat" if first else rng.choices(names, weights)[0])
        first = False
        _STEP[name](w, tasks)
        n_task += 1
        if w.ctx_tokens + w.SYSTEM_TOKENS > window_tokens:
            _step_compaction(w, tasks, hook=rng.random() < 0.15, split=rng.random() < 0.2, replay=rng.random() < 0.05)
        roll = rng.random()
        if roll < 0.03 and n_task > 3:
            _step_branch(w, tasks, summary=rng.random() < 0.6, back=rng.randint(1, 3))
        elif roll < 0.05:
            _step_model(w, tasks)
        elif roll < 0.08:
            w.label(
                next(n.id for n in reversed(w.path) if n.kind == "assistant"),
                rng.choice(["checkpoint", "good", "wip", "review-me"]),
            )
        if w.bytes < target_bytes and n_task > 2 and w.rng.random() < 0.02:
            w.goal = rng.choice(project.spec.goals)
    return start_ms, sid, w.now


def generate_session(
    path: str | Path,
    *,
    target_bytes: int,
    seed: Any,
    cwd: str,
    start_ms: int | None = None,
    plan: list[tuple[str, dict]] | None = None,
    parent_session: str | None = None,
    model_index: int | None = None,
) -> Path:
    """Write one session of roughly ``target_bytes`` (at least one complete turn).

    ``path`` is either the file to write, or an existing directory in which the file gets
    Pi's name ``<ts>_<sessionId>.jsonl``. Returns the written file. Deterministic in
    (target_bytes, seed, cwd, start_ms, plan).
    """
    path = Path(path)
    if path.is_dir():
        rng = Random(f"session:{seed}:{cwd}")
        s_ms, sid = _session_header_and_start(rng, start_ms, seed)
        path = path / _session_file_name(s_ms, sid)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb", buffering=1 << 20) as fh:
        _, _, last_ms = _write_session(
            fh,
            target_bytes=target_bytes,
            seed=seed,
            cwd=cwd,
            start_ms=start_ms,
            plan=plan,
            parent_session=parent_session,
            model_index=model_index,
        )
    # mtime = time of the last append, as for a real session (Pi's --continue picks the newest mtime)
    os.utime(path, ns=(last_ms * 1_000_000, last_ms * 1_000_000))
    return path


def _write_tiny_session(fh, *, target_bytes: int, seed: Any, cwd: str, start_ms: int | None) -> int:
    """Many small entries: short turns (a user line, a one-line answer or one small tool call
    and its short result) separated by bursts of ~120-byte entries (extension state,
    labels, thinking-level changes), with Pi-style compactions as the context fills."""
    rng = Random(f"tiny:{seed}:{cwd}")
    start_ms, sid = _session_header_and_start(rng, start_ms, seed)
    project = Project(_resolve_spec(cwd), cwd, Random(f"project:{cwd}"))
    model = MODELS[0]
    w = SessionWriter(fh, rng, start_ms=start_ms, cwd=cwd, project=project, model=model, thinking="off", session_id=sid)
    w.model_change(model)
    w.thinking_change("off")
    w.goal = project.spec.goals[0]
    words = ["ok", "go on", "next", "yes", "run it", "looks good", "again", "why?", "fix it", "continue", "thanks"]
    paths = project.source_paths()
    window_tokens = int(model.window * 0.7)
    n = 0
    while w.bytes < target_bytes:
        n += 1
        w.tick(2000, 30000)
        text = rng.choice(words) if n > 1 else w.goal
        w.entry(
            "message",
            {"message": {"role": "user", "content": text, "timestamp": w.now}},
            kind="user",
            tokens=_tokens(_utf16_len(text)),
            cut=True,
            turn_start=True,
            note="user: " + text,
        )
        if rng.random() < 0.3:
            path = rng.choice(paths)
            calls = w.assistant(calls=[("read", {"path": path})])
            w.result(calls[0], rng.choice(["ok", "1 line", "(empty)", "done"]))
            w.assistant(text=rng.choice(["Done.", "OK.", "Read it.", "Fine."]))
        else:
            w.assistant(text=rng.choice(["Done.", "OK.", "Sure.", "Next?"]))
        for _ in range(rng.randint(14, 30)):
            roll = rng.random()
            if roll < 0.8:
                w.custom("st", rng.randint(0, 99))
            elif roll < 0.97:
                w.label(w.leaf, rng.choice(["wip", "ok"]))  # type: ignore[arg-type]
            else:
                w.thinking_change(rng.choice(["off", "low"]))
        if w.ctx_tokens + w.SYSTEM_TOKENS > window_tokens:
            j = w.find_cut(20000)
            if j is not None:
                w.compaction(_pi_summary(w, split_turn=not w.path[j].turn_start, branch=False), j)
    return w.now


def generate_tiny_session(
    path: str | Path, *, target_bytes: int, seed: Any, cwd: str, start_ms: int | None = None
) -> Path:
    """Write one session of roughly ``target_bytes`` made of small entries (nine in ten are
    ~120-byte lines, the mean is near 150 bytes; see ``_write_tiny_session``). Same ``path`` rules and
    determinism as ``generate_session``."""
    path = Path(path)
    if path.is_dir():
        rng = Random(f"tiny:{seed}:{cwd}")
        s_ms, sid = _session_header_and_start(rng, start_ms, seed)
        path = path / _session_file_name(s_ms, sid)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb", buffering=1 << 20) as fh:
        last_ms = _write_tiny_session(fh, target_bytes=target_bytes, seed=seed, cwd=cwd, start_ms=start_ms)
    os.utime(path, ns=(last_ms * 1_000_000, last_ms * 1_000_000))
    return path


def generate_message_session(
    path: str | Path, *, entries: int, seed: Any, cwd: str, start_ms: int = 1_790_000_000_000
) -> Path:
    """Write one session of ``entries`` small message entries, every one of them indexed
    text: alternating user and assistant turns of 6-12 words (about 60 characters; one in
    four carries a number, so the vocabulary keeps growing), each line about 200-240 bytes
    with Pi's envelope. The worst case for the hot tier's memory per source byte (issue
    16, point 8). Deterministic for (entries, seed, cwd); ``path`` may be a directory."""
    rng = Random(f"messages:{seed}:{cwd}:{entries}")
    sid = uuid7(start_ms, rng)
    path = Path(path)
    if path.is_dir():
        path = path / _session_file_name(start_ms, sid)
    path.parent.mkdir(parents=True, exist_ok=True)
    words = (
        "parse schema cache index query token render branch commit session lease bridge worker pool "
        "stream chunk record handler metrics config retry timeout buffer socket report test build"
    ).split()
    parent = None
    now = start_ms
    salt = rng.getrandbits(32)
    with open(path, "wb", buffering=1 << 20) as fh:
        fh.write(encode_line({"type": "session", "version": 3, "id": sid, "timestamp": iso(now), "cwd": cwd}))
        for i in range(entries):
            now += rng.randint(200, 4000)
            eid = f"{(i * 2654435761 + salt) & 0xFFFFFFFF:08x}"  # a bijection of i: ids never repeat
            text = " ".join(rng.choice(words) for _ in range(rng.randint(6, 12)))
            if rng.random() < 0.25:
                text += f" #{rng.randint(0, 10**7)}"
            role = "user" if i % 2 == 0 else "assistant"
            message = {
                "role": role,
                "content": text if role == "user" else [{"type": "text", "text": text}],
                "timestamp": now,
            }
            fh.write(
                encode_line(
                    {"type": "message", "id": eid, "parentId": parent, "timestamp": iso(now), "message": message}
                )
            )
            parent = eid
    os.utime(path, ns=(now * 1_000_000, now * 1_000_000))
    return path


def _project_cwds(n: int) -> list[str]:
    base = ["orbit", "ledger"] + _EXTRA_NAMES
    names = [base[i] if i < len(base) else f"service{i}" for i in range(n)]
    return [f"/home/user/projects/{nm}" for nm in names]


def _session_sizes(rng: Random, sessions: int, target_bytes: int) -> list[int]:
    """Heavy-tailed sizes summing to about ``target_bytes``: ~20% small sessions (2–30 KB),
    the rest Pareto-weighted, none above a quarter of the total."""
    small = [rng.random() < 0.2 for _ in range(sessions)]
    sizes = [rng.randint(2000, 30000) if sm else 0 for sm in small]
    budget = max(0, target_bytes - sum(sizes))
    weights = [0.0 if sm else min(rng.paretovariate(1.1), 400.0) for sm in small]
    total = sum(weights) or 1.0
    cap = max(target_bytes // 4, 30000)
    big = [max(2000, int(budget * wgt / total)) if wgt else 0 for wgt in weights]
    for _ in range(8):  # cap the largest sessions and hand the excess to the others
        excess = sum(b - cap for b in big if b > cap)
        if excess <= 0:
            break
        free = sum(wgt for b, wgt in zip(big, weights) if wgt and b < cap) or 1.0
        big = [cap if b >= cap else (b + int(excess * wgt / free) if wgt else 0) for b, wgt in zip(big, weights)]
    return [s or b for s, b in zip(sizes, big)]


def generate_agent_dir(
    out: str | Path, *, sessions: int, target_bytes: int, seed: Any, projects: int | None = None
) -> list[Path]:
    """Write ``sessions`` sessions totalling about ``target_bytes`` under ``out/sessions/``.

    Sessions spread over a handful of projects (orbit, ledger, …), sizes are heavy-tailed
    (a few large sessions, many small ones), start times increase with the session index.
    """
    out = Path(out)
    rng = Random(f"agent-dir:{seed}")
    n_proj = projects or max(2, min(6, sessions // 8 + 2))
    cwds = _project_cwds(n_proj)
    sizes = _session_sizes(rng, sessions, target_bytes)
    t = _EPOCH_2026 + rng.randint(0, 30 * 86400_000)
    written = []
    overshoot = 0  # sessions end after a complete task; later big sessions absorb the excess
    for i in range(sessions):
        cwd = cwds[i % n_proj] if i < n_proj else rng.choice(cwds)
        t += rng.randint(20 * 60_000, 30 * 3600_000)
        d = out / "sessions" / encode_cwd(cwd)
        d.mkdir(parents=True, exist_ok=True)
        want = sizes[i]
        if want > 100_000 and overshoot > 0:
            cut = min(overshoot, want // 2)
            want -= cut
            overshoot -= cut
        f = generate_session(d, target_bytes=want, seed=f"{seed}/{i}", cwd=cwd, start_ms=t)
        overshoot += f.stat().st_size - want
        written.append(f)
    return written


# --------------------------------------------------------------------------- embedded example


ORBIT_CWD = "/home/user/projects/orbit"
LEDGER_CWD = "/home/user/projects/ledger"

EXAMPLE_PLANS: list[dict[str, Any]] = [
    {
        "cwd": ORBIT_CWD,
        "model": 0,
        "plan": [
            ("goal", {"text": "Fix the TLE epoch parsing for leap years"}),
            ("session_info", {"name": "TLE epoch fix 🛰️"}),
            ("fix_test", {"wrong_anchor": True}),
            ("user_bash", {"exclude": False}),
            ("chat", {}),
            ("label", {"label": "epoch-fixed"}),
        ],
    },
    {
        "cwd": ORBIT_CWD,
        "model": 2,
        "plan": [
            ("goal", {"text": "Make pass prediction robust when the satellite never rises"}),
            ("fix_test", {"wrong_anchor": False}),
            ("explore", {}),
            ("long_output", {"size": "small"}),
            ("provider_errors", {"retries": 3, "recover": False}),
            ("fix_test", {}),
            ("compaction", {"keep": 1500, "split": False}),
            ("model", {"model": 0, "thinking": "high"}),
            ("chat", {}),
            ("add_feature", {}),
            ("explore", {}),
            ("branch", {"summary": True, "back": 2}),
            ("fix_test", {}),
            ("compaction", {"replay": True}),
            ("chat", {}),
            ("label", {"label": "after-branch"}),
        ],
    },
    {
        "cwd": ORBIT_CWD,
        "model": 1,
        "fork": 1,
        "plan": [
            ("goal", {"text": "Add ECEF to geodetic conversion with tests — naïve café résumé e\u0301 日本語 🚀"}),
            ("image", {}),
            ("add_feature", {}),
            ("fix_test", {}),
            ("fabric_exec", {}),
            ("compaction", {"keep": 800, "hook": True}),
            ("chat", {}),
        ],
    },
    {
        "cwd": LEDGER_CWD,
        "model": 0,
        "plan": [
            ("goal", {"text": "Support JPY (円) amounts without minor units"}),
            ("session_info", {"name": "JPY 円 support"}),
            ("explore", {}),
            ("extension_note", {}),
            ("add_feature", {}),
            ("missing_file", {}),
            ("user_bash", {"exclude": True}),
            ("chat", {}),
        ],
    },
    {
        "cwd": LEDGER_CWD,
        "model": 3,
        "plan": [
            ("goal", {"text": "Make the journal reject unbalanced postings"}),
            ("fix_test", {"wrong_anchor": True}),
            ("provider_errors", {"retries": 2, "recover": True}),
            ("user_bash", {"exclude": False}),
            ("fix_test", {}),
            ("chat", {}),
            ("branch", {"summary": False, "back": 1}),
            ("explore", {}),
            ("model", {"model": 2, "thinking": "off"}),
            ("fix_test", {}),
            ("compaction", {"keep": 1200, "split": True}),
            ("chat", {}),
            ("unlabel", {}),
        ],
    },
    {
        "cwd": LEDGER_CWD,
        "model": 1,
        "plan": [
            ("chat", {}),
        ],
    },
]


def _long_session_plan() -> list[tuple[str, dict]]:
    """An afternoon on orbit (about four hours, no compaction yet): three goals in turn, reads,
    edits (some with a wrong anchor), new modules, test runs that fail and pass, truncated
    logs, provider errors, a model switch and labels. Its context ends above 120k estimated
    tokens but under Pi's auto-compaction threshold (200000 - 16384), so a preview at Pi's
    defaults (keepRecentTokens 20000) shows a real cut and summary."""
    rounds: list[list[tuple[str, dict]]] = [
        [("explore", {}), ("fix_test", {"wrong_anchor": False}), ("user_bash", {"exclude": False}), ("chat", {})],
        [("fix_test", {"wrong_anchor": True}), ("add_feature", {}), ("explore", {})],
        [("fix_test", {}), ("missing_file", {}), ("explore", {})],
        [("add_feature", {}), ("fix_test", {}), ("provider_errors", {"retries": 2, "recover": True}), ("chat", {})],
        [("explore", {}), ("user_bash", {"exclude": False}), ("fix_test", {"wrong_anchor": False})],
    ]
    goals = [
        (
            "Speed up the SGP4 propagation loop",
            "Propagating a day of TLEs for the whole catalogue takes 40 s; I want it under 10 s. Profile "
            "orbit/propagate.py first, keep the public API, and make every step keep the tests green.",
        ),
        (
            "Clean up the ephemeris interpolation API",
            "Next: the ephemeris helpers grew three ways to pass an epoch. Settle on one (a datetime in UTC), "
            "add batch variants where callers loop, and document the change in docs/.",
        ),
        (
            "Make pass prediction robust when the satellite never rises",
            "Last one for today: pass prediction crashes for geostationary and never-rising satellites. "
            "Return an empty list instead, with tests for both cases — café's ground station is at 48.8° N.",
        ),
    ]
    plan: list[tuple[str, dict]] = [
        ("kickoff", {"goal": goals[0][0], "text": goals[0][1]}),
        ("session_info", {"name": "SGP4 speed-up, ephemeris API clean-up (long afternoon) ⏱️"}),
    ]
    for i in range(LONG_SESSION_ROUNDS):
        if i and i % 11 == 0:
            goal, text = goals[(i // 11) % len(goals)]
            plan.append(("kickoff", {"goal": goal, "text": text}))
        if i == 7:
            plan.append(("model", {"model": 3, "thinking": "medium"}))
        if i == 12:
            plan.append(("model", {"model": 0, "thinking": "high"}))
        if i:
            plan.append(("pause", {"lo_s": 240, "hi_s": 660}))  # reviewing, a coffee, a meeting
        if i in LONG_SESSION_LOG_ROUNDS:
            plan.append(("long_output", {"size": "big"}))
        plan.extend(rounds[i % len(rounds)])
        if i % 4 == 3:
            plan.append(("label", {"label": f"checkpoint-{i // 4 + 1}"}))
    plan.append(("chat", {}))
    return plan


LONG_SESSION_ROUNDS = 32
LONG_SESSION_LOG_ROUNDS = (5, 14)
EXAMPLE_PLANS.append({"cwd": ORBIT_CWD, "model": 0, "plan": _long_session_plan()})


def generate_example_agent_dir(out: str | Path, *, seed: int = EXAMPLE_SEED) -> list[Path]:
    """The agent dir shipped in ``fabric_lsp/examples/agent`` (7 sessions, 2 projects; the
    last one is long enough to compact at Pi's defaults)."""
    out = Path(out)
    t = _EPOCH_2026 + 300 * 86400_000 + 9 * 3600_000  # 2026-10-28T09:00Z
    written: list[Path] = []
    for i, spec in enumerate(EXAMPLE_PLANS):
        t += (i + 1) * 5_400_000 + 1234 * i
        d = out / "sessions" / encode_cwd(spec["cwd"])
        d.mkdir(parents=True, exist_ok=True)
        parent = None
        if "fork" in spec:
            p = written[spec["fork"]]
            parent = f"/home/user/.pi/agent/sessions/{p.parent.name}/{p.name}"
        written.append(
            generate_session(
                d,
                target_bytes=0,
                seed=f"{seed}/{i}",
                cwd=spec["cwd"],
                start_ms=t,
                plan=spec["plan"],
                parent_session=parent,
                model_index=spec["model"],
            )
        )
    return written


# --------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="agent dir to write (sessions/ is created inside)")
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--target-bytes", type=int, default=200_000_000, help="total size over all sessions")
    ap.add_argument("--seed", default="0")
    ap.add_argument("--example", action="store_true", help="write the embedded example agent dir instead")
    ap.add_argument("--single", metavar="CWD", help="write ONE session of --target-bytes for CWD")
    ap.add_argument("--tiny", action="store_true", help="with --single: a session of many small (~100-byte) entries")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.example:
        files = generate_example_agent_dir(args.out)
    elif args.single:
        d = Path(args.out) / "sessions" / encode_cwd(args.single)
        d.mkdir(parents=True, exist_ok=True)
        gen = generate_tiny_session if args.tiny else generate_session
        files = [gen(d, target_bytes=args.target_bytes, seed=args.seed, cwd=args.single)]
    else:
        if args.sessions < 1 or args.target_bytes < 0:
            ap.error("--sessions must be >= 1 and --target-bytes >= 0")
        files = generate_agent_dir(args.out, sessions=args.sessions, target_bytes=args.target_bytes, seed=args.seed)
    total = sum(f.stat().st_size for f in files)
    dt = time.perf_counter() - t0
    print(
        f"wrote {len(files)} session(s), {total} bytes ({total / 1e6:.1f} MB) in {dt:.2f}s under {args.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
