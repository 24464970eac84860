"""The universal wheel installs on Windows too, so the server's startup path must not need
POSIX-only modules: the real server, started with `fcntl`, `resource`, `pwd`, `grp` and
`termios` made unimportable (as on Windows), answers `initialize`, a recall and a file
history on the examples written by `fabric-lsp examples`.

Known limit: the compaction-intent path (`fabric/compact/*`) imports `fcntl`
(engine/intents/store.py, commit.py), so on Windows those requests fail, with an error that
names the missing module (`IntentsUnavailable`), also when they race the server's own
start-up step that starts the intents engine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fabric_lsp.commands.demo import LspError, StdioLspClient

POSIX_ONLY = ("fcntl", "resource", "pwd", "grp", "termios")
BOOT = (
    "import sys\n"
    f"for name in {POSIX_ONLY!r}:\n"
    "    sys.modules[name] = None\n"
    "from fabric_lsp.cli import main\n"
    "sys.exit(main())\n"
)


def test_the_server_starts_and_answers_without_posix_only_modules(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    out = subprocess.run(
        [sys.executable, "-m", "fabric_lsp", "examples", str(agent)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    project = agent / "projects" / "orbit"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PI_", "FABRIC_"))}
    env.update(PI_CODING_AGENT_DIR=str(agent), HOME=str(tmp_path / "home"))
    stderr = open(tmp_path / "server.err", "w")
    client = StdioLspClient([sys.executable, "-I", "-c", BOOT], env=env, stderr=stderr)
    try:
        init = client.request(
            "initialize",
            {
                "processId": None,
                "rootUri": project.as_uri(),
                "capabilities": {},
                "workspaceFolders": [{"uri": project.as_uri(), "name": "orbit"}],
            },
        )
        assert init["serverInfo"]["name"] == "fabric-lsp"
        client.notify("initialized", {})
        recall = client.request("fabric/recall", {"query": "convert_anomaly", "scope": "project", "pageSize": 3})
        assert recall["items"], recall
        history = client.request("fabric/fileHistory", {"uri": (project / "orbit" / "tle.py").as_uri()})
        assert len(history["sessions"]) == 3, history
        # the blocked modules really are unimportable in that process
        try:
            client.request("fabric/compact/status", {"session": "01a18ac0"})
        except LspError as err:
            assert "fcntl" in str(err), err
    finally:
        code = client.close()
        stderr.close()
    assert code == 0, (tmp_path / "server.err").read_text()[-3000:]


RACE = (
    "import json, sys, threading\n"
    f"for name in {POSIX_ONLY!r}:\n"
    "    sys.modules[name] = None\n"
    "from fabric_lsp.config import load_config\n"
    "from fabric_lsp.engine_owner import Engines\n"
    "seen = []\n"
    "for _ in range(int(sys.argv[1])):\n"
    "    owner = Engines(lambda: load_config(env={'PI_CODING_AGENT_DIR': sys.argv[2]}))\n"
    "    gate = threading.Barrier(4)\n"
    "    def call():\n"
    "        gate.wait()\n"
    "        try:\n"
    "            owner.intents()\n"
    "        except Exception as err:\n"
    "            seen.append(f'{type(err).__name__}: {err}')\n"
    "    threads = [threading.Thread(target=call) for _ in range(4)]\n"
    "    for t in threads: t.start()\n"
    "    for t in threads: t.join()\n"
    "    sys.modules.pop('fabric_lsp.engine.intents.service', None)\n"
    "print(json.dumps(seen))\n"
)


def test_callers_racing_for_the_intents_engine_all_get_the_platform_error(tmp_path: Path) -> None:
    """The server's start-up steps start the intents engine while an editor's first
    `fabric/compact/status` may ask for it: without `fcntl`, both imports fail, and a thread
    that came second used to get the half-made module and report `cannot import name
    'IntentsService'` (CI, session 50). Four threads at once, 30 times: every one of them
    gets the error that names the platform's missing module."""
    out = subprocess.run(
        [sys.executable, "-I", "-c", RACE, "30", str(tmp_path / "agent")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert len(seen) == 4 * 30
    wrong = [msg for msg in seen if not (msg.startswith("IntentsUnavailable:") and "fcntl" in msg)]
    assert not wrong, wrong[:3]
