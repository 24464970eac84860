"""End to end in real VS Code: the packaged .vsix in code-server, driven by headless
chromium through playwright-core (editors/vscode/test/e2e/run.mjs). One code-server at a
time: the two runs are sequential."""

from __future__ import annotations

import os

import pytest
from vscode_support import report, run_node


def _run(vscode_tools, vsix, shots, *extra: str):
    args = [
        "test/e2e/run.mjs",
        "--vsix",
        str(vsix),
        "--code-server",
        vscode_tools["codeServer"],
        "--chromium",
        vscode_tools["chromium"],
        "--screenshots",
        os.environ.get("FABRIC_VSCODE_SCREENSHOTS", str(shots)),
        *extra,
    ]
    proc = run_node(vscode_tools, args, 420)
    assert proc.returncode == 0, report(proc)
    assert " 0 failed" in proc.stdout, report(proc)
    return proc


@pytest.mark.editor
def test_palette_commands_in_real_vscode(vscode_tools, vsix, tmp_path):
    proc = _run(vscode_tools, vsix, tmp_path / "shots")
    passed = [line.removeprefix("ok - ") for line in proc.stdout.splitlines() if line.startswith("ok - ")]
    for name in (
        "Recall…",
        "Expand Entry…",
        "hover previews",
        "Sessions…",
        "Preview Compaction renders",
        "Preview Compaction with Instructions…",
        "Request Compaction…",
        "Reload Configuration",
        "Recall… item button opens the session JSONL",
        "Cancel Compaction withdraws",
        "Show Log and Restart Server",
    ):
        assert any(p.startswith(name) for p in passed), f"check {name!r} did not run\n{report(proc)}"


@pytest.mark.editor
def test_untrusted_workspace_runs_the_server_untrusted(vscode_tools, vsix, tmp_path):
    _run(vscode_tools, vsix, tmp_path / "shots", "--untrusted")


@pytest.mark.editor
def test_sidebar_views_in_real_vscode(vscode_tools, vsix, tmp_path):
    """Sessions tree (paged past 100 sessions), Compaction Plan webview, Recall Results view
    (highlights, click-through, F4/Shift+F4), status bar item, walkthrough (test/e2e/views.mjs)."""
    args = [
        "test/e2e/views.mjs",
        "--vsix",
        str(vsix),
        "--code-server",
        vscode_tools["codeServer"],
        "--chromium",
        vscode_tools["chromium"],
        "--screenshots",
        os.environ.get("FABRIC_VSCODE_SCREENSHOTS", str(tmp_path / "shots")),
    ]
    proc = run_node(vscode_tools, args, 420)
    assert proc.returncode == 0, report(proc)
    assert " 0 failed" in proc.stdout, report(proc)


@pytest.mark.editor
def test_extension_details_page_shows_the_readme_without_its_images(vscode_tools, vsix, tmp_path):
    """The Extensions view's details page of the installed VSIX (test/e2e/readme.mjs): the
    README renders, every image keeps its alt text, and VS Code's sanitizer drops the src of
    relative (extension-local) images, so none loads; of all link forms only https loads."""
    args = [
        "test/e2e/readme.mjs",
        "--vsix",
        str(vsix),
        "--code-server",
        vscode_tools["codeServer"],
        "--chromium",
        vscode_tools["chromium"],
        # Not $FABRIC_VSCODE_SCREENSHOTS: pointed at images/, that would ship these two
        # pictures (of a README without its pictures) in the VSIX.
        "--screenshots",
        str(tmp_path / "shots"),
    ]
    proc = run_node(vscode_tools, args, 300)
    assert proc.returncode == 0, report(proc)
    assert " 0 failed" in proc.stdout, report(proc)
    for name in (
        "every README image is an <img> with its alt text",
        "VS Code drops the src of every relative README image",
        "control: the header icon",
        "of all README link forms only an https URL loads",
    ):
        assert f"ok - {name}" in proc.stdout, f"check {name!r} did not pass\n{report(proc)}"


def _bundled(vscode_tools, vsix, tmp_path, mode: str):
    """test/e2e/bundled.mjs: the VSIX installed with `code-server --install-extension` into a
    fresh extensions dir, no fabric.server.command and no fabric-lsp on PATH."""
    args = [
        "test/e2e/bundled.mjs",
        "--vsix",
        str(vsix),
        "--code-server",
        vscode_tools["codeServer"],
        "--chromium",
        vscode_tools["chromium"],
        "--screenshots",
        os.environ.get("FABRIC_VSCODE_SCREENSHOTS", str(tmp_path / "shots")),
        "--mode",
        mode,
    ]
    proc = run_node(vscode_tools, args, 480)
    assert proc.returncode == 0, report(proc)
    assert " 0 failed" in proc.stdout, report(proc)
    return proc


@pytest.mark.editor
def test_bundled_server_installs_itself_and_answers_a_recall(vscode_tools, vsix, tmp_path):
    proc = _bundled(vscode_tools, vsix, tmp_path, "online")
    assert "ok - Recall… is answered by the bundled server" in proc.stdout, report(proc)


@pytest.mark.editor
def test_bundled_server_installs_offline_from_the_bundled_wheelhouse(vscode_tools, vsix, tmp_path):
    proc = _bundled(vscode_tools, vsix, tmp_path, "offline")
    assert "dependencies from wheelhouse" in proc.stdout, report(proc)


@pytest.mark.editor
def test_no_python_shows_one_message_with_an_action(vscode_tools, vsix, tmp_path):
    _bundled(vscode_tools, vsix, tmp_path, "no-python")
