"""The universal wheel installs on Windows too, so the server's startup path must not need
POSIX-only modules: the real server, started with `fcntl`, `resource`, `pwd`, `grp` and
`termios` made unimportable (as on Windows), answers `initialize`, a recall and a file
history on the examples written by `fabric-lsp examples`.

Known limit, not covered here: the compaction-intent path (`fabric/compact/*`) imports
`fcntl` (engine/intents/store.py, commit.py) and fails on Windows with ModuleNotFoundError.
"""

from __future__ import annotations

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
