"""`fabric-lsp demo` drives the real server over stdio and reports every step."""

from __future__ import annotations

import json
import subprocess
import sys


def test_demo_runs_every_step():
    proc = subprocess.run(
        [sys.executable, "-m", "fabric_lsp", "demo", "--json"],
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["server"]["name"] == "fabric-lsp"
    assert report["serverExitCode"] == 0
    steps = report["steps"]
    assert steps["sessions"]["totalItems"] >= 1
    assert steps["recall"]["totalItems"] >= 1
    assert steps["expand"]["entries"] == 1
    assert steps["hover"]["chars"] > 0
    assert steps["workspaceSymbol"]["symbols"] >= 1
    assert steps["intents"] == {"requested": True, "cancelled": True}
    assert steps["compactionPreview"]["outcome"] == "compacted"
    assert steps["compactionPreview"]["summaryChars"] > 0


def test_demo_text_output_names_each_part():
    proc = subprocess.run(
        [sys.executable, "-m", "fabric_lsp", "demo", "--query", "reconcile"],
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for part in (
        "fabric/sessions",
        'fabric/recall "reconcile"',
        "fabric/expand",
        "workspace/symbol",
        "fabric/compactionPreview",
    ):
        assert part in proc.stdout


def test_demo_module_does_not_import_pygls():
    code = "import sys, fabric_lsp.commands.demo; assert 'pygls' not in sys.modules and 'lsprotocol' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_demo_on_a_given_agent_dir_writes_nothing_there(tmp_path):
    from fabric_e2e_harness import make_agent_dir

    agent = make_agent_dir(tmp_path)
    before = sorted(p.relative_to(agent) for p in agent.rglob("*"))
    proc = subprocess.run(
        [sys.executable, "-m", "fabric_lsp", "demo", "--json", "--agent-dir", str(agent), "--query", "calc"],
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert "intents" not in report["steps"]
    assert report["steps"]["recall"]["totalItems"] >= 1
    assert sorted(p.relative_to(agent) for p in agent.rglob("*")) == before
