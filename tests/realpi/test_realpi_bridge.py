"""The Pi bridge with real Pi (every version in FABRIC_PI_VERSIONS) in RPC mode (editors/pi loaded with -e, the agent
dir, or a settings entry) and a scripted model on 127.0.0.1.

Every check reads the session file, Pi's live entries and what the model was sent.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from pi_rpc import PiRpc
from realpi_kit import (
    NODE,
    ROOT,
    SUMMARY_PREFIX,
    SUMMARY_SUFFIX,
    RealPi,
    real_pi,  # noqa: F401 (fixture)
    real_pi_of,
    spread,
    text_of,
)

pytestmark = pytest.mark.realpi

EXTENSION = ROOT / "editors" / "pi"
FABRIC = [sys.executable, "-m", "fabric_lsp"]
FABRIC_CMD = " ".join(FABRIC)
LONG = "context " * 700  # ~5.6 KB a prompt: enough history for Pi's gate at keepRecent 300
SUMMARIZER = "context summarization assistant"
TINY_WINDOW = 8000


def write_agent(
    agent: Path,
    base_url: str,
    *,
    compaction: dict[str, Any] | None = None,
    extra_settings: dict[str, Any] | None = None,
) -> None:
    agent.mkdir(parents=True, exist_ok=True)
    models = [
        {
            "id": m,
            "name": m,
            "reasoning": False,
            "input": ["text"],
            "contextWindow": w,
            "maxTokens": 4096,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        }
        for m, w in (("fake-coder", 128000), ("fake-tiny", TINY_WINDOW))
    ]
    (agent / "models.json").write_text(
        json.dumps(
            {
                "providers": {
                    "fakeai": {"baseUrl": base_url, "api": "openai-completions", "apiKey": "dummy", "models": models}
                }
            }
        )
    )
    settings = {
        "defaultProvider": "fakeai",
        "defaultModel": "fake-coder",
        "quietStartup": True,
        "compaction": compaction or {"enabled": False, "keepRecentTokens": 300, "reserveTokens": 2000},
    }
    settings.update(extra_settings or {})
    (agent / "settings.json").write_text(json.dumps(settings))


class World:
    def __init__(self, tmp: Path, fake: FakeOpenAI, real: RealPi) -> None:
        self.tmp = tmp
        self.fake = fake
        self.real = real
        self.agent = tmp / "agent"
        self.home = tmp / "home"
        self.proj = tmp / "proj"
        for d in (self.home, self.proj):
            d.mkdir(parents=True, exist_ok=True)
        self.pis: list[PiRpc] = []

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(self.real.env(self.agent, self.home), FABRIC_LSP_COMMAND=FABRIC_CMD)
        env.update(extra)
        return env

    def pi(self, *args: str, env: dict[str, str] | None = None, extension: bool = True) -> PiRpc:
        argv = (["-e", str(EXTENSION)] if extension else []) + list(args)
        pi = PiRpc(self.real.node, self.real.cli, argv, cwd=self.proj, env=env or self.env())
        self.pis.append(pi)
        return pi

    def fabric(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        out = subprocess.run(
            [*FABRIC, *args], cwd=self.proj, env=self.env(), capture_output=True, text=True, input=stdin, timeout=120
        )
        if check:
            assert out.returncode == 0, (args, out.stdout, out.stderr)
        return out

    def session(self) -> Path:
        files = sorted((self.agent / "sessions").glob("*/*.jsonl"))
        assert len(files) == 1, files
        return files[0]

    def close(self) -> None:
        for pi in self.pis:
            pi.close()


@contextlib.contextmanager
def make_world(tmp_path: Path, real: RealPi) -> Iterator[World]:
    with FakeOpenAI(answer="Sure: " + "detail " * 300, realistic_usage=True, log_dir=tmp_path / "requests") as fake:
        w = World(tmp_path, fake, real)
        write_agent(w.agent, fake.base_url)
        try:
            yield w
        finally:
            w.close()


@pytest.fixture
def world(tmp_path, real_pi):  # noqa: F811
    with make_world(tmp_path, real_pi) as w:
        yield w


@pytest.fixture
def version_world(tmp_path, version):
    """A world on the Pi version a `spread` parameter names."""
    with make_world(tmp_path, real_pi_of(version)) as w:
        yield w


def turn(pi: PiRpc, text: str, timeout: float = 90.0) -> None:
    mark = pi.mark()
    assert pi.call({"type": "prompt", "message": text})["success"]
    pi.wait(lambda e: e.get("type") == "agent_settled", timeout, mark)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def live_entries(pi: PiRpc) -> list[dict[str, Any]]:
    r = pi.call({"type": "get_entries"})
    assert r["success"], r
    data = r["data"]
    return data["entries"] if isinstance(data, dict) else data


def summarizer_requests(fake: FakeOpenAI) -> list[dict[str, Any]]:
    return [r for r in fake.requests if SUMMARIZER in json.dumps(r["body"])]


def preview_of(
    w: World, session: Path, compaction: dict[str, Any], window: int = 128000, *extra: str
) -> dict[str, Any]:
    """fabric-lsp's preview for the inputs Pi gave the hook (the CLI reads the same
    settings.json as Pi: keepRecentTokens 300, reserveTokens 2000)."""
    out = w.fabric(
        "preview",
        str(session),
        "--json",
        "--leaf",
        compaction["parentId"],
        "--context-window",
        str(window),
        "--tokens-before",
        str(compaction["tokensBefore"]),
        *extra,
        check=False,
    )
    return json.loads(out.stdout)


def wait_for(pred, timeout: float = 10.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def compactions(path: Path) -> list[dict[str, Any]]:
    return [e for e in lines(path) if e.get("type") == "compaction"]


def test_idle_intent_is_committed_by_pi_on_its_live_branch(world):
    pi = world.pi()
    for i in range(3):
        turn(pi, f"step {i}: refactor the parser module {i}. {LONG}")
    session = world.session()
    leaf_before = lines(session)[-1]["id"]
    lease_dir = world.agent / "fabric-lsp" / "leases"
    lease = json.loads(next(lease_dir.glob("*.json")).read_text())
    assert lease["pid"] == pi.proc.pid and lease["leafId"] == leaf_before
    assert lease["piVersion"] == world.real.version and lease["session"] == os.path.realpath(session)

    world.fabric("compact", str(session), "--instructions", "keep the parser plan")
    requested = time.monotonic()  # the intent is in the state file once the CLI returns
    comp = wait_for(lambda: compactions(session), 5.0, "Pi's compaction")[0]
    elapsed = time.monotonic() - requested
    # the watched state directory wakes Pi at once (no once-a-second look to wait for)
    assert elapsed < 2.5, f"an idle Pi committed the intent after {elapsed:.2f}s"
    assert comp["parentId"] == leaf_before and comp["fromHook"] is True
    # Pi's live tree holds it: Pi wrote it, no outside append
    assert comp["id"] in {e["id"] for e in live_entries(pi)}
    status = wait_for(
        lambda: (s := json.loads(world.fabric("compact-status", str(session), "--json").stdout)).get("last") and s,
        5.0,
        "the committed record",
    )
    assert status["last"]["status"] == "committed" and status["last"]["entryId"] == comp["id"]
    assert status["heldBy"]["pid"] == pi.proc.pid
    # the bytes the preview shows for the same inputs
    preview = preview_of(world, session, comp, 128000, "--instructions", "keep the parser plan")
    assert preview["outcome"] == "compacted"
    assert comp["summary"] == preview["summary"] and comp["firstKeptEntryId"] == preview["firstKeptEntryId"]
    assert comp["details"] == preview["details"]
    # the record's "after" is the figure the preview shows (one meaning per number)
    assert status["last"]["projectedTokensAfter"] == preview["details"]["budget"]["projectedTokensAfter"]
    assert not summarizer_requests(world.fake)
    # the next request starts with Pi's wrapper around exactly our summary; the entry hangs off it
    n = len(world.fake.requests)
    turn(pi, "what next?")
    msgs = world.fake.requests[n]["body"]["messages"]
    first_user = next(m for m in msgs if m["role"] == "user")
    assert text_of(first_user) == SUMMARY_PREFIX + comp["summary"] + SUMMARY_SUFFIX
    after = lines(session)
    assert after[after.index(comp) + 1]["parentId"] == comp["id"]


def test_intent_requested_mid_turn_is_committed_at_the_settled_boundary(world):
    gate = {"slow": False}

    def responder(body: dict[str, Any]) -> dict[str, Any]:
        if gate["slow"] and "slow turn" in json.dumps(body["messages"][-1]):
            time.sleep(3.0)
        return {"text": "Sure: " + "detail " * 300}

    world.fake.responder = responder
    pi = world.pi()
    for i in range(2):
        turn(pi, f"step {i}: write the lexer {i}. {LONG}")
    session = world.session()
    gate["slow"] = True
    mark = pi.mark()
    assert pi.call({"type": "prompt", "message": "slow turn: " + LONG})["success"]
    pi.wait(lambda e: e.get("type") == "agent_start", 30, mark)
    world.fabric("compact", str(session))
    assert not compactions(session), "committed while the turn was running"
    pi.wait(lambda e: e.get("type") == "agent_settled", 60, mark)
    comp = compactions(session)
    assert len(comp) == 1, "not committed at the settled boundary"
    assert comp[0]["parentId"] == [e for e in lines(session) if e.get("type") == "message"][-1]["id"]
    # a prompt sent right after agent_settled is persisted, under the compaction
    gate["slow"] = False
    turn(pi, "right after settled")
    after = lines(session)
    prompt = next(
        e
        for e in after
        if e.get("type") == "message"
        and e["message"]["role"] == "user"
        and "right after settled" in json.dumps(e["message"]["content"])
    )
    assert prompt["parentId"] == comp[0]["id"]
    assert prompt["id"] in {e["id"] for e in live_entries(pi)}


def test_compact_wait_against_a_held_session_does_not_append(world):
    pi = world.pi()
    for i in range(3):
        turn(pi, f"step {i}: document module {i}. {LONG}")
    session = world.session()
    out = world.fabric("compact", str(session), "--wait", "--timeout", "20", "--quiet-interval", "0", "--json")
    assert "live Pi" in out.stderr
    record = json.loads(out.stdout)["record"]
    comp = compactions(session)
    assert len(comp) == 1 and record["entryId"] == comp[0]["id"]
    assert comp[0]["id"] in {e["id"] for e in live_entries(pi)}, "appended from outside Pi"


def test_rpc_compact_and_threshold_compaction_produce_the_fabric_summary(world, tmp_path):
    # threshold: a 12k-token model with Pi's automatic compaction on
    write_agent(
        world.agent,
        world.fake.base_url,
        compaction={"enabled": True, "keepRecentTokens": 300, "reserveTokens": 2000},
        extra_settings={"defaultModel": "fake-tiny"},
    )
    pi = world.pi()
    for i in range(5):
        turn(pi, f"step {i}: plan the cache {i}. {LONG}")
        if compactions(world.session()):
            break
    session = world.session()
    comp = wait_for(lambda: compactions(session), 30, "a threshold compaction")
    assert comp[0]["fromHook"] is True and comp[0]["summary"].startswith("[Session Goal]")
    assert comp[0]["summary"] == preview_of(world, session, comp[0], TINY_WINDOW).get("summary")
    # and Pi's own RPC compact
    r = pi.call({"type": "compact"}, 60)
    if r["success"]:
        assert r["data"]["summary"] == compactions(session)[-1]["summary"]
    else:  # the threshold compaction may already have compacted everything
        assert r["error"] in ("Already compacted", "Nothing to compact (session too small)"), r
    assert not summarizer_requests(world.fake), "Pi asked the model for a summary"


def test_pi_vcc_sentinel_and_engine_pi_defer_to_pi(world):
    world.fake.responder = lambda body: (
        {"text": "CANNED PI SUMMARY"} if SUMMARIZER in json.dumps(body) else {"text": "Sure: " + "detail " * 300}
    )
    pi = world.pi()
    for i in range(3):
        turn(pi, f"step {i}: tune {i}. {LONG}")
    r = pi.call({"type": "compact", "customInstructions": "__pi_vcc__"}, 60)
    assert r["success"], r
    asked = len(summarizer_requests(world.fake))
    assert "CANNED PI SUMMARY" in r["data"]["summary"] and asked >= 1
    pi.close()
    (world.agent / "fabric.json").write_text(json.dumps({"compaction": {"engine": "pi"}}))
    pi = world.pi("--continue")
    for i in range(2):
        turn(pi, f"more {i}: {LONG}")
    r = pi.call({"type": "compact"}, 60)
    assert r["success"], r
    assert "CANNED PI SUMMARY" in r["data"]["summary"] and len(summarizer_requests(world.fake)) > asked


def failing_compute_wrapper(tmp: Path) -> str:
    script = tmp / "fabric-broken"
    script.write_text(
        f'#!/bin/sh\nif [ "$2" = compute ]; then echo "engine exploded" >&2; exit 1; fi\nexec {FABRIC_CMD} "$@"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_missing_or_failing_fabric_lsp_cancels_and_records_a_failure(world, tmp_path):
    pi = world.pi(env=world.env(FABRIC_LSP_COMMAND=str(tmp_path / "no-such-fabric-lsp")))
    for i in range(3):
        turn(pi, f"step {i}: {LONG}")
    r = pi.call({"type": "compact"}, 60)
    assert not r["success"] and r["error"] == "Compaction cancelled", r
    assert not summarizer_requests(world.fake) and not compactions(world.session())
    pi.close()
    # fabric-lsp there but its engine fails: the editor's intent ends as a failed record
    pi = world.pi("--continue", env=world.env(FABRIC_LSP_COMMAND=failing_compute_wrapper(tmp_path)))
    turn(pi, "one more")
    session = world.session()
    world.fabric("compact", str(session))

    def failed() -> Any:
        status = json.loads(world.fabric("compact-status", str(session), "--json").stdout)
        return status.get("last") if "pending" not in status else None

    record = wait_for(failed, 10, "the failed record")
    assert record["status"] == "failed" and "Fabric compaction failed" in record["error"], record
    assert not summarizer_requests(world.fake) and not compactions(session)


def test_non_ascii_compaction_round_trips_unchanged(world, tmp_path):
    pi = world.pi()
    for i in range(4):
        text = "\n".join(f"Zeile {i}.{j}: Grüße aus 東京, Entwurf {j} 🚀 — naïve café" for j in range(120))
        turn(pi, f"schritt {i}: {text}")
    session = world.session()
    r = pi.call({"type": "compact"}, 60)
    assert r["success"], r
    comp = compactions(session)[0]
    assert "東京" in comp["summary"] and "\ufffd" not in json.dumps(comp, ensure_ascii=False)
    preview = preview_of(world, session, comp)
    assert comp["summary"] == preview["summary"] and comp["details"] == preview["details"]
    # the extension's reader gets > 64 KiB of multi-byte output whole (Pi's exec would not)
    big = "東京🚀é" * 40000
    expected = tmp_path / "expected.txt"
    expected.write_text(big, encoding="utf-8")
    emitter = tmp_path / "emit.py"
    emitter.write_text(
        "import json, sys\nsys.stdin.read()\n"
        f"sys.stdout.write(json.dumps({{'text': open({str(expected)!r}, encoding='utf-8').read()}},"
        " ensure_ascii=False))\n"
    )
    out = subprocess.run(
        [
            str(NODE),
            "--experimental-strip-types",
            str(Path(__file__).parent / "run_fabric_bytes.mjs"),
            str(EXTENSION / "extensions" / "fabric.ts"),
            f"{sys.executable} {emitter}",
            str(expected),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got == {"length": len(big.encode()), "equal": True, "replacement": 0}, got
    assert got["length"] > 64 * 1024


def logging_wrapper(tmp: Path) -> tuple[str, Path]:
    log = tmp / "calls.log"
    script = tmp / "fabric-logged"
    script.write_text(f'#!/bin/sh\necho "$2" >> {log}\nexec {FABRIC_CMD} "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), log


# each way of loading runs once, on one of the Pi versions in turn
@pytest.mark.parametrize(("version", "how"), spread(["agent-dir", "settings", "pi-install"]))
def test_extension_loads_from_the_agent_dir_settings_and_pi_install(version_world, tmp_path, how):
    world = version_world
    command, log = logging_wrapper(tmp_path)
    if how == "agent-dir":
        out = subprocess.run(
            [*FABRIC, "pi", "install", "--agent-dir", str(world.agent)], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        installed = world.agent / "extensions" / "fabric-lsp"
        cfg = json.loads((installed / "fabric-lsp.json").read_text())
        assert cfg["command"][0] == sys.executable
    elif how == "settings":
        write_agent(world.agent, world.fake.base_url, extra_settings={"extensions": [str(EXTENSION)]})
    else:  # Pi's own package manager, from the checkout's path
        out = subprocess.run(
            [str(NODE), str(world.real.cli), "install", str(EXTENSION)],
            cwd=world.proj,
            env=world.env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0 and "Installed" in out.stdout, (out.stdout, out.stderr)
    pi = world.pi(env=world.env(FABRIC_LSP_COMMAND=command), extension=False)
    turn(pi, "hello " + LONG)
    calls = log.read_text().split()
    assert calls[0] == "hold", calls
    # loaded and live: the lease names Pi's leaf after the turn
    leaf = lines(world.session())[-1]["id"]
    wait_for(
        lambda: any(
            json.loads(p.read_text()).get("leafId") == leaf
            for p in (world.agent / "fabric-lsp" / "leases").glob("*.json")
        ),
        10,
        "the lease's leaf",
    )


def test_a_stale_lease_of_a_killed_pi_no_longer_blocks_our_commit(world):
    pi = world.pi()
    for i in range(3):
        turn(pi, f"step {i}: {LONG}")
    session = world.session()
    os.kill(pi.proc.pid, signal.SIGKILL)
    pi.proc.wait(10)
    assert list((world.agent / "fabric-lsp" / "leases").glob("*.json")), "the lease is left behind"
    out = world.fabric("compact", str(session), "--wait", "--timeout", "20", "--quiet-interval", "0", "--json")
    record = json.loads(out.stdout)["record"]
    assert record["status"] == "committed" and compactions(session)[0]["id"] == record["entryId"]


def test_a_configured_threshold_below_pis_compacts_at_the_settled_boundary(world):
    # seed 002: tokenThresholds per provider/model (bounded to >= 1000); Pi's own threshold
    # here is 128000 - 2000 tokens, far above
    (world.agent / "fabric.json").write_text(
        json.dumps({"compaction": {"tokenThresholds": {"fakeai/fake-coder": 1000}}})
    )
    pi = world.pi()
    for i in range(3):
        turn(pi, f"step {i}: outline module {i}. {LONG}")
        if compactions(world.session()):
            break
    comp = compactions(world.session())
    assert comp, "the extension did not compact at the configured threshold"
    assert comp[0]["fromHook"] is True and comp[0]["summary"].startswith("[Session Goal]")
    assert comp[0]["id"] in {e["id"] for e in live_entries(pi)}
    assert not summarizer_requests(world.fake)


def test_a_configured_threshold_above_pis_defers_pis_threshold_compaction(world):
    write_agent(
        world.agent,
        world.fake.base_url,
        compaction={"enabled": True, "keepRecentTokens": 300, "reserveTokens": 2000},
        extra_settings={"defaultModel": "fake-tiny"},
    )
    (world.agent / "fabric.json").write_text(
        json.dumps({"compaction": {"tokenThresholds": {"fakeai/fake-tiny": 50000}}})
    )
    pi = world.pi()
    deferred = None
    for i in range(5):  # the same turns compact at Pi's threshold without the setting (test above)
        mark = pi.mark()
        turn(pi, f"step {i}: plan the cache {i}. {LONG}")
        ends = [e for e in pi.events[mark:] if e.get("type") == "compaction_end" and e.get("reason") == "threshold"]
        if ends:
            deferred = ends[0]
            break
    assert deferred is not None, "Pi never reached its own threshold"
    assert not deferred.get("result"), deferred  # Fabric deferred it: no compaction
    shown = [
        e.get("statusText")
        for e in pi.events
        if e.get("type") == "extension_ui_request"
        and e.get("method") == "setStatus"
        and e.get("statusKey") == "fabric-lsp"
    ]
    assert shown and shown[-1] == "fabric-lsp: bridge active, deferring Pi's threshold compaction to 50000 tokens", (
        shown
    )
    assert not compactions(world.session()), "Pi's threshold compaction was not deferred"
    # a manual compaction is never deferred
    r = pi.call({"type": "compact"}, 60)
    assert r["success"], r
    assert compactions(world.session())[0]["summary"] == r["data"]["summary"]
