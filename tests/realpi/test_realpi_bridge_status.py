"""The bridge's failure modes and what it says about them, with real Pi in RPC mode (every
version in FABRIC_PI_VERSIONS) and a scripted model on 127.0.0.1: the lease when the
engine cannot be run, the status line, the lease's leaf during a turn, requests that
cannot be honoured, an engine that fails during automatic compactions, Pi 1.x's
boundary drafts, honest `compact-status` and `compact --wait`, and `pi uninstall`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
from pi_rpc import PiRpc
from realpi_kit import real_pi  # noqa: F401 (fixture)
from test_realpi_bridge import (
    FABRIC,
    LONG,
    TINY_WINDOW,
    compactions,
    failing_compute_wrapper,
    lines,
    live_entries,
    summarizer_requests,
    turn,
    wait_for,
    world,  # noqa: F401 (fixture)
    write_agent,
)

from fabric_lsp.engine.session.lease import LeaseBook

pytestmark = pytest.mark.realpi


def statuses(pi: PiRpc) -> list[str]:
    """Every text the extension put in its status line (RPC forwards setStatus)."""
    return [
        e.get("statusText") or ""
        for e in list(pi.events)
        if e.get("type") == "extension_ui_request"
        and e.get("method") == "setStatus"
        and e.get("statusKey") == "fabric-lsp"
    ]


def notifications(pi: PiRpc, level: str | None = None) -> list[str]:
    return [
        e.get("message") or ""
        for e in list(pi.events)
        if e.get("type") == "extension_ui_request"
        and e.get("method") == "notify"
        and (level is None or e.get("notifyType") == level)
    ]


def status_now(pi: PiRpc) -> str:
    shown = statuses(pi)
    return shown[-1] if shown else ""


def test_engine_missing_still_holds_the_session_and_says_so(world, tmp_path):
    pi = world.pi(env=world.env(FABRIC_LSP_COMMAND=str(tmp_path / "no-such-fabric-lsp")))
    for i in range(2):
        turn(pi, f"step {i}: {LONG}")
    session = world.session()
    leaf = lines(session)[-1]["id"]
    # the lease fabric-lsp reads, written by the extension itself, live, naming Pi's leaf
    lease = wait_for(
        lambda: (l := LeaseBook(world.agent).live(str(session))) and l.leaf_id == leaf and l,
        10,
        "the extension's own lease",
    )
    assert lease.pid == pi.proc.pid and lease.pi_version == world.real.version
    shown = status_now(pi)
    assert "engine not found" in shown and 'compaction.engine: "pi"' in shown and "no-such-fabric-lsp" in shown, shown
    assert len(set(statuses(pi))) == 1, statuses(pi)  # one persistent line, not one per turn
    # an outside commit must not append into the live Pi's file: it waits for that Pi, and says so
    before = session.read_bytes()
    out = world.fabric("compact", str(session), "--wait", "--timeout", "3", "--quiet-interval", "0", check=False)
    assert out.returncode == 3, (out.stdout, out.stderr)
    assert f"pid {pi.proc.pid}" in out.stderr and "still pending after 3s" in out.stdout, (out.stdout, out.stderr)
    assert session.read_bytes() == before
    world.fabric("compact-cancel", str(session))
    # Pi's own /compact is cancelled, never an LLM summary in place of the preview
    r = pi.call({"type": "compact"}, 60)
    assert not r["success"] and r["error"] == "Compaction cancelled", r
    assert not summarizer_requests(world.fake)


def test_the_lease_names_every_entry_pi_appends_during_a_turn(world):
    gate = {"slow": False}

    def responder(body: dict[str, Any]) -> dict[str, Any]:
        msgs = body["messages"]
        if gate["slow"] and msgs[-1].get("role") != "tool":
            return {
                "tool_call": {"id": "call_slow_leaf", "name": "bash", "arguments": {"command": "sleep 4; echo done"}}
            }
        return {"text": "Sure: " + "detail " * 300}

    world.fake.responder = responder
    pi = world.pi()
    turn(pi, "first: " + LONG)
    session = world.session()
    gate["slow"] = True
    mark = pi.mark()
    assert pi.call({"type": "prompt", "message": "run the slow command"})["success"]
    pi.wait(lambda e: e.get("type") == "tool_execution_start", 30, mark)
    call = lines(session)[-1]
    assert call["message"]["role"] == "assistant" and call["message"]["stopReason"] == "toolUse"
    # while the tool runs (no settled boundary yet), the lease already names the tool call
    book = LeaseBook(world.agent)
    wait_for(
        lambda: (book.live(str(session)) or None) and book.live(str(session)).leaf_id == call["id"],
        3,
        "the lease's leaf at the tool call",
    )
    preview = json.loads(world.fabric("preview", str(session), "--json", check=False).stdout)
    assert preview["leafId"] == call["id"]
    assert not [e for e in pi.events[mark:] if e.get("type") == "agent_settled"], "the turn ended already"
    pi.wait(lambda e: e.get("type") == "agent_settled", 60, mark)
    wait_for(lambda: book.live(str(session)).leaf_id == lines(session)[-1]["id"], 3, "the lease's leaf at the answer")


def test_a_request_with_nothing_to_compact_is_refused_and_pi_never_tries(world):
    world.fake.responder = lambda body: {"text": "Hi."}
    pi = world.pi()
    turn(pi, "hello")
    r = pi.call({"type": "compact"}, 60)  # what Pi itself says about this session
    assert not r["success"] and r["error"] == "Nothing to compact (session too small)", r
    session = world.session()
    out = world.fabric("compact", str(session), check=False)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "refused, nothing was recorded: Nothing to compact (session too small)" in out.stderr
    assert f"the live Pi's branch (leaf {lines(session)[-1]['id']})" in out.stderr
    status = json.loads(world.fabric("compact-status", str(session), "--json").stdout)
    assert "pending" not in status and "last" not in status
    mark = pi.mark()
    turn(pi, "and again")  # a settled boundary: nothing to commit, nothing tried
    assert not [e for e in pi.events[mark:] if e.get("type") in ("compaction_start", "compaction_end")]
    assert not notifications(pi, "error") and not compactions(session)


def test_an_engine_error_lets_pi_compact_automatically_and_is_shown(world, tmp_path):
    write_agent(
        world.agent,
        world.fake.base_url,
        compaction={"enabled": True, "keepRecentTokens": 300, "reserveTokens": 2000},
        extra_settings={"defaultModel": "fake-tiny"},
    )
    world.fake.responder = lambda body: (
        {"text": "## Goal\nPI OWN SUMMARY"}
        if "context summarization assistant" in json.dumps(body)
        else {"text": "Sure: " + "detail " * 300}
    )
    pi = world.pi(env=world.env(FABRIC_LSP_COMMAND=failing_compute_wrapper(tmp_path)))
    session = None
    for i in range(12):  # two automatic compactions: the first error must not cancel the next one
        turn(pi, f"step {i}: plan the cache {i}. {LONG}")
        session = world.session()
        if len(compactions(session)) >= 2:
            break
    assert session is not None
    comps = compactions(session)
    assert len(comps) >= 2, f"Pi compacted {len(comps)} time(s) in {TINY_WINDOW} tokens"
    assert all("PI OWN SUMMARY" in c["summary"] for c in comps) and summarizer_requests(world.fake)
    assert all(c["id"] in {e["id"] for e in live_entries(pi)} for c in comps)
    shown = status_now(pi)
    assert "engine error" in shown and "Pi's own compactor ran" in shown and "engine exploded" in shown, shown
    # a compaction the user asks for is still never Pi's summary in place of the preview
    n = len(summarizer_requests(world.fake))
    turn(pi, "one more " + LONG)
    r = pi.call({"type": "compact"}, 60)
    assert not r["success"], r
    assert len(summarizer_requests(world.fake)) == n


def test_an_intent_requested_mid_run_is_committed_at_pis_boundary_without_an_abort(world):
    gate = {"slow": False}

    def responder(body: dict[str, Any]) -> dict[str, Any]:
        msgs = body["messages"]
        if gate["slow"] and msgs[-1].get("role") != "tool":
            return {"tool_call": {"id": "call_mid_run", "name": "bash", "arguments": {"command": "sleep 2; echo done"}}}
        return {"text": "Sure: " + "detail " * 300}

    world.fake.responder = responder
    pi = world.pi()
    for i in range(2):
        turn(pi, f"step {i}: write the lexer {i}. {LONG}")
    session = world.session()
    gate["slow"] = True
    mark = pi.mark()
    assert pi.call({"type": "prompt", "message": "slow turn: " + LONG})["success"]
    pi.wait(lambda e: e.get("type") == "tool_execution_start", 30, mark)
    world.fabric("compact", str(session), "--instructions", "keep the lexer plan")
    settled = pi.wait(lambda e: e.get("type") == "agent_settled", 60, mark)
    events = pi.events[mark : next(i for i in range(mark, len(pi.events)) if pi.events[i] is settled)]
    comp = compactions(session)
    assert len(comp) == 1, "not committed at the run's boundary"
    answer = [e for e in lines(session) if e.get("type") == "message"][-1]
    assert answer["message"]["stopReason"] == "stop" and comp[0]["parentId"] == answer["id"]
    assert not [e for e in lines(session) if e.get("type") == "message" and e["message"].get("stopReason") == "aborted"]
    if world.real.facts.boundary_drafts:
        # Pi 1.x appended the Fabric draft itself before settling: no manual compaction ran
        appended = [e for e in events if e.get("type") == "entry_appended" and e["entry"].get("type") == "compaction"]
        assert [e["entry"]["id"] for e in appended] == [comp[0]["id"]]
        assert not [e for e in events if e.get("type") == "compaction_start"]
    else:
        # Pi 0.80.6: ctx.compact() at agent_settled (awaited by the handler, before the public event)
        assert [e.get("reason") for e in events if e.get("type") == "compaction_start"] == ["manual"]
    record = wait_for(
        lambda: json.loads(world.fabric("compact-status", str(session), "--json").stdout).get("last"), 5, "the record"
    )
    assert record["status"] == "committed" and record["entryId"] == comp[0]["id"]
    preview = json.loads(
        world.fabric(
            "preview",
            str(session),
            "--json",
            "--leaf",
            comp[0]["parentId"],
            "--instructions",
            "keep the lexer plan",
            check=False,
        ).stdout
    )
    assert comp[0]["summary"] == preview["summary"] and comp[0]["firstKeptEntryId"] == preview["firstKeptEntryId"]
    assert not summarizer_requests(world.fake)


def test_compact_status_shows_pis_own_compactions_orphans_and_every_holder(world):
    # a Pi WITHOUT the extension: nothing holds the session, so an outside commit appends,
    # and Pi's next prompt hangs off its own leaf: the commit is an orphan
    pi = world.pi(extension=False)
    for i in range(3):
        turn(pi, f"step {i}: {LONG}")
    session = world.session()
    out = world.fabric("compact", str(session), "--wait", "--timeout", "20", "--quiet-interval", "0", "--json")
    orphan = json.loads(out.stdout)["record"]["entryId"]
    turn(pi, "after the outside commit " + LONG)
    text = world.fabric("compact-status", str(session)).stdout
    assert f"last: compaction {orphan} was appended but is not in effect" in text and "orphan" in text, text
    assert "last: committed" not in text
    assert "compaction in effect: none on the active branch" in text, text
    # Pi's own compaction (no extension: Pi's summarizer) is the one in effect
    world.fake.responder = lambda body: (
        {"text": "## Goal\nPI OWN SUMMARY"}
        if "context summarization assistant" in json.dumps(body)
        else {"text": "Sure: " + "detail " * 300}
    )
    r = pi.call({"type": "compact"}, 60)
    assert r["success"], r
    own = compactions(session)[-1]
    text = world.fabric("compact-status", str(session)).stdout
    assert f"compaction in effect: {own['id']} by Pi's own summary" in text, text
    pi.close()
    # two Pis with the extension on one session: both listed
    a = world.pi("--session", str(session))
    b = world.pi("--session", str(session))
    book = LeaseBook(world.agent)
    wait_for(
        lambda: {x.pid for x in book.all_live() if x.session == os.path.realpath(session)} == {a.proc.pid, b.proc.pid},
        20,
        "both leases",
    )
    text = world.fabric("compact-status", str(session)).stdout
    assert "held by 2 live Pis" in text and f"pid {a.proc.pid}" in text and f"pid {b.proc.pid}" in text, text
    # and each one says so in its status line
    for pi_, other in ((a, b), (b, a)):
        wait_for(lambda: f"another Pi (pid {other.proc.pid})" in status_now(pi_), 10, "the two-Pi warning")
    b.close()
    wait_for(lambda: "WARNING" not in status_now(a), 10, "the warning cleared when the other Pi left")


def test_compact_wait_says_why_it_still_waits_after_the_holding_pi_is_killed(world):
    def responder(body: dict[str, Any]) -> dict[str, Any]:
        msgs = body["messages"]
        if "hang here" in json.dumps(msgs[-1]) and msgs[-1].get("role") != "tool":
            return {"tool_call": {"id": "call_hang", "name": "bash", "arguments": {"command": "sleep 60"}}}
        return {"text": "Sure: " + "detail " * 300}

    world.fake.responder = responder
    pi = world.pi()
    for i in range(2):
        turn(pi, f"step {i}: {LONG}")
    session = world.session()
    mark = pi.mark()
    assert pi.call({"type": "prompt", "message": "hang here"})["success"]
    pi.wait(lambda e: e.get("type") == "tool_execution_start", 30, mark)
    waiter = subprocess.Popen(
        [*FABRIC, "compact", str(session), "--wait", "--timeout", "3", "--quiet-interval", "0"],
        cwd=world.proj,
        env=world.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # the CLI said the live Pi holds it (it waits for that Pi) before Pi is killed
        deadline = time.monotonic() + 20
        err_lines: list[str] = []
        while not any("waiting for it" in x for x in err_lines):
            line = waiter.stderr.readline()
            assert line or time.monotonic() < deadline, err_lines
            err_lines.append(line)
        os.kill(pi.proc.pid, signal.SIGKILL)
        out, rest = waiter.communicate(timeout=60)
    finally:
        if waiter.poll() is None:
            waiter.kill()
    err = "".join(err_lines) + rest
    assert waiter.returncode == 3, (out, err)
    assert f"the Pi that held the session (pid {pi.proc.pid}) is gone" in err, err
    assert "still pending after 3s" in out and "waits for tool results" in out, out  # the timeout names why
    assert not compactions(session)


def test_pi_uninstall_removes_the_extension_its_config_and_pending_requests(world, tmp_path):
    py = [sys.executable, "-m", "fabric_lsp"]
    out = subprocess.run(
        [*py, "pi", "install", "--agent-dir", str(world.agent)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    installed = world.agent / "extensions" / "fabric-lsp"
    assert (installed / "fabric-lsp.json").is_file() and (installed / "README.md").is_file()
    pi = world.pi(extension=False)  # loaded from the agent dir
    for i in range(3):
        turn(pi, f"step {i}: {LONG}")
    session = world.session()
    assert LeaseBook(world.agent).live(str(session)) is not None
    pi.close()
    pending = json.loads(world.fabric("compact", str(session), "--json").stdout)["pending"]
    assert pending
    out = subprocess.run(
        [*py, "pi", "uninstall", "--agent-dir", str(world.agent)],
        capture_output=True,
        text=True,
        timeout=60,
        env=world.env(),
    )
    assert out.returncode == 0, out.stderr
    assert f"removed the Pi extension and its fabric-lsp.json from {installed}" in out.stdout
    assert "cleared 1 pending compaction request(s)" in out.stdout, out.stdout
    assert not installed.exists()
    status = world.fabric("compact-status", str(session)).stdout
    assert "pending: none" in status and "cleared by `fabric-lsp pi uninstall`" in status, status
    # Pi starts without it: no lease, and nothing left for a server to append into its file
    pi = world.pi("--continue", extension=False)
    turn(pi, "after the uninstall")
    assert not list((world.agent / "fabric-lsp" / "leases").glob("*.json"))
    assert not compactions(session)
    # a directory that is not our install is left alone
    installed.mkdir(parents=True)
    (installed / "package.json").write_text(json.dumps({"name": "someone-else"}))
    out = subprocess.run(
        [*py, "pi", "uninstall", "--agent-dir", str(world.agent)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 1 and "is not an earlier `fabric-lsp pi install`" in out.stderr
    assert (installed / "package.json").is_file()
