"""The corpus generator (bench/corpus.py) and the embedded example agent dir.

* determinism: same arguments → byte-identical files; the shipped example equals a fresh
  regeneration byte for byte (run ``scripts/gen-examples`` after changing the generator);
* validity: every file is what Pi 0.80 would write (checks.py, written from the real-Pi
  fixtures, independent of the generator), and the session engine reads it as Pi does;
* the example covers the features other areas test against.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_lsp.engine.session import (
    SessionTree,
    build_context_messages,
    encode_cwd,
    list_session_files,
    read_session,
)
from fabric_lsp.engine.session import (
    js_number as engine_js_number,
)
from fabric_lsp.examples import example_agent_dir, example_session_dir
from tests.engine.corpus.checks import check_session_file, load_corpus_module
from tests.support.examples import profile_examples

corpus = load_corpus_module()

ORBIT = "/home/user/projects/orbit"
LEDGER = "/home/user/projects/ledger"


def _files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.jsonl"))


def _same_tree(a: Path, b: Path) -> None:
    fa = [p.relative_to(a) for p in _files(a)]
    fb = [p.relative_to(b) for p in _files(b)]
    assert fa == fb
    for rel in fa:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), f"{rel} differs"


# --------------------------------------------------------------------------- determinism


def test_example_dir_is_exactly_what_the_generator_writes(tmp_path):
    corpus.generate_example_agent_dir(tmp_path / "agent")
    _same_tree(example_agent_dir() / "sessions", tmp_path / "agent" / "sessions")


def test_generate_agent_dir_is_deterministic_and_seed_sensitive(tmp_path):
    a = corpus.generate_agent_dir(tmp_path / "a", sessions=5, target_bytes=250_000, seed=11)
    b = corpus.generate_agent_dir(tmp_path / "b", sessions=5, target_bytes=250_000, seed=11)
    c = corpus.generate_agent_dir(tmp_path / "c", sessions=5, target_bytes=250_000, seed=12)
    _same_tree(tmp_path / "a", tmp_path / "b")
    assert [p.name for p in a] == [p.name for p in b]
    assert [p.read_bytes() for p in a] != [p.read_bytes() for p in c]


def test_generate_session_writes_pi_name_in_a_directory_and_exact_path_otherwise(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    p1 = corpus.generate_session(d, target_bytes=20_000, seed="x", cwd=ORBIT)
    p2 = corpus.generate_session(tmp_path / "exact.jsonl", target_bytes=20_000, seed="x", cwd=ORBIT)
    assert p1.parent == d and p1.name.endswith(".jsonl") and "_" in p1.name
    assert p2 == tmp_path / "exact.jsonl"
    assert p1.read_bytes() == p2.read_bytes()
    header = json.loads(p1.read_bytes().split(b"\n", 1)[0])
    assert p1.name == header["timestamp"].replace(":", "-").replace(".", "-") + "_" + header["id"] + ".jsonl"


def test_cli_matches_the_library(tmp_path):
    assert (
        corpus.main(["--out", str(tmp_path / "cli"), "--sessions", "3", "--target-bytes", "90000", "--seed", "5"]) == 0
    )
    corpus.generate_agent_dir(tmp_path / "lib", sessions=3, target_bytes=90_000, seed="5")
    _same_tree(tmp_path / "cli", tmp_path / "lib")


# --------------------------------------------------------------------------- validity


def _engine_agrees(path: Path, summary) -> None:
    log = read_session(path)
    assert log.is_session
    assert log.header == summary.header
    st_ = log.stats
    assert len(log.records) == len(summary.entries)
    assert all(r.valid for r in log.records)
    assert log.size == path.stat().st_size
    tree = SessionTree.from_records(log.records)
    assert tree.leaf_id == summary.leaf_id
    branch = tree.branch()
    assert branch.error is None
    assert branch.ids == summary.active_path
    # Pi's context view builds without surprises: a compaction's firstKeptEntryId is found
    raws = [r.raw for r in branch.entries]
    msgs = build_context_messages(raws)
    assert msgs, "empty context"
    assert st_ is not None


def test_example_sessions_are_valid_and_read_as_pi_reads_them():
    files = _files(example_session_dir())
    assert len(files) >= 6
    for f in files:
        s = check_session_file(f, js_number=corpus.js_number)
        assert f.parent.name == encode_cwd(s.header["cwd"])
        _engine_agrees(f, s)


def test_generated_agent_dir_is_valid(tmp_path):
    files = corpus.generate_agent_dir(tmp_path, sessions=8, target_bytes=1_200_000, seed="validity")
    assert {f.parent.name for f in files} >= {encode_cwd(ORBIT), encode_cwd(LEDGER)}
    listed = list_session_files(str(tmp_path / "sessions"))
    assert sorted(map(str, files)) == sorted(map(str, listed))
    ids = set()
    for f in files:
        s = check_session_file(f, js_number=corpus.js_number)
        assert f.parent.name == encode_cwd(s.header["cwd"])
        assert s.header["id"] not in ids
        ids.add(s.header["id"])
        _engine_agrees(f, s)


def test_large_session_has_compactions_branches_and_truncated_output(tmp_path):
    f = corpus.generate_session(tmp_path, target_bytes=3_000_000, seed="big", cwd=LEDGER)
    size = f.stat().st_size
    assert 3_000_000 <= size < 3_600_000
    s = check_session_file(f, js_number=corpus.js_number)
    assert {"compaction_pi", "truncation_bash", "truncation_read", "branch", "provider_error"} <= s.features
    _engine_agrees(f, s)


@settings(max_examples=profile_examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**32),
    size=st.integers(0, 80_000),
    cwd=st.sampled_from([ORBIT, LEDGER, "/home/user/projects/atlas", "/srv/x:y/z w"]),
)
def test_any_seed_gives_a_valid_session(tmp_path, seed, size, cwd):
    f = corpus.generate_session(tmp_path / f"{seed}-{size}.jsonl", target_bytes=size, seed=seed, cwd=cwd)
    data = f.read_bytes()
    assert data.endswith(b"\n")
    # the file is named by the caller here; check everything else
    named, s = _check_ignoring_name(f)
    assert s.header["cwd"] == cwd
    assert len(data) >= size
    _engine_agrees(named, s)


def _check_ignoring_name(f: Path):
    header = json.loads(f.read_bytes().split(b"\n", 1)[0])
    named = f.with_name(header["timestamp"].replace(":", "-").replace(".", "-") + "_" + header["id"] + ".jsonl")
    f.replace(named)
    return named, check_session_file(named, js_number=corpus.js_number)


# --------------------------------------------------------------------------- example features


def test_example_covers_the_features_other_areas_rely_on():
    files = _files(example_session_dir())
    features: set[str] = set()
    cwds = set()
    for f in files:
        s = check_session_file(f)
        features |= s.features
        cwds.add(s.header["cwd"])
    assert cwds == {ORBIT, LEDGER}
    need = {
        "branch",
        "branch_summary",
        "label",
        "label_clear",
        "session_info",
        "model_change_mid_session",
        "provider_error",
        "tool_error",
        "truncation_bash",
        "truncation_read",
        "compaction_pi",
        "compaction_hook",
        "compaction_fabric_details",
        "split_turn",
        "compaction_replay",
        "bash_execution",
        "bash_execution_excluded",
        "custom_message",
        "image",
        "fabric_trace",
        "astral",
        "cjk",
        "combining",
        "tool_read",
        "tool_edit",
        "tool_write",
        "tool_bash",
        "tool_grep",
        "tool_find",
        "tool_ls",
    }
    assert need <= features, f"missing: {sorted(need - features)}"
    total = sum(f.stat().st_size for f in files)
    assert len(files) == 7
    assert 100_000 <= total <= 2_000_000  # the long session is ~1.2 MB; the package stays small
    # one session was forked from another (header parentSession names a file of the example)
    parents = [json.loads(f.read_bytes().split(b"\n", 1)[0]).get("parentSession") for f in files]
    forked = [p for p in parents if p]
    assert len(forked) == 1 and any(forked[0].endswith(f.name) for f in files)


def test_tool_results_make_sense_for_their_calls():
    """read shows the file as the edits left it; edit's oldText was in the file; grep lines exist."""
    for f in _files(example_session_dir()):
        files: dict[str, str] = {}
        calls: dict[str, tuple[str, dict]] = {}
        for line in f.read_bytes().split(b"\n")[1:-1]:
            e = json.loads(line)
            if e["type"] != "message":
                continue
            m = e["message"]
            if m["role"] == "assistant":
                for part in m["content"]:
                    if part["type"] == "toolCall":
                        calls[part["id"]] = (part["name"], part["arguments"])
            elif m["role"] == "toolResult" and not m["isError"]:
                name, args = calls[m["toolCallId"]]
                text = m["content"][0]["text"]
                if name == "read" and "truncation" not in (m.get("details") or {}) and "offset" not in args:
                    if args["path"] in files:
                        assert files[args["path"]] == text, f"{f.name}: stale read of {args['path']}"
                    files[args["path"]] = text
                elif name == "edit" and args["path"] in files:
                    for ed in args["edits"]:
                        assert files[args["path"]].count(ed["oldText"]) == 1
                        files[args["path"]] = files[args["path"]].replace(ed["oldText"], ed["newText"])
                elif name == "write":
                    files[args["path"]] = args["content"]
                    assert text == f"Successfully wrote {len(args['content'].encode())} bytes to {args['path']}"
                elif name == "grep":
                    for hit in text.split("\n"):
                        path, lineno, body = hit.split(":", 2)
                        if path in files:
                            assert files[path].split("\n")[int(lineno) - 1] == body[1:]


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    "value,expected",
    [
        (0.1, "0.1"),
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (123.0, "123"),
        (8.2e-05, "0.000082"),
        (9.960000000000001e-05, "0.00009960000000000001"),
        (1e-6, "0.000001"),
        (2.5e25, "2.5e+25"),
        (-0.5, "-0.5"),
        (1e20, "100000000000000000000"),
        (0.30000000000000004, "0.30000000000000004"),
        (5e-324, "5e-324"),
        (7, "7"),
    ],
)
def test_js_number_known_values(value, expected):
    assert corpus.js_number(value) == expected


@settings(max_examples=profile_examples(300))
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_js_number_round_trips_and_agrees_with_the_engine(x):
    s = corpus.js_number(x)
    assert float(s) == x or (x == 0 and float(s) == 0)
    assert s == engine_js_number(x)
    if x != 0 and 1e-6 <= abs(x) < 1e21:
        assert "e" not in s
    elif x != 0:
        assert "e" in s and not math.isnan(float(s))


def test_encode_cwd_matches_the_engine():
    for cwd in (ORBIT, "/srv/x:y/z w", "/a\\b/c", "/"):
        assert corpus.encode_cwd(cwd) == encode_cwd(cwd)


def test_uuid7_shape_and_time_order():
    from random import Random

    r = Random(1)
    ids = [corpus.uuid7(ms, r) for ms in (1_700_000_000_000, 1_700_000_000_001, 1_800_000_000_000)]
    assert ids == sorted(ids)
    for i in ids:
        assert len(i) == 36 and i[14] == "7" and i[19] in "89ab"


def test_tiny_png_is_a_png():
    import base64
    import zlib
    from random import Random

    data = base64.b64decode(corpus.tiny_png(Random(3)))
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    # every chunk's CRC is right
    pos = 8
    while pos < len(data):
        n = int.from_bytes(data[pos : pos + 4], "big")
        tag_data = data[pos + 4 : pos + 8 + n]
        assert zlib.crc32(tag_data) == int.from_bytes(data[pos + 8 + n : pos + 12 + n], "big")
        pos += 12 + n
    assert pos == len(data)
    n = int.from_bytes(data[33:37], "big")
    pixels = zlib.decompress(data[41 : 41 + n])
    assert len(pixels) == 8 * (1 + 8 * 3)


def test_cli_single_and_example_modes(tmp_path):
    assert (
        corpus.main(["--out", str(tmp_path / "one"), "--single", LEDGER, "--target-bytes", "40000", "--seed", "9"]) == 0
    )
    (f,) = _files(tmp_path / "one")
    assert f.parent.name == encode_cwd(LEDGER) and f.stat().st_size >= 40_000
    assert corpus.main(["--out", str(tmp_path / "ex"), "--example"]) == 0
    _same_tree(tmp_path / "ex" / "sessions", example_session_dir())


def test_session_read_benchmark_runs_on_a_small_session(tmp_path, capsys):
    """Smoke run of bench/bench_session_read.py (figures are printed, never asserted)."""
    import importlib.util
    import sys

    from tests.engine.corpus.checks import ROOT

    spec = importlib.util.spec_from_file_location("fabric_bench_session_read", ROOT / "bench" / "bench_session_read.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    assert mod.main(["--size", "150000", "--rounds", "1", "--keep", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for needle in ("msgspec decode per line", "json.loads per line", "read_session", "peak RSS", "x file size"):
        assert needle in out


def test_file_mtime_is_the_last_append_time(tmp_path):
    f = corpus.generate_session(tmp_path, target_bytes=30_000, seed=4, cwd=ORBIT)
    last = json.loads(f.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[1])["timestamp"]
    from tests.engine.corpus.checks import _iso_ms

    assert abs(f.stat().st_mtime_ns // 1_000_000 - _iso_ms(last)) <= 60_000


def test_copy_example_agent_dir(tmp_path):
    from fabric_lsp.examples import copy_example_agent_dir

    dest = copy_example_agent_dir(tmp_path / "agent")
    _same_tree(dest / "sessions", example_session_dir())


def test_the_long_example_session_compacts_at_pi_defaults():
    """`fabric-lsp preview 01a18ac0` (the first-run path) shows a real compaction: Pi's
    defaults keepRecentTokens 20000, reserveTokens 16384, contextWindow 200000."""
    from fabric_lsp.engine.session import resolve_session

    path = Path(resolve_session("01a18ac0", str(example_session_dir())))
    s = check_session_file(path, js_number=corpus.js_number)
    assert s.header["cwd"] == ORBIT
    log = read_session(path)
    branch = SessionTree.from_records(log.records).branch()
    assert not any(e.raw.get("type") == "compaction" for e in branch.entries)
    first_ts = json.loads(path.read_bytes().split(b"\n", 1)[0])["timestamp"]
    last_ts = json.loads(path.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[1])["timestamp"]
    from tests.engine.corpus.checks import _iso_ms

    assert _iso_ms(last_ts) - _iso_ms(first_ts) >= 3 * 3600_000  # a multi-hour session
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "fabric_lsp", "preview", "--json", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["outcome"] == "compacted", result.get("reason")
    assert 120_000 <= result["tokensBefore"] < 200_000 - 16384  # under Pi's auto-compaction threshold
    assert result["firstKeptEntryId"] and len(result["summary"]) > 2000
