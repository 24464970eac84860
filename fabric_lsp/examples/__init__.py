"""The small example Pi agent dir shipped inside the package.

``example_agent_dir()/sessions/<encoded cwd>/<ts>_<id>.jsonl`` holds seven sessions over two
projects (/home/user/projects/orbit and /home/user/projects/ledger) with branches (one with
a branch_summary), tool errors, provider-error retries, truncated tool output, Pi and
extension-hook compactions, bashExecution, custom messages, labels, session names, model
and thinking changes, a tiny image and non-ASCII text. The seventh (orbit, ``01a18ac0…``) is a
five-hour afternoon of about 144k estimated tokens, not yet compacted, so a preview at Pi's
defaults (keepRecentTokens 20000, reserveTokens 16384, contextWindow 200000) compacts it. The files are generated
deterministically by ``bench/corpus.py --example`` (regenerate with ``scripts/gen-examples``);
a test checks that regenerating gives byte-identical files.
"""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["copy_example_agent_dir", "example_agent_dir", "example_session_dir"]


def example_agent_dir() -> Path:
    """The agent dir of the embedded example (read-only package data)."""
    return Path(__file__).resolve().parent / "agent"


def example_session_dir() -> Path:
    """``example_agent_dir() / "sessions"``."""
    return example_agent_dir() / "sessions"


def copy_example_agent_dir(dest: str | Path) -> Path:
    """Copy the example agent dir to ``dest`` (created) and return it.

    Anything that appends to sessions (the intents commit path, live-writer tests) must work
    on a copy: the shipped files are checked byte for byte against the generator.
    """
    dest = Path(dest)
    shutil.copytree(example_agent_dir(), dest, dirs_exist_ok=True)
    return dest
