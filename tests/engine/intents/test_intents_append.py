"""Append safety: one complete line, every earlier byte unchanged, never torn or interleaved."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
from intents_kit import REAL_SESSIONS

from fabric_lsp.engine.intents.commit import (
    TORN_TAIL_QUIET_S,
    Appended,
    Changed,
    append_line,
    compaction_entry,
    entry_line,
    iso_timestamp,
    new_entry_id,
)
from fabric_lsp.engine.intents.controller import Failed


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_entry_line_has_pi_key_order_and_raw_utf8():
    entry = compaction_entry(
        entry_id="0a1b2c3d",
        parent_id="d3b9c871",
        timestamp="2026-11-30T04:00:00.123Z",
        summary='Ziel: 界 😀 "q"\n',
        first_kept_entry_id="abc",
        tokens_before=42,
        details={"version": 2},
    )
    raw = entry_line(entry)
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    assert "界 😀".encode() in raw
    obj = json.loads(raw)
    assert list(obj) == [
        "type",
        "id",
        "parentId",
        "timestamp",
        "summary",
        "firstKeptEntryId",
        "tokensBefore",
        "details",
        "fromHook",
    ]
    assert obj["fromHook"] is True
    assert "details" not in json.loads(
        entry_line(
            compaction_entry(
                entry_id="x",
                parent_id=None,
                timestamp="t",
                summary="s",
                first_kept_entry_id="",
                tokens_before=0,
                details=None,
            )
        )
    )
    lone = entry_line(
        compaction_entry(
            entry_id="x",
            parent_id=None,
            timestamp="t",
            summary="a\ud800b",
            first_kept_entry_id="",
            tokens_before=0,
            details=None,
        )
    )
    assert b"\\ud800" in lone  # escaped as JSON.stringify does, so the line stays valid UTF-8


def test_iso_timestamp_and_ids():
    assert iso_timestamp(0) == "1970-01-01T00:00:00.000Z"
    assert iso_timestamp(1796011200123) == "2026-11-30T04:00:00.123Z"
    taken = {f"{i:08x}" for i in range(100)}
    for _ in range(50):
        eid = new_entry_id(taken)
        assert len(eid) == 8 and int(eid, 16) >= 0 and eid not in taken


def test_append_keeps_every_earlier_byte(tmp_path):
    path = tmp_path / "s.jsonl"
    original = (REAL_SESSIONS / "03-rpc-all-entry-types-branch-compaction.jsonl").read_bytes()
    path.write_bytes(original)
    result = append_line(str(path), b'{"type":"x"}\n', expected_size=len(original), expected_sha256=sha(original))
    assert result == Appended(offset=len(original), length=13)
    assert path.read_bytes() == original + b'{"type":"x"}\n'


def test_changed_file_is_never_written(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a":1}\n')
    before = path.read_bytes()
    assert isinstance(append_line(str(path), b"{}\n", expected_size=5, expected_sha256=sha(before)), Changed)
    same_size = b'{"a":2}\n'
    assert isinstance(
        append_line(str(path), b"{}\n", expected_size=len(same_size), expected_sha256=sha(same_size)), Changed
    )
    assert path.read_bytes() == before


def test_missing_final_newline_gets_a_separator(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a":1}\n{"half"')
    old = time.time() - 60  # torn for good: a writer died a minute ago
    os.utime(path, (old, old))
    data = path.read_bytes()
    result = append_line(str(path), b'{"b":2}\n', expected_size=len(data), expected_sha256=sha(data))
    assert result == Appended(offset=len(data) + 1, length=9)
    assert path.read_bytes() == data + b'\n{"b":2}\n'


def test_a_fresh_unterminated_tail_may_be_a_write_in_progress_and_is_left_alone(tmp_path):
    # Linux lets a reader see part of a write; the rest of that line lands before ours, so a
    # separator decided on the partial view would leave an empty line. Nothing is written.
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a":1}\n{"half"')
    data = path.read_bytes()
    result = append_line(str(path), b'{"b":2}\n', expected_size=len(data), expected_sha256=sha(data))
    assert isinstance(result, Changed) and "mid-line" in result.why
    assert path.read_bytes() == data
    quiet = time.time() - TORN_TAIL_QUIET_S - 0.5
    os.utime(path, (quiet, quiet))  # quiet for longer than the bound: torn for good
    assert append_line(str(path), b'{"b":2}\n', expected_size=len(data), expected_sha256=sha(data)) == Appended(
        offset=len(data) + 1, length=9
    )


def test_veto_under_the_lock_writes_nothing(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"{}\n")
    veto = Failed("no")
    assert (
        append_line(str(path), b"{}\n", expected_size=3, expected_sha256=sha(b"{}\n"), before_write=lambda off: veto)
        is veto
    )
    assert path.read_bytes() == b"{}\n"


def test_rejects_non_lines_and_never_creates(tmp_path):
    with pytest.raises(ValueError):
        append_line(str(tmp_path / "x"), b"{}", expected_size=0, expected_sha256=sha(b""))
    with pytest.raises(ValueError):
        append_line(str(tmp_path / "x"), b"{}\n{}\n", expected_size=0, expected_sha256=sha(b""))
    with pytest.raises(FileNotFoundError):
        append_line(str(tmp_path / "x"), b"{}\n", expected_size=0, expected_sha256=sha(b""))
    assert not (tmp_path / "x").exists()


WRITER = textwrap.dedent(
    """
    import json, os, random, sys, time
    path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rnd = random.Random(tag)
    for i in range(n):
        body = {"type": "message", "id": f"{tag}{i:06d}", "pad": "w" * rnd.randrange(10, 600)}
        data = (json.dumps(body, separators=(",", ":")) + "\\n").encode()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)   # how Pi appends: one write per line
        os.write(fd, data)
        os.close(fd)
        if rnd.random() < 0.3:
            time.sleep(rnd.random() * 0.002)
    """
)


@pytest.mark.slow
def test_concurrent_writers_never_tear_or_interleave_lines(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"type":"session","version":3,"id":"x","timestamp":"t","cwd":"/"}\n')
    prefix = path.read_bytes()
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    per_writer = 4000
    writers = [subprocess.Popen([sys.executable, str(script), str(path), tag, str(per_writer)]) for tag in ("a", "b")]
    ours: list[bytes] = []
    attempts = changed = 0
    try:
        while any(w.poll() is None for w in writers) or attempts < 500:
            attempts += 1
            data = path.read_bytes()
            line = entry_line({"type": "compaction", "id": f"c{attempts:07d}", "summary": "s" * (attempts % 97 * 40)})
            result = append_line(str(path), line, expected_size=len(data), expected_sha256=sha(data))
            if isinstance(result, Appended):
                ours.append(line)
                assert path.read_bytes()[: len(data)] == data  # every earlier byte unchanged
            else:
                changed += 1
    finally:
        for w in writers:
            assert w.wait(60) == 0
    final = path.read_bytes()
    assert final.startswith(prefix) and final.endswith(b"\n")
    lines = final.split(b"\n")[:-1]
    ids = [json.loads(raw)["id"] for raw in lines[1:]]  # every line parses: none torn or glued
    expected = {f"{t}{i:06d}" for t in "ab" for i in range(per_writer)}
    assert sorted(i for i in ids if i[0] in "ab") == sorted(expected)
    assert [i for i in ids if i.startswith("c")] == [json.loads(x)["id"] for x in ours]
    assert set(final.split(b"\n")) >= {x[:-1] for x in ours}
    print(f"commits={len(ours)} changed={changed} attempts={attempts} lines={len(lines)}")
    assert len(ours) >= 20, (len(ours), changed)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fabric_lsp.engine.session import parse_session_bytes  # noqa: E402
from tests.support.examples import profile_examples


@settings(max_examples=profile_examples(60), deadline=None)
@given(
    body=st.lists(
        st.one_of(
            st.just(b'{"type":"message","id":"a1","parentId":null}'),
            st.just(b""),
            st.just(b"{not json"),
            st.binary(max_size=40).filter(lambda b: b"\n" not in b),
        ),
        max_size=8,
    ),
    tail=st.binary(max_size=20).filter(lambda b: b"\n" not in b),
    summary=st.text(max_size=60),
)
def test_append_on_arbitrary_bytes_keeps_the_prefix_and_adds_one_parseable_entry(tmp_path_factory, body, tail, summary):
    path = tmp_path_factory.mktemp("prop") / "s.jsonl"
    data = b"\n".join(body) + (b"\n" if body else b"") + tail
    path.write_bytes(data)
    old = time.time() - 60  # a torn tail is torn for good only once it is quiet
    os.utime(path, (old, old))
    entry = compaction_entry(
        entry_id="0a0b0c0d",
        parent_id="a1",
        timestamp="2026-11-30T04:00:00.000Z",
        summary=summary,
        first_kept_entry_id="",
        tokens_before=1,
        details={"v": [1.5, None]},
    )
    raw = entry_line(entry)
    result = append_line(str(path), raw, expected_size=len(data), expected_sha256=sha(data))
    after = path.read_bytes()
    assert isinstance(result, Appended) and after.startswith(data)
    assert after[result.offset :] == raw
    assert result.offset == len(data) + (1 if data and not data.endswith(b"\n") else 0)
    last = parse_session_bytes(after).records[-1]
    assert last.id == "0a0b0c0d" and last.raw["summary"] == json.loads(raw)["summary"]
