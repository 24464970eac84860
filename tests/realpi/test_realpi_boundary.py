"""Our settled-boundary detection agrees with real Pi's own `agent_settled`.

Pi runs in RPC mode against a scripted model that first asks for a slow `bash` tool
call, then answers. While the tool runs, the file Pi has written ends with an assistant
`toolUse` message: not a boundary. After Pi emits `agent_settled`, the file ends a
finished turn, and once it has been quiet for the interval the session is settled.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time

import pytest
from fake_openai import FakeOpenAI
from realpi_kit import (
    real_pi,  # noqa: F401 (fixture)
    write_agent_dir,
)

from fabric_lsp.engine.intents.boundary import finished_turn
from fabric_lsp.engine.session import read_session
from tests.support.wire import WireIntentsService

pytestmark = pytest.mark.realpi


def responder(body):
    last = body["messages"][-1]
    if last.get("role") == "tool":
        return {"text": "The command finished."}
    return {"tool_call": {"id": "call_slow_1", "name": "bash", "arguments": {"command": "sleep 5; echo done"}}}


def test_boundary_matches_pi_agent_settled(tmp_path, real_pi):  # noqa: F811
    agent, home, proj = tmp_path / "agent", tmp_path / "home", tmp_path / "proj"
    home.mkdir()
    proj.mkdir()
    events: queue.Queue[dict] = queue.Queue()
    with FakeOpenAI(responder=responder) as server:
        write_agent_dir(agent, server.base_url)
        proc = subprocess.Popen(
            [str(real_pi.node), str(real_pi.cli), "--mode", "rpc"],
            cwd=proj,
            env=real_pi.env(agent, home),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )

        def pump() -> None:
            buf = b""
            assert proc.stdout is not None
            for chunk in iter(lambda: proc.stdout.read1(65536), b""):  # type: ignore[union-attr]
                buf += chunk
                *lines, buf = buf.split(b"\n")  # split on LF only (not U+2028)
                for raw in lines:
                    if raw.strip():
                        events.put(json.loads(raw))

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()

        def wait_for(kind: str, timeout: float = 60) -> dict:
            deadline = time.monotonic() + timeout
            while True:
                event = events.get(timeout=max(0.1, deadline - time.monotonic()))
                if event.get("type") == kind:
                    return event

        try:
            assert proc.stdin is not None
            proc.stdin.write(
                json.dumps({"id": "p1", "type": "prompt", "message": "Run the slow command"}).encode() + b"\n"
            )
            proc.stdin.flush()
            wait_for("tool_execution_start")
            sessions = sorted((agent / "sessions").glob("*/*.jsonl"))
            assert len(sessions) == 1
            path = sessions[0]
            svc = WireIntentsService(state_dir=tmp_path / "state", quiet_interval_s=0.5)
            mid = finished_turn(read_session(path), 0.5)
            assert not mid.finished and "toolUse" in mid.why
            time.sleep(0.7)  # quiet for the interval, but still mid-turn
            assert svc.is_settled(path) is False
            wait_for("agent_settled")
            end = finished_turn(read_session(path), 0.5)
            assert end.finished, end.why
            time.sleep(0.6)
            assert svc.is_settled(path) is True
            roles = [r.raw["message"]["role"] for r in read_session(path).records if r.type == "message"]
            system = ["system"] if real_pi.facts.system_messages else []  # Pi 1.x persists its prompt
            assert roles == [*system, "user", "assistant", "toolResult", "assistant"]
        finally:
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
