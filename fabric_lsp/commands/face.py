"""What every CLI subcommand shares with the server: the settings layers, the protocol
decoder and the engine owner (fabric_lsp/engine_owner.py).

A CLI command loads the same configuration layers as the server (`--agent-dir` and
`--trusted` play the part of the editor's `agentDir` and `trusted`; `--cwd` is the
workspace), decodes its arguments through the same protocol Structs, and calls the same
`Engines` method, so its `--json` output is the server's result for the same inputs.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from fabric_lsp.quick_cli import agent_dir_of, answered_note, has_surrogates, settings_report
from fabric_lsp.quick_cli import init_options as _init_options
from fabric_lsp.quick_cli import session_ref as session_ref

if TYPE_CHECKING:
    from fabric_lsp.config import ServerConfig
    from fabric_lsp.engine_owner import Engines
    from fabric_lsp.local_socket import Client

# The protocol, the settings loader and the engines are imported on first use: a memory
# read answered by a running server (the local socket, below) needs none of them, and
# its latency is mostly this process' start (docs/cli.md, "A running server answers").

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


def cli_init_options(args: argparse.Namespace) -> dict[str, Any]:
    """`--agent-dir`, `--trusted` and `--index-dir` as the editor's initializationOptions."""
    return _init_options(vars(args))


def cli_config(args: argparse.Namespace, command: str, *, quiet: bool = False) -> ServerConfig:
    """The server's configuration layers for this invocation; warnings go to stderr,
    and with `-v` the files that were read."""
    from pathlib import Path

    from fabric_lsp.config import load_config

    init = cli_init_options(args)
    cfg = load_config(workspace_root=Path(project_dir(args)), init_options=init or None)
    if not quiet:  # a second look at the same settings: already reported
        report_settings(args, command, warnings=cfg.warnings, sources=cfg.sources, agent_dir=str(cfg.agent_dir))
    return cfg


def report_settings(args: argparse.Namespace, command: str, *, warnings: Any, sources: Any, agent_dir: str) -> None:
    """What a command says about its settings on stderr: each warning, and with `-v` the
    files that were read."""
    text = settings_report(
        command, getattr(args, "verbose", 0), warnings=warnings, sources=sources, agent_dir=agent_dir
    )
    if text:
        sys.stderr.write(text)
        sys.stderr.flush()


def cli_engines(args: argparse.Namespace, command: str, *, quiet: bool = False) -> Engines:
    if command == "history":  # a running server answers first (the local socket; memory.py asks it itself)
        client = server_client(args, command)
        if client is not None:
            if not quiet:
                report_served_settings(args, command, client)
            return _ServerFirstEngines(args, command, client)  # type: ignore[return-value]
    return _local_engines(args, command, quiet=quiet)


# Set-up deferred by cli.main for the memory reads (logging), run before this process
# computes an answer itself.
BEFORE_COMPUTE: list[Any] = []


def _local_engines(args: argparse.Namespace, command: str, *, quiet: bool) -> Engines:
    from fabric_lsp.engine import alloc
    from fabric_lsp.engine_owner import Engines

    while BEFORE_COMPUTE:
        BEFORE_COMPUTE.pop(0)()
    alloc.tune()  # large buffers in their own mappings (engine/alloc.py); cli.main skips it for memory reads
    cfg = cli_config(args, command, quiet=quiet)
    return Engines(lambda: cfg)


def decode(command: str, method: str, params: dict[str, Any]) -> Any:
    """The protocol's strict decoder; its message names the field and the rule."""
    from fabric_lsp import protocol

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


# -- a running server answers first (fabric_lsp/local_socket.py) -----------------------------

# the memory reads a server answers over the local socket, by command
SERVED_COMMANDS = {
    "recall": "fabric/recall",
    "sessions": "fabric/sessions",
    "expand": "fabric/expand",
    "history": "fabric/fileHistory",
}

_clients: dict[tuple[str, str, str], Client | None] = {}  # one connection per process and settings
_noted: set[str] = set()


def new_invocation() -> None:
    """Forget the connections, notes and deferred set-up of an earlier `main()` in this
    process."""
    for client in set(c for c in _clients.values() if c is not None):
        client.close()
    _clients.clear()
    _noted.clear()
    BEFORE_COMPUTE.clear()


def cli_agent_dir(args: argparse.Namespace) -> str | None:
    """The agent dir these arguments name, absolute (as config.load_config resolves it),
    or None when it depends on the working directory (a relative $PI_CODING_AGENT_DIR)."""
    return agent_dir_of(vars(args))


def _note(args: argparse.Namespace, command: str, message: str, *, level: int = 1) -> None:
    if getattr(args, "verbose", 0) >= level and message not in _noted:
        _noted.add(message)
        print(f"fabric-lsp {command}: {message}", file=sys.stderr)


def server_client(args: argparse.Namespace, command: str) -> Client | None:
    """A running server of these settings (hello matched), or None: then this process
    computes its answers itself. Off with FABRIC_LSP_SOCKET=0."""
    from fabric_lsp import local_socket

    agent = cli_agent_dir(args)
    if agent is None or not local_socket.available():
        return None
    cwd = project_dir(args)
    init = cli_init_options(args)
    key = (agent, cwd, repr(sorted(init.items())))
    if key not in _clients:
        try:
            _clients[key] = local_socket.connect(
                agent,
                local_socket.settings_inputs(cwd=cwd, init=init),
                note=lambda m: _note(args, command, f"local socket: {m}", level=2),
            )
        except (OSError, UnicodeError):
            _clients[key] = None
    return _clients[key]


def _forget(client: Client) -> None:
    for key, known in list(_clients.items()):
        if known is client:
            _clients[key] = None
    client.close()


def report_served_settings(args: argparse.Namespace, command: str, client: Client) -> None:
    """The settings report of `cli_config`, from the server's resolution of our inputs
    (the same load_config, the same files)."""
    s = client.settings
    report_settings(
        args,
        command,
        warnings=s.get("warnings") or (),
        sources=s.get("sources") or (),
        agent_dir=str(s.get("agentDir")),
    )


class ServedAnswer:
    """A server's answer to one memory read: `raw` is its result's JSON bytes (exactly
    what `--json` prints), `value_error` the engine's ValueError message instead,
    `settings` the settings the server resolved for us."""

    def __init__(self, client: Client, raw: bytes, value: Any, value_error: str | None) -> None:
        self.client = client
        self.raw = raw
        self.value = value
        self.value_error = value_error
        self.settings = client.settings

    def result(self) -> WireResult:
        out = WireResult(self.value)
        out.raw = self.raw
        return out


class WireResult(dict):  # type: ignore[type-arg]
    """A result object with the exact bytes it was read from (`raw`)."""

    raw: bytes = b""


def ask_server(
    args: argparse.Namespace, command: str, params: dict[str, Any], *, method: str | None = None, quiet: bool = False
) -> ServedAnswer | None:
    """`params` (wire-shaped, not yet decoded) answered by a running server, or None
    (no server, other settings, a lost connection, a server-side failure): then compute
    it here. Invalid params raise CliError with the decoder's message, as `decode` does;
    unless `quiet`, the settings are reported on stderr as `cli_config` reports them."""
    method = method or SERVED_COMMANDS[command]
    if has_surrogates(params):  # JSON cannot carry a lone surrogate: computed here
        return None
    client = server_client(args, command)
    if client is None:
        return None
    answer = client.request(method, params, cwd=project_dir(args))
    if answer is None or (answer.raw is None and answer.error is None):
        _note(args, command, f"the server (pid {client.pid}) did not answer; computing it here")
        _forget(client)
        return None
    value_error = None
    error = answer.error
    if error is not None:
        raw_data = error.get("data")
        data: dict[str, Any] = raw_data if isinstance(raw_data, dict) else {}
        stage = data.get("stage")
        if stage == "params":
            _note(args, command, answered_note(client))
            raise CliError(f"fabric-lsp {command}: invalid arguments: {data.get('detail')}")
        if stage != "engine":
            _note(
                args,
                command,
                f"the server (pid {client.pid}) answered {error.get('code')}: "
                f"{error.get('message')}; computing it here",
            )
            return None
        value_error = str(data.get("detail"))
    raw, value = answer.raw or b"null", None
    if value_error is None:
        from fabric_lsp.local_socket import wire_decode

        try:
            value = wire_decode(raw)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            _note(args, command, f"the server (pid {client.pid}) answered no result object; computing it here")
            _forget(client)
            return None
    if not quiet:
        report_served_settings(args, command, client)
    _note(args, command, answered_note(client))
    return ServedAnswer(client, raw, value, value_error)


class _ServerFirstEngines:
    """What `cli_engines` gives a served command (`history`): its engine call asks the
    running server first, anything else (and a failed ask) runs in this process."""

    def __init__(self, args: argparse.Namespace, command: str, client: Client) -> None:
        self._args = args
        self._command = command
        self._client = client
        self._engines: Engines | None = None

    def _local(self) -> Engines:
        if self._engines is None:
            self._engines = _local_engines(self._args, self._command, quiet=True)
        return self._engines

    def file_history(self, p: Any, cwd: str | None, cancel: Any = None, activity: Any = None) -> Any:
        from fabric_lsp import protocol

        answer = ask_server(
            self._args, self._command, protocol.params_json(p), method=protocol.FILE_HISTORY, quiet=True
        )
        if answer is None:
            return self._local().file_history(p, cwd, cancel, activity)
        if answer.value_error is not None:
            raise ValueError(answer.value_error)
        import msgspec

        return msgspec.json.decode(answer.raw)  # history prints msgspec's encoding of it: the same bytes

    def close(self) -> None:
        if self._engines is not None:
            self._engines.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._local(), name)
