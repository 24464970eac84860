"""Real Pi resumes from the compaction our intents commit appends.

White box: Pi's own SessionManager (node, the installed package) builds a context that
starts with our summary and continues from our firstKeptEntryId, message for message as
our own context view says. Black box: `pi -p --session FILE` against a scripted
OpenAI-compatible server on 127.0.0.1 sends our summary to the model, and Pi's next
entry hangs off our compaction.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI
from realpi_kit import (
    REAL_SESSIONS,
    SUMMARY_PREFIX,
    SUMMARY_SUFFIX,
    real_pi,  # noqa: F401 (fixture)
    text_of,
    write_agent_dir,
)

from fabric_lsp.engine.session import (
    SessionTree,
    build_context_messages,
    entry_to_message,
    estimate_tokens,
    read_session,
)
from tests.support.wire import WireIntentsService

pytestmark = pytest.mark.realpi

LEGACY_CUT = {"keep_recent_tokens": 100, "context_window": 0}


def quiet(path: Path) -> None:
    t = time.time() - 60
    os.utime(path, (t, t))


def commit(tmp_path: Path, path: Path, options=LEGACY_CUT, **params) -> dict:
    quiet(path)
    svc = WireIntentsService(
        state_dir=tmp_path / "state", quiet_interval_s=0.1, compaction_options_provider=lambda _p: options
    )
    svc.request(path, params)
    record = svc.maybe_commit(path)
    assert record is not None and record["status"] == "committed", record
    return record


def set_cwd(path: Path, cwd: Path) -> None:
    """Point the header at an existing directory (Pi refuses a missing stored cwd)."""
    lines = path.read_bytes().split(b"\n")
    header = json.loads(lines[0])
    header["cwd"] = str(cwd)
    lines[0] = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode()
    path.write_bytes(b"\n".join(lines))


@pytest.mark.parametrize("name", ["02", "03", "04", "06"])
def test_pi_session_manager_resumes_from_our_compaction(tmp_path, real_pi, name):  # noqa: F811
    src = next(REAL_SESSIONS.glob(name + "-*.jsonl"))
    path = tmp_path / src.name
    shutil.copy(src, path)
    before = path.read_bytes()
    record = commit(tmp_path, path, instructions="Keep what the calc fixes were", preserve=["tests/test_calc.py"])
    assert path.read_bytes().startswith(before)

    pi = real_pi.context(path, tmp_path)
    tree = SessionTree.from_records(read_session(path).records)
    ours = tree.by_id[record["entryId"]].raw
    assert pi["leaf"] == record["entryId"] == tree.leaf_id
    # Pi's context starts with our summary ...
    assert pi["roles"][0] == "compactionSummary"
    assert pi["messages"][0]["summary"] == record["summary"] == ours["summary"]
    assert pi["llm"][0]["role"] == "user"
    assert text_of(pi["llm"][0]) == SUMMARY_PREFIX + record["summary"] + SUMMARY_SUFFIX
    # ... and continues from our firstKeptEntryId, exactly as our own context view says.
    branch = [r.raw for r in tree.branch().entries]
    mine = build_context_messages(branch)
    assert pi["roles"] == [m["role"] for m in mine]
    assert pi["messages"][1:] == json.loads(json.dumps(mine[1:]))
    first_kept = ours["firstKeptEntryId"]
    assert first_kept and first_kept in tree.by_id
    assert pi["messages"][1] == json.loads(json.dumps(entry_to_message(tree.by_id[first_kept].raw)))
    # Pi's token estimate agrees with ours on every message, so estimatedTokensAfter is Pi's number.
    assert pi["est"] == [estimate_tokens(m) for m in mine]
    assert record["estimatedTokensAfter"] == sum(pi["est"])


def test_compact_all_summary_is_the_whole_context(tmp_path, real_pi):  # noqa: F811
    path = tmp_path / "01.jsonl"
    shutil.copy(next(REAL_SESSIONS.glob("01-*.jsonl")), path)
    record = commit(tmp_path, path, options={"keep_recent_tokens": 300})
    entry = SessionTree.from_records(read_session(path).records).by_id[record["entryId"]].raw
    assert entry["firstKeptEntryId"] == ""
    pi = real_pi.context(path, tmp_path)
    assert pi["roles"] == ["compactionSummary"] and pi["messages"][0]["summary"] == record["summary"]


@pytest.mark.parametrize("name", ["04"])
def test_pi_print_mode_sends_our_summary_to_the_model(tmp_path, real_pi, name):  # noqa: F811
    agent, home, proj = tmp_path / "agent", tmp_path / "home", tmp_path / "proj"
    home.mkdir()
    proj.mkdir()
    path = tmp_path / "session.jsonl"
    shutil.copy(next(REAL_SESSIONS.glob(name + "-*.jsonl")), path)
    set_cwd(path, proj)
    record = commit(tmp_path, path)
    committed = path.read_bytes()
    tree = SessionTree.from_records(read_session(path).records)
    first_kept = tree.by_id[record["entryId"]].raw["firstKeptEntryId"]
    kept_text = text_of(entry_to_message(tree.by_id[first_kept].raw) or {})

    with FakeOpenAI(answer="Resumed after the Fabric compaction.", log_dir=tmp_path / "requests") as server:
        write_agent_dir(agent, server.base_url)
        out = real_pi.run(["-p", "--session", str(path), "What is left to do?"], cwd=proj, agent_dir=agent, home=home)
        assert out.returncode == 0, (out.stdout, out.stderr)
        assert "Resumed after the Fabric compaction." in out.stdout
        requests = [r["body"] for r in server.requests if r["path"].endswith("/chat/completions")]
    assert len(requests) == 1
    messages = requests[0]["messages"]
    assert messages[0]["role"] in ("system", "developer")
    assert messages[1]["role"] == "user"
    assert text_of(messages[1]) == SUMMARY_PREFIX + record["summary"] + SUMMARY_SUFFIX
    if kept_text:
        assert any(kept_text == text_of(m) for m in messages[2:])
    assert messages[-1]["role"] == "user" and text_of(messages[-1]) == "What is left to do?"
    # Pi appended after our entry, never rewrote it, and hung its turn off our compaction.
    final = path.read_bytes()
    assert final.startswith(committed)
    new = [json.loads(x) for x in final[len(committed) :].split(b"\n") if x]
    assert new[0]["type"] == "message" and new[0]["parentId"] == record["entryId"]
    assert new[-1]["message"]["role"] == "assistant"


def test_pi_written_session_then_commit_then_resume(tmp_path, real_pi):  # noqa: F811
    """A session Pi itself writes now, compacted by us, resumed by Pi with `-c`."""
    agent, home, proj = tmp_path / "agent", tmp_path / "home", tmp_path / "proj"
    home.mkdir()
    proj.mkdir()
    with FakeOpenAI(answer="Noted. " + "The plan has several careful steps. " * 30) as server:
        write_agent_dir(agent, server.base_url)
        for k, prompt in enumerate(["Plan the parser rewrite", "Now list the risks", "Summarize the tests"]):
            out = real_pi.run(["-p", *(["-c"] if k else []), prompt], cwd=proj, agent_dir=agent, home=home)
            assert out.returncode == 0, out.stderr
        sessions = sorted((agent / "sessions").glob("*/*.jsonl"))
        assert len(sessions) == 1
        path = sessions[0]
        before = tmp_path / "before.jsonl"
        shutil.copyfile(path, before)
        record = commit(tmp_path, path)
        ours = json.loads(path.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1])
        n_before = len(server.requests)
        out = real_pi.run(["-p", "-c", "Continue"], cwd=proj, agent_dir=agent, home=home)
        assert out.returncode == 0, out.stderr
        body = server.requests[n_before]["body"]
    assert text_of(body["messages"][1]) == SUMMARY_PREFIX + record["summary"] + SUMMARY_SUFFIX
    assert "[Session Goal]" in record["summary"] and "Plan the parser rewrite" in record["summary"]
    last = [json.loads(x) for x in path.read_bytes().split(b"\n") if x]
    ids = [o.get("id") for o in last]
    assert last[ids.index(record["entryId"]) + 1]["parentId"] == record["entryId"]
    assert ours["id"] == record["entryId"]
    if real_pi.facts.system_messages:
        # Pi 1.x checkpoints the system state in a compaction: ours holds the one Pi's own
        # appendCompaction writes for the same branch (the timestamp is the entry's own)...
        pis = pi_append_compaction(real_pi, before)
        assert set(pis) - set(ours) == set(), (sorted(pis), sorted(ours))
        assert list(ours)[-1] == "systemMessage"
        assert {**ours["systemMessage"], "timestamp": 0} == {**pis["systemMessage"], "timestamp": 0}
        assert ours["systemMessage"]["timestamp"] == record["at"]
        # ...so the resumed Pi does not append its system message again after ours.
        after = last[ids.index(record["entryId"]) + 1 :]
        assert not [e for e in after if e.get("type") == "message" and e["message"].get("role") == "system"], after
    else:
        assert "systemMessage" not in ours


def pi_append_compaction(real_pi, session: Path) -> dict:
    """The compaction entry Pi's own SessionManager.appendCompaction writes on a copy."""
    copy = session.with_name("pi-append-" + session.name)
    shutil.copyfile(session, copy)
    script = (
        "import { pathToFileURL } from 'node:url'; import { join, dirname } from 'node:path';"
        "import { readFileSync } from 'node:fs';"
        "const [pkg, file] = process.argv.slice(1);"
        "const m = await import(pathToFileURL(join(pkg, 'dist/core/session-manager.js')).href);"
        "const sm = m.SessionManager.open(file, dirname(file));"
        "sm.appendCompaction('S', sm.getLeafId(), 1, undefined, true);"
        "const lines = readFileSync(file, 'utf8').trim().split('\\n');"
        "process.stdout.write(lines[lines.length - 1]);"
    )
    import subprocess

    out = subprocess.run(
        [str(real_pi.node), "--input-type=module", "-e", script, str(real_pi.pkg), str(copy)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)
