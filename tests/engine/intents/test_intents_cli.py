"""`fabric-lsp compact` / `compact-status` / `compact-cancel` as a user runs them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from intents_kit import REAL_SESSIONS, age


def run(tmp_path, *args):
    env = dict(os.environ, PI_CODING_AGENT_DIR=str(tmp_path / "agent"), HOME=str(tmp_path / "home"))
    return subprocess.run(
        [sys.executable, "-m", "fabric_lsp", *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )


def test_compact_wait_commits_and_status_reports_it(tmp_path):
    path = tmp_path / "s.jsonl"
    shutil.copy(REAL_SESSIONS / "02-print-continue-errors-retries-truncation.jsonl", path)
    age(path)
    before = path.read_bytes()
    out = run(
        tmp_path,
        "compact",
        str(path),
        "--instructions",
        "keep the fixes",
        "--preserve",
        "calc.py",
        "--wait",
        "--quiet-interval",
        "0.1",
        "--keep-recent",
        "100",
        "--context-window",
        "0",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    record = result["record"]
    assert record["status"] == "committed" and result["session"] == str(path)
    after = path.read_bytes()
    assert after.startswith(before)
    assert json.loads(after[len(before) :])["id"] == record["entryId"]
    status = run(tmp_path, "compact-status", str(path), "--json")
    assert status.returncode == 0
    assert json.loads(status.stdout)["last"] == record
    text = run(tmp_path, "compact-status", str(path))
    assert f"last: committed compaction {record['entryId']}" in text.stdout


def test_compact_without_wait_records_and_cancel_clears(tmp_path):
    path = tmp_path / "s.jsonl"
    shutil.copy(REAL_SESSIONS / "01-print-default-tools.jsonl", path)
    out = run(
        tmp_path,
        "compact",
        str(path),
        "--reason",
        "done with the task",
        "--keep-recent",
        "100",
        "--context-window",
        "0",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    pending = json.loads(out.stdout)["pending"]
    assert pending["reason"] == "done with the task" and pending["requestedBy"] == "user"
    state_dir = tmp_path / "agent" / "fabric-lsp" / "intents"
    assert [p.stat().st_mode & 0o777 for p in state_dir.glob("*.json")] == [0o600]
    assert json.loads(run(tmp_path, "compact-status", str(path), "--json").stdout)["pending"] == pending
    assert json.loads(run(tmp_path, "compact-cancel", str(path), "--json").stdout) == {"cancelled": True}
    assert "pending: none" in run(tmp_path, "compact-status", str(path)).stdout
    assert path.read_bytes() == (REAL_SESSIONS / "01-print-default-tools.jsonl").read_bytes()
    # without a live Pi the CLI says who would commit it, as it is
    text = run(tmp_path, "compact", str(path), "--keep-recent", "100", "--context-window", "0")
    assert "no live Pi holds this session" in text.stdout and "--wait" in text.stdout, text.stdout
    assert "a running fabric-lsp server commits it" not in text.stdout


def test_a_request_with_nothing_to_compact_is_refused_with_the_reason(tmp_path):
    path = tmp_path / "s.jsonl"
    shutil.copy(REAL_SESSIONS / "01-print-default-tools.jsonl", path)  # tiny: Pi's defaults keep all of it
    for wait in ([], ["--wait", "--timeout", "5"]):
        out = run(tmp_path, "compact", str(path), *wait)
        assert out.returncode == 1, (out.stdout, out.stderr)
        assert "refused, nothing was recorded: Nothing to compact (session too small)" in out.stderr
    assert "pending: none" in run(tmp_path, "compact-status", str(path)).stdout


def test_bad_input_is_a_clear_error(tmp_path):
    out = run(tmp_path, "compact", str(tmp_path / "missing.jsonl"))
    assert out.returncode == 2 and "not found" in out.stderr
    path = tmp_path / "s.jsonl"
    shutil.copy(REAL_SESSIONS / "01-print-default-tools.jsonl", path)
    out = run(tmp_path, "compact", str(path), *sum([["--preserve", "p"] for _ in range(17)], []))
    assert out.returncode == 2
    # the protocol's message, as the server's -32602 says it
    assert "invalid arguments: fabric/compact/request: field `preserve`" in out.stderr
    assert "length <= 16" in out.stderr


def test_a_line_over_the_line_limit_is_never_committed_past(tmp_path):
    """The commit path does not parse a line over 64 MiB, so it cannot know whether that
    entry is the leaf: it refuses (and says why) instead of appending under a wrong parent."""
    path = tmp_path / "s.jsonl"
    shutil.copy(REAL_SESSIONS / "02-print-continue-errors-retries-truncation.jsonl", path)
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    leaf = rows[-1]["id"]
    big = {
        "type": "message",
        "id": "b16b16b1",
        "parentId": leaf,
        "timestamp": rows[-1]["timestamp"],
        "message": {"role": "user", "content": "x" * (65 << 20), "timestamp": 1},
    }
    with path.open("a") as fh:
        fh.write(json.dumps(big) + "\n")
    age(path)
    before = path.read_bytes()
    out = run(
        tmp_path,
        "compact",
        str(path),
        "--wait",
        "--quiet-interval",
        "0.1",
        "--keep-recent",
        "100",
        "--context-window",
        "0",
        "--json",
    )
    assert out.returncode != 0
    assert path.read_bytes() == before
    record = json.loads(out.stdout)["record"] if out.stdout.strip() else {}
    assert "over the 64 MiB line limit" in (out.stderr + json.dumps(record)), out.stderr + out.stdout


def test_the_commit_reports_the_after_figure_the_preview_showed(tmp_path):
    """One meaning per number: the preview's projected "after" is the commit's (issue 34 #14)."""
    path = tmp_path / "s.jsonl"
    shutil.copy(REAL_SESSIONS / "02-print-continue-errors-retries-truncation.jsonl", path)
    age(path)
    opts = ("--keep-recent", "100", "--context-window", "128000")
    preview = json.loads(run(tmp_path, "preview", str(path), "--json", *opts).stdout)
    projected = preview["details"]["budget"]["projectedTokensAfter"]
    out = run(tmp_path, "compact", str(path), "--wait", "--quiet-interval", "0.1", "--json", *opts)
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)["record"]
    assert record["projectedTokensAfter"] == projected
    assert isinstance(record["estimatedTokensAfter"], int)  # Pi's own estimate stays, labelled apart
    text = run(tmp_path, "compact-status", str(path)).stdout
    assert f"{projected} projected after" in text, text
