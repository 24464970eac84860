"""engine/alloc.py: the fixed mmap threshold reaches this process (glibc) and the child
interpreters, and can be turned off."""

from __future__ import annotations

import subprocess
import sys

from fabric_lsp.engine import alloc, childproc


def test_children_get_the_threshold_and_the_knob_turns_it_off(monkeypatch):
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("FABRIC_LSP_MMAP_THRESHOLD", raising=False)
    assert childproc.child_env()["MALLOC_MMAP_THRESHOLD_"] == str(alloc.MMAP_THRESHOLD)
    monkeypatch.setenv("FABRIC_LSP_MMAP_THRESHOLD", "0")
    assert "MALLOC_MMAP_THRESHOLD_" not in childproc.child_env()
    assert alloc.tune() is False
    monkeypatch.setenv("FABRIC_LSP_MMAP_THRESHOLD", "524288")
    assert childproc.child_env()["MALLOC_MMAP_THRESHOLD_"] == "524288"
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")  # the user's own setting wins
    assert childproc.child_env()["MALLOC_MMAP_THRESHOLD_"] == "65536"
    assert alloc.tune() is False


def test_the_allocator_takes_the_threshold_here():
    """This machine runs glibc: a fresh interpreter (as the CLI and server start) sets it."""
    env = childproc.child_env()
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    env.pop("FABRIC_LSP_MMAP_THRESHOLD", None)
    out = subprocess.run(
        [sys.executable, "-c", "from fabric_lsp.engine import alloc; print(alloc.tune())"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert out.stdout.strip() == "True"
