"""The one way tests run the command line: `python -m fabric_lsp ARGS` as a real process,
with the test's interpreter, environment and working directory."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, overload


@overload
def run_cli(
    *args: str,
    env: Mapping[str, str] | None = ...,
    cwd: Path | str | None = ...,
    text: Literal[True] = ...,
    timeout: float = ...,
    python_flags: tuple[str, ...] = ...,
    input: str | None = ...,
) -> subprocess.CompletedProcess[str]: ...
@overload
def run_cli(
    *args: str,
    env: Mapping[str, str] | None = ...,
    cwd: Path | str | None = ...,
    text: Literal[False],
    timeout: float = ...,
    python_flags: tuple[str, ...] = ...,
    input: bytes | None = ...,
) -> subprocess.CompletedProcess[bytes]: ...
def run_cli(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    text: bool = True,
    timeout: float = 120,
    python_flags: tuple[str, ...] = (),
    input: Any = None,
) -> subprocess.CompletedProcess[Any]:
    """`fabric-lsp ARGS` run to its end; stdout and stderr captured (str when `text`)."""
    return subprocess.run(
        [sys.executable, *python_flags, "-m", "fabric_lsp", *args],
        capture_output=True,
        text=text,
        env=dict(env) if env is not None else None,
        cwd=str(cwd) if cwd is not None else None,
        timeout=timeout,
        input=input,
    )


def cli_json(*args: str, **kw: Any) -> Any:
    """The JSON `fabric-lsp ARGS` prints (callers pass `--json`); its stderr in the failure."""
    out = run_cli(*args, **kw)
    assert out.stdout, out.stderr
    return json.loads(out.stdout)
