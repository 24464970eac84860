"""`fabric-lsp index` builds the whole index; `fabric-lsp recall` then reaches every
session, and says how to complete an answer the per-call budget cut short."""

from __future__ import annotations

import json
from pathlib import Path

from memory_kit import header, user, write_session

from fabric_lsp.cli import main

CWD = "/home/user/idx"


def _agent(tmp_path: Path, n: int) -> Path:
    agent = tmp_path / "agent"
    for i in range(n):
        text = f"filler words {i}" + (" needle_in_the_oldest" if i == 0 else "")
        write_session(
            agent,
            CWD,
            f"s{i:02d}.jsonl",
            [header(f"s{i:02d}", CWD), user(f"u{i}", None, text, 1)],
            1_700_000_000 + i * 10,
        )
    (agent / "fabric.json").write_text(json.dumps({"memory": {"maxSyncSessions": 4, "hotSessions": 2}}))
    return agent


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_index_then_recall_reaches_every_session(tmp_path: Path, capsys):
    agent = _agent(tmp_path, 12)
    code, out, err = _run(
        capsys, "recall", "needle_in_the_oldest", "--scope", "global", "--agent-dir", str(agent), "--json"
    )
    result = json.loads(out)
    assert code == 0 and result["coverage"]["indexedSessions"] == 4 and not result["authoritative"]
    assert "run `fabric-lsp index` to index the remaining 8 sessions" in err
    code, out, err = _run(capsys, "index", "--agent-dir", str(agent))
    assert code == 0 and out.startswith("Indexed 12/12 sessions (8 built, 4 from the cache")
    assert err == ""  # piped (not a terminal): no progress bar
    code, out, err = _run(
        capsys, "recall", "needle_in_the_oldest", "--scope", "global", "--agent-dir", str(agent), "--json"
    )
    result = json.loads(out)
    assert result["coverage"]["indexedSessions"] == 12 and result["coverage"]["complete"]
    assert [it["pointer"]["sessionId"] for it in result["items"]] == ["s00"]
    assert "fabric-lsp index" not in err
    code, out, _ = _run(capsys, "index", "--agent-dir", str(agent), "--json")
    summary = json.loads(out)
    assert summary["built"] == 0 and summary["indexed"] == 12 and summary["loaded"] == 12
