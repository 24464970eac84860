"""What every CLI subcommand shares with the server: the settings layers, the protocol
decoder and the engine owner (fabric_lsp/engines.py).

A CLI command loads the same configuration layers as the server (`--agent-dir` and
`--trusted` play the part of the editor's `agentDir` and `trusted`; `--cwd` is the
workspace), decodes its arguments through the same protocol Structs, and calls the same
`Engines` method, so its `--json` output is the server's result for the same inputs.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Optional

from fabric_lsp import protocol
from fabric_lsp.config import ServerConfig, load_config
from fabric_lsp.engines import Engines

# Exit codes shared by every subcommand (docs/cli.md).
EXIT_OK = 0
EXIT_NOT_DONE = 1  # a valid answer that is not a success: skipped/cancelled preview, a domain error
EXIT_USAGE = 2  # bad arguments or invalid input (argparse also exits 2)


class CliError(Exception):
    """A message for stderr and an exit code."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def add_settings_arguments(p: argparse.ArgumentParser, *, cwd: bool = True) -> None:
    p.add_argument("--agent-dir", metavar="DIR", help="Pi agent dir (default: $PI_CODING_AGENT_DIR or ~/.pi/agent)")
    if cwd:
        p.add_argument("--cwd", metavar="DIR", help="project directory (default: the current directory)")
    p.add_argument(
        "--trusted",
        action="store_true",
        help="apply the project's .pi/fabric.json and .pi/settings.json (as a trusted editor workspace does)",
    )


def project_dir(args: argparse.Namespace) -> str:
    return os.path.abspath(getattr(args, "cwd", None) or os.getcwd())


def cli_config(args: argparse.Namespace, command: str, *, quiet: bool = False) -> ServerConfig:
    """The server's configuration layers for this invocation; warnings go to stderr,
    and with `-v` the files that were read."""
    init: dict[str, Any] = {}
    if getattr(args, "agent_dir", None):
        init["agentDir"] = os.path.abspath(os.path.expanduser(args.agent_dir))
    if getattr(args, "trusted", False):
        init["trusted"] = True
    if getattr(args, "index_dir", None):
        init["indexDir"] = os.path.abspath(os.path.expanduser(args.index_dir))
    cfg = load_config(workspace_root=Path(project_dir(args)), init_options=init or None)
    if quiet:  # a second look at the same settings: already reported
        return cfg
    for warning in cfg.warnings:
        print(f"fabric-lsp {command}: warning: {warning}", file=sys.stderr)
    if getattr(args, "verbose", 0):
        read = ", ".join(cfg.sources) if cfg.sources else "no settings files (defaults)"
        print(f"fabric-lsp {command}: settings read from {read}; agent dir {cfg.agent_dir}", file=sys.stderr)
    return cfg


def cli_engines(args: argparse.Namespace, command: str, *, quiet: bool = False) -> Engines:
    cfg = cli_config(args, command, quiet=quiet)
    return Engines(lambda: cfg)


def decode(command: str, method: str, params: dict[str, Any]) -> Any:
    """The protocol's strict decoder; its message names the field and the rule."""
    try:
        return protocol.decode_params(method, params)
    except protocol.InvalidParams as err:
        raise CliError(f"fabric-lsp {command}: invalid arguments: {err}") from None


def given(params: dict[str, Any]) -> dict[str, Any]:
    """`params` without the keys whose value is None (= not given)."""
    return {k: v for k, v in params.items() if v is not None}


def fail(err: CliError) -> int:
    print(err.message, file=sys.stderr)
    return err.code


def session_ref(value: Optional[str]) -> Optional[str]:
    """A relative path that exists is made absolute, as a user typing it means."""
    if value and not value.startswith("file://") and not os.path.isabs(value) and os.path.isfile(value):
        return os.path.abspath(value)
    return value
