"""Property-based fuzzing of everything that decodes hostile bytes: the session reader,
memory's line scan + record normalizer (through `build_state`, including what would be
written to the cache), the compaction loader/preview, the typed-instruction decoder and
the wire-params decoder (plus the memory engine behind it).

No exception may escape (other than the documented ValueError → InvalidParams path), and
every malformed line is accounted for in the reader's coverage. The CI run uses a small
number of examples per property; `bench/reliability/fuzz_long.py` runs the same
properties with FABRIC_FUZZ_EXAMPLES set (≥ 100k examples in total) and prints counts.
"""

from __future__ import annotations

import atexit
import io
import json
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
from fuzz_strategies import (
    OUTPUT_SECRET,
    THINKING_SECRET,
    TYPED_PREFIX,
    json_values,
    pi_chain_sessions,
    session_files,
    typed_payloads,
    wire_params,
    wire_params_for,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_lsp import protocol
from fabric_lsp.engine.compaction.api import preview_compaction
from fabric_lsp.engine.compaction.instructions import decode_instructions, encode_compaction_request
from fabric_lsp.engine.memory.api import MemoryConfig, MemoryEngine
from fabric_lsp.engine.memory.entry_text import Normalizer
from fabric_lsp.engine.memory.state_build import build_state
from fabric_lsp.engine.session import iter_session, parse_session_bytes
from tests.support.examples import profile_examples
from tests.support.wire import WireMemoryEngine

# Totals over every example run in this process (printed by bench/reliability/fuzz_long.py).
COUNTS: Counter[str] = Counter()

_N = int(os.environ.get("FABRIC_FUZZ_EXAMPLES", "0") or 0)


def _settings(default: int, heavy: bool = False) -> settings:
    """CI: `default` examples. Long runs: FABRIC_FUZZ_EXAMPLES (a quarter for heavy properties
    that build whole indexes or previews per example)."""
    return settings(
        max_examples=(max(1, _N // 4) if heavy else _N) if _N else profile_examples(default),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        derandomize=not _N,  # CI: the same examples every run; long runs: fresh ones
    )


MAX_LINE = 512

_TMP = Path(tempfile.mkdtemp(prefix="fabric-fuzz-"))
atexit.register(shutil.rmtree, _TMP, True)


# ------------------------------------------------------------------- the JSON.parse oracle


def _no_constants(name: str) -> Any:
    raise ValueError(name)


def js_parse(line: bytes) -> tuple[bool, Any]:
    """JSON.parse of one line as Node reads a UTF-8 file (oracle, stdlib only)."""
    try:
        return True, json.loads(line.decode("utf-8", "replace"), parse_constant=_no_constants)
    except (ValueError, RecursionError):
        return False, None


def classify(data: bytes, max_line: int) -> tuple[list[tuple[str, int, int, Any]], int]:
    """(per complete line: kind, offset, length, value), bytes of the trailing partial line."""
    out = []
    pos = 0
    seen_first = False
    while True:
        nl = data.find(b"\n", pos)
        if nl < 0:
            break
        content = data[pos:nl]
        length = nl - pos + 1
        if len(content) > max_line:
            kind, value = "oversize", None
        elif not content.strip():
            kind, value = "blank", None
        else:
            ok, value = js_parse(content)
            if not ok:
                kind = "malformed"
            elif (
                not seen_first
                and isinstance(value, dict)
                and value.get("type") == "session"
                and isinstance(value.get("id"), str)
            ):
                kind = "header"
                seen_first = True
            else:
                seen_first = True
                kind = "entry" if isinstance(value, dict) else "non_object"
        out.append((kind, pos, length, value))
        pos = nl + 1
    return out, len(data) - pos


def _same_json(a: Any, b: Any) -> bool:
    return json.dumps(a) == json.dumps(b)


# ------------------------------------------------------------------- session reader


@_settings(300)
@given(data=session_files(MAX_LINE), chunk=st.integers(1, 97))
def test_session_reader_accounts_for_every_line(data: bytes, chunk: int) -> None:
    log = parse_session_bytes(data, max_line_bytes=MAX_LINE)
    st_ = log.stats
    lines, tail = classify(data, MAX_LINE)
    kinds = Counter(k for k, *_ in lines)
    # every complete line is counted exactly once, by what became of it
    assert st_.lines == len(lines) == data.count(b"\n")
    assert st_.lines == st_.header + st_.entries + st_.blank + st_.malformed + st_.oversize + st_.non_object
    assert (st_.header, st_.entries, st_.blank, st_.malformed, st_.oversize, st_.non_object) == (
        kinds["header"],
        kinds["entry"],
        kinds["blank"],
        kinds["malformed"],
        kinds["oversize"],
        kinds["non_object"],
    ), (st_, kinds)
    assert st_.partial_tail_bytes == tail
    assert log.size == st_.complete_bytes == len(data) - tail
    assert log.is_session == (kinds["header"] == 1)
    # records are the entry lines, in order, with exact positions and values
    entries = [(o, n, v) for k, o, n, v in lines if k == "entry"]
    assert len(log.records) == len(entries)
    ordinal = 0
    parsed_ordinals = {}
    for k, o, _n, _v in lines:
        if k in ("entry", "non_object"):
            parsed_ordinals[o] = ordinal
            ordinal += 1
    for rec, (o, n, v) in zip(log.records, entries):
        assert (rec.offset, rec.length) == (o, n)
        assert data[rec.offset + rec.length - 1 : rec.offset + rec.length] == b"\n"
        assert rec.ordinal == parsed_ordinals[o]
        assert _same_json(rec.raw, v)
        # a tree node: string id, and parentId present and null or a string
        assert rec.valid == (
            isinstance(v.get("id"), str)
            and "parentId" in v
            and (v["parentId"] is None or isinstance(v["parentId"], str))
        )
    # chunk boundaries never change the outcome
    chunked = list(iter_session(io.BytesIO(data), max_line_bytes=MAX_LINE, chunk_size=chunk))
    recs = [r for r in chunked if not isinstance(r, dict)]
    assert [(r.offset, r.length, r.ordinal) for r in recs] == [(r.offset, r.length, r.ordinal) for r in log.records]
    COUNTS["reader.examples"] += 1
    for name in ("lines", "entries", "blank", "malformed", "oversize", "non_object", "no_id"):
        COUNTS[f"reader.{name}"] += getattr(st_, name)
    COUNTS["reader.partial_tails"] += 1 if tail else 0


# ------------------------------------------------------------------- memory scan + normalizer


def _persisted_texts(state: Any) -> bytes:
    return state.persisted or b""


@_settings(150, heavy=True)
@given(
    data=session_files(MAX_LINE) | pi_chain_sessions(),
    tier=st.sampled_from(["hot", "cold"]),
    branches=st.sampled_from(["active", "all"]),
    max_chars=st.integers(100, 400),
    thinking=st.booleans(),
    output=st.booleans(),
)
def test_memory_build_never_raises_and_keeps_privacy(data, tier, branches, max_chars, thinking, output) -> None:
    path = _TMP / "fuzz-memory.jsonl"
    path.write_bytes(data)
    cfg = MemoryConfig(max_entry_chars=max_chars, index_thinking=thinking, index_tool_output=output)
    state = build_state(str(path), branches, tier, cfg, ref_id="fallback-id", ref_cwd="/cwd")
    lines = data.split(b"\n")
    complete = data.count(b"\n")
    if tier == "hot":
        entries = state.entries or []
        assert [e["index"] for e in entries] == list(range(len(entries)))
        for e in entries:
            assert isinstance(e["text"], str) and len(e["text"]) <= max_chars
            assert 0 <= e["line"] <= complete  # the last, unterminated line is parsed like the reference
            assert lines[e["line"]].strip()
            if e["truncated"]:
                assert "max_entry_chars" in state.coverage["reasons"]
        assert state.coverage["complete"] == (not state.coverage["reasons"])
        COUNTS["memory.records"] += len(entries)
    else:
        assert state.digest is not None and state.digest["entryCount"] >= 0
    blob = _persisted_texts(state)
    if tier == "hot" or state.persisted:
        msgspec.json.decode(blob)  # what goes to disk is one complete JSON document
    if not thinking:
        assert THINKING_SECRET.encode() not in blob
    if not output:
        assert OUTPUT_SECRET.encode() not in blob
    COUNTS["memory.examples"] += 1
    COUNTS["memory.secrets_planted"] += data.count(THINKING_SECRET.encode()) + data.count(OUTPUT_SECRET.encode())


@_settings(300)
@given(
    raw=json_values | st.dictionaries(st.sampled_from(["type", "id", "message", "summary", "details"]), json_values),
    line=st.integers(0, 10**6),
)
def test_normalizer_feed_takes_any_json_value(raw: Any, line: int) -> None:
    norm = Normalizer("/s.jsonl", "sid", max_entry_chars=100, index_thinking=False, index_tool_output=False)
    out = norm.feed(raw, line)
    assert isinstance(out, list)
    for rec in out:
        assert rec["line"] == line and len(rec["text"]) <= 100
    COUNTS["normalizer.examples"] += 1


# ------------------------------------------------------------------- compaction loader / preview


@_settings(60, heavy=True)
@given(
    data=session_files(MAX_LINE) | pi_chain_sessions(),
    ratio=st.floats(0.25, 0.85),
    window=st.integers(0, 300_000),
    keep=st.integers(0, 50_000),
    leaf=st.none() | st.sampled_from(["a1", "b2", "dup", "missing"]),
)
def test_compaction_preview_on_hostile_sessions(data, ratio, window, keep, leaf) -> None:
    try:
        result = preview_compaction(
            data,
            session_path="/tmp/x.jsonl",
            context_window=window,
            keep_recent_tokens=keep,
            target_context_ratio=ratio,
            leaf_id=leaf,
        )
    except Exception as err:  # only the engine's own, typed error is allowed
        assert type(err).__name__ == "PreviewError", repr(err)
        COUNTS["preview.errors"] += 1
        return
    assert result["outcome"] in ("compacted", "cancelled", "skipped")
    json.dumps(result)  # what the server sends (ASCII-escaped JSON)
    COUNTS[f"preview.{result['outcome']}"] += 1


# ------------------------------------------------------------------- typed instructions

CODES = {
    "encoded-source-too-large",
    "malformed-json",
    "invalid-unicode",
    "structure-too-complex",
    "invalid-object",
    "unknown-field",
    "duplicate-field",
    "unsupported-version",
    "invalid-type",
    "preserve-too-many",
    "instructions-too-large",
    "preserve-item-too-large",
}


def _depth(v: Any) -> int:
    if isinstance(v, list):
        return 1 + max((_depth(x) for x in v), default=0)
    if isinstance(v, dict):
        return 1 + max((_depth(x) for x in v.values()), default=0)
    return 0


def _nodes(v: Any) -> int:
    if isinstance(v, list):
        return 1 + sum(_nodes(x) for x in v)
    if isinstance(v, dict):
        return 1 + sum(_nodes(x) for x in v.values())
    return 1


def _no_dups(pairs: list) -> dict:
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key")
    return dict(pairs)


@_settings(600)
@given(source=typed_payloads() | st.text(max_size=80) | st.none())
def test_typed_instruction_decoder_fails_closed(source: Any) -> None:
    out = decode_instructions(source)
    assert out == decode_instructions(source)  # deterministic
    if out["ok"]:
        assert isinstance(out["requestLines"], list) and all(isinstance(x, str) for x in out["requestLines"])
        COUNTS["instructions.ok"] += 1
    else:
        assert out["error"]["code"] in CODES and isinstance(out["error"]["message"], str)
        COUNTS["instructions.rejected"] += 1
        COUNTS[f"instructions.{out['error']['code']}"] += 1
    if isinstance(source, str) and source.startswith(TYPED_PREFIX) and out["ok"]:
        # accepted ⇒ strict JSON (no duplicates, no NaN) within the structural limits
        value = json.loads(source[len(TYPED_PREFIX) :], object_pairs_hook=_no_dups, parse_constant=_no_constants)
        assert isinstance(value, dict) and set(value) <= {"version", "instructions", "preserve"}
        assert value["version"] == 1 and not isinstance(value["version"], bool)
        assert _depth(value) <= 32 and _nodes(value) <= 4096


@_settings(300)
@given(instructions=st.none() | st.text(max_size=300), preserve=st.none() | st.lists(st.text(max_size=60), max_size=16))
def test_typed_instruction_round_trip(instructions, preserve) -> None:
    try:
        encoded = encode_compaction_request(instructions, preserve)
    except ValueError:
        COUNTS["instructions.encode_rejected"] += 1
        return
    out = decode_instructions(encoded)
    assert out["ok"], out
    assert out["policy"]["mode"] == "typed-v1"
    assert out["policy"]["preserveCount"] == len(preserve or [])
    COUNTS["instructions.round_trips"] += 1


# ------------------------------------------------------------------- wire params (+ engines)


@_settings(800)
@given(method=st.sampled_from(sorted(protocol.PARAMS_TYPES)), params=wire_params())
def test_wire_params_decode_or_name_the_problem(method: str, params: Any) -> None:
    try:
        decoded = protocol.decode_params(method, params)
    except protocol.InvalidParams as err:
        assert str(err).startswith(method + ":"), str(err)
        COUNTS["wire.rejected"] += 1
        return
    assert isinstance(decoded, protocol.PARAMS_TYPES[method])
    wire = protocol.params_json(decoded)
    # decoding what we would send gives the same params (the strict decoder is a fixed point)
    assert protocol.decode_params(method, wire) == msgspec.structs.replace(decoded, work_done_token=None)
    COUNTS["wire.accepted"] += 1


_ENGINE: dict[str, Any] = {}


def _memory_engine() -> tuple[MemoryEngine, list[str]]:
    if not _ENGINE:
        from reliability_kit import example_agent
        from reliability_kit import session_files as files

        agent = example_agent(_TMP / "agent")
        _ENGINE["engine"] = WireMemoryEngine(MemoryConfig(regex_timeout_ms=200), agent_dir=str(agent))
        _ENGINE["files"] = [str(p) for p in files(agent)]
    return _ENGINE["engine"], _ENGINE["files"]


@_settings(120, heavy=True)
@given(
    data=st.data(),
    method=st.sampled_from([protocol.RECALL, protocol.EXPAND, protocol.SESSIONS]),
    pick=st.integers(0, 5),
    use_file=st.booleans(),
)
def test_memory_engine_behind_the_wire_decoder(data: Any, method: str, pick: int, use_file: bool) -> None:
    engine, files = _memory_engine()
    mostly_valid = data.draw(st.integers(0, 3), label="mostly_valid") > 0
    params = data.draw(wire_params_for(method) if mostly_valid else wire_params(), label="params")
    if isinstance(params, dict):
        if method == protocol.EXPAND and (use_file or params.get("session") == "placeholder"):
            params["session"] = files[pick % len(files)]
        elif method == protocol.RECALL and use_file:
            params["scope"] = "session:" + files[pick % len(files)]
    try:
        decoded = protocol.decode_params(method, params)
    except protocol.InvalidParams:
        COUNTS["engine.rejected_by_decoder"] += 1
        return
    call = {protocol.RECALL: engine.recall, protocol.EXPAND: engine.expand, protocol.SESSIONS: engine.sessions}[method]
    try:
        result = call(decoded, cwd="/home/user/projects/orbit")
    except ValueError:  # the server answers these as InvalidParams
        COUNTS["engine.invalid_params"] += 1
        return
    json.dumps(result)  # what the server sends (ASCII-escaped JSON)
    if method == protocol.EXPAND and "error" in result:
        assert set(result) == {"error"}  # no source text with an error
        COUNTS[f"engine.expand.{result['error']['code']}"] += 1
    else:
        COUNTS[f"engine.{method}.ok"] += 1


def test_unhashable_entry_type_does_not_break_memory(tmp_path) -> None:
    """Found by the fuzzer (fixed in 2ee1b05): a line whose "type" is an array or object
    made every recall/sessions/expand over its scope fail with -32603."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"type":"session","version":3,"id":"s","cwd":"/w"}\n{"type":[]}\n{"type":{"a":1}}\n')
    state = build_state(str(path), "all", "hot", MemoryConfig(), ref_id="s", ref_cwd="/w")
    assert state.entries == []
