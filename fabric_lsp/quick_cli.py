"""The quick path of the memory reads: `fabric-lsp recall|sessions|expand|history … --json`
answered by a running server with nothing but this module, fabric_lsp/local_socket.py and
the C parts of the standard library.

A served query's latency is its process: interpreter start plus imports plus one round trip.
argparse (with `re` and `enum`), `json`, `typing` and the subcommand registry cost a
process about as much as the interpreter's own start, so a `--json` query in the plain
forms below is parsed here, strictly, and sent to the server (commands/face.py's rules:
the same hello, the same settings, the same checks, in the same order). Anything else —
`--help`, an abbreviated or repeated option, `--opt=value` of a flag, a value or positional
that starts with `-`, `--log-file`, text output, `--range`, a bare entry reference, a
`session:` scope naming an existing file, no server — returns None, and the full CLI
(argparse, commands/memory.py and commands/history.py) runs as if this module did not
exist: it asks the server itself or computes the answer. So every outcome here is one the
full CLI prints for the same arguments (tests/reliability/test_local_socket.py compares
them byte for byte; tests/test_quick_cli.py checks this parser against argparse's).

Also the strings and small rules both paths share: `session_ref`, `index_hint`, the
agent-dir error and the settings report.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from fabric_lsp.local_socket import Client

_FLAG, _STR, _INT = "flag", "str", "int"
_SETTINGS = {
    "--json": ("json", _FLAG),
    "--agent-dir": ("agent_dir", _STR),
    "--cwd": ("cwd", _STR),
    "--trusted": ("trusted", _FLAG),
    "--index-dir": ("index_dir", _STR),
}
_BRANCHES = {"--branches": ("branches", ("active", "all"))}
_EXPECTED = {
    "--expected-source-hash": ("expected_source_hash", _STR),
    "--expected-lineage-fingerprint": ("expected_lineage_fingerprint", _STR),
}
_SETTINGS_DEFAULTS = {
    "json": False,
    "agent_dir": None,
    "cwd": None,
    "trusted": False,
    "index_dir": None,
    "branches": None,
}

# command -> (positional dest, required?), options (option -> (dest, kind or choices)), defaults:
# exactly the arguments commands/memory.py and commands/history.py declare (checked by
# tests/test_quick_cli.py against their argparse parsers)
SPECS: dict[str, tuple[tuple[str, bool], dict[str, tuple[str, Any]], dict[str, Any]]] = {
    "recall": (
        ("query", False),
        {
            "--mode": ("mode", ("literal", "regex")),
            "--scope": ("scope", _STR),
            "--page": ("page", _INT),
            "--page-size": ("page_size", _INT),
            "--range": ("range", _STR),
            **_EXPECTED,
            **_SETTINGS,
            **_BRANCHES,
        },
        {
            "query": None,
            "mode": "literal",
            "scope": "session",
            "page": 1,
            "page_size": 25,
            "range": None,
            "expected_source_hash": None,
            "expected_lineage_fingerprint": None,
            **_SETTINGS_DEFAULTS,
        },
    ),
    "sessions": (
        ("", False),
        {
            "--scope": ("scope", _STR),
            "--page": ("page", _INT),
            "--page-size": ("page_size", _INT),
            **_SETTINGS,
            **_BRANCHES,
        },
        {"scope": "project", "page": 1, "page_size": 50, **_SETTINGS_DEFAULTS},
    ),
    "expand": (
        ("session", True),
        {
            "--session": ("in_session", _STR),
            "--indices": ("indices", _STR),
            "--entry-ids": ("entry_ids", _STR),
            "--operation-addresses": ("operation_addresses", _STR),
            "--range": ("range", _STR),
            **_EXPECTED,
            **_SETTINGS,
            **_BRANCHES,
        },
        {
            "in_session": None,
            "indices": None,
            "entry_ids": None,
            "operation_addresses": None,
            "range": None,
            "expected_source_hash": None,
            "expected_lineage_fingerprint": None,
            **_SETTINGS_DEFAULTS,
        },
    ),
    "history": (
        ("path", True),
        {
            "--json": ("json", _FLAG),
            "--scope": ("scope", ("project", "global")),
            **_BRANCHES,
            "--page": ("page", _INT),
            "--page-size": ("page_size", _INT),
            "--agent-dir": ("agent_dir", _STR),
            "--cwd": ("cwd", _STR),
            "--trusted": ("trusted", _FLAG),
            "--index-dir": ("index_dir", _STR),
        },
        {
            "json": False,
            "scope": None,
            "branches": None,
            "page": None,
            "page_size": None,
            "agent_dir": None,
            "cwd": None,
            "trusted": False,
            "index_dir": None,
        },
    ),
}
METHODS = {
    "recall": "fabric/recall",
    "sessions": "fabric/sessions",
    "expand": "fabric/expand",
    "history": "fabric/fileHistory",
}
_SELECTORS = ("indices", "entry_ids", "operation_addresses", "range")


def parse(argv: list[str]) -> tuple[str, int, dict[str, Any]] | None:
    """(command, verbosity, the subcommand's arguments as argparse's Namespace holds them)
    for the plain forms argparse reads one way only, else None."""
    verbose, i = 0, 0
    while i < len(argv) and argv[i].startswith("-"):
        token = argv[i]
        if token == "--verbose" or (len(token) > 1 and token.strip("v") == "-"):
            verbose += 1 if token == "--verbose" else len(token) - 1
            i += 1
            continue
        return None  # --log-file, --help, --version, anything else: the full parser's
    if i >= len(argv) or argv[i] not in SPECS:
        return None
    command = argv[i]
    (positional, required), options, defaults = SPECS[command]
    out: dict[str, Any] = dict(defaults)
    seen: set[str] = set()
    positionals: list[str] = []
    rest = argv[i + 1 :]
    j = 0
    while j < len(rest):
        token = rest[j]
        j += 1
        if not token.startswith("-") or token == "-":
            positionals.append(token)
            continue
        name, eq, inline = token.partition("=")
        spec = options.get(name)
        if spec is None or name in seen:
            return None  # unknown, abbreviated, -h, --, repeated: argparse decides
        seen.add(name)
        dest, kind = spec
        if kind == _FLAG:
            if eq:
                return None
            out[dest] = True
            continue
        if eq:
            value = inline
        elif j < len(rest) and not rest[j].startswith("-"):
            value = rest[j]
            j += 1
        else:
            return None
        if kind == _INT:
            try:
                out[dest] = int(value)
            except ValueError:
                return None
        elif isinstance(kind, tuple):
            if value not in kind:
                return None
            out[dest] = value
        else:
            out[dest] = value
    if len(positionals) > 1 or (required and not positionals) or (positionals and not positional):
        return None
    if positionals:
        out[positional] = positionals[0]
    if command == "expand" and sum(out[k] is not None for k in _SELECTORS) > 1:
        return None  # the mutually exclusive group: argparse's error
    return command, verbose, out


# -- what both paths share ------------------------------------------------------------------


def session_ref(value: str | None) -> str | None:
    """A relative path that exists is made absolute, as a user typing it means."""
    if value and not value.startswith("file://") and not os.path.isabs(value) and os.path.isfile(value):
        return os.path.abspath(value)
    return value


_BUDGET_REASONS = ("max_sync_sessions", "max_sync_source_bytes", "indexing_in_progress")


def index_hint(coverage: dict[str, Any]) -> str | None:
    """How to complete an answer the per-call budget cut short (the CLI has no background
    indexer: `fabric-lsp index` builds the rest once, later calls read it from disk)."""
    stale = int(coverage.get("staleSessions") or 0)
    if stale <= 0 or not any(r in coverage.get("reasons", ()) for r in _BUDGET_REASONS):
        return None
    noun = "session" if stale == 1 else "sessions"
    return (
        f"{coverage.get('indexedSessions', 0)} of {coverage.get('eligibleSessions', 0)} sessions are indexed; "
        f"run `fabric-lsp index` to index the remaining {stale} {noun}"
    )


def agent_dir_error(agent_dir: str) -> str | None:
    """The memory reads' message for an agent dir that does not exist, or None."""
    if os.path.isdir(agent_dir):
        return None
    return (
        f"the Pi agent dir {agent_dir} does not exist "
        "(set --agent-dir or PI_CODING_AGENT_DIR; `fabric-lsp examples DIR` writes example sessions)"
    )


def settings_report(command: str, verbose: int, *, warnings: Any, sources: Any, agent_dir: str) -> str:
    """What a command says about its settings on stderr (commands/face.py, cli_config)."""
    lines = [f"fabric-lsp {command}: warning: {w}\n" for w in warnings]
    if verbose:
        read = ", ".join(sources) if sources else "no settings files (defaults)"
        lines.append(f"fabric-lsp {command}: settings read from {read}; agent dir {agent_dir}\n")
    return "".join(lines)


def answered_note(client: Client) -> str:
    return f"answered by the fabric-lsp server (pid {client.pid}) over {client.path}"


def init_options(args: dict[str, Any]) -> dict[str, Any]:
    """`--agent-dir`, `--trusted` and `--index-dir` as the editor's initializationOptions."""
    init: dict[str, Any] = {}
    if args.get("agent_dir"):
        init["agentDir"] = os.path.abspath(os.path.expanduser(args["agent_dir"]))
    if args.get("trusted"):
        init["trusted"] = True
    if args.get("index_dir"):
        init["indexDir"] = os.path.abspath(os.path.expanduser(args["index_dir"]))
    return init


def agent_dir_of(args: dict[str, Any]) -> str | None:
    """The agent dir these arguments name, absolute (as config.load_config resolves it),
    or None when it depends on the working directory (a relative $PI_CODING_AGENT_DIR)."""
    if args.get("agent_dir"):
        return os.path.abspath(os.path.expanduser(args["agent_dir"]))
    value = os.environ.get("PI_CODING_AGENT_DIR")
    if value:
        path = os.path.expanduser(value)
        return path if os.path.isabs(path) else None
    return os.path.join(os.path.expanduser("~"), ".pi", "agent")


def has_surrogates(value: Any) -> bool:
    """A lone surrogate (from undecodable argv bytes) cannot travel as JSON text."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(has_surrogates(k) or has_surrogates(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(has_surrogates(v) for v in value)
    return False


# -- the quick path -------------------------------------------------------------------------


def _params(command: str, a: dict[str, Any]) -> dict[str, Any] | None:
    """The wire params commands/memory.py and commands/history.py build, or None for a
    form they build with more than this module knows (ranges, references)."""
    if command == "recall":
        if a["range"] is not None:
            return None
        p: dict[str, Any] = {"scope": a["scope"], "queryMode": a["mode"], "page": a["page"], "pageSize": a["page_size"]}
        if a["query"] is not None:
            p["query"] = a["query"]
        if a["branches"]:
            p["branches"] = a["branches"]
    elif command == "sessions":
        p = {"scope": a["scope"], "page": a["page"], "pageSize": a["page_size"]}
        if a["branches"]:
            p["branches"] = a["branches"]
        return p
    elif command == "expand":
        if all(a[k] is None for k in _SELECTORS) or a["range"] is not None:
            return None  # a reference to parse, or a range: commands/memory.py
        p = {"session": session_ref(a["session"])}
        if a["branches"]:
            p["branches"] = a["branches"]
        if a["indices"] is not None:
            try:
                p["indices"] = [int(v) for v in _items(a["indices"])]
            except ValueError:
                return None
        if a["entry_ids"] is not None:
            p["entryIds"] = _items(a["entry_ids"])
        if a["operation_addresses"] is not None:
            p["operationAddresses"] = _items(a["operation_addresses"])
    else:  # history
        p = {
            k: v
            for k, v in (
                ("scope", a["scope"]),
                ("branches", a["branches"]),
                ("page", a["page"]),
                ("pageSize", a["page_size"]),
            )
            if v is not None
        }
        path = a["path"]
        if path.startswith("file:"):
            p["uri"] = path
        else:
            p["path"] = os.path.abspath(os.path.expanduser(path))
        return p
    if a["expected_source_hash"]:
        p["expectedSourceHash"] = a["expected_source_hash"]
    if a["expected_lineage_fingerprint"]:
        p["expectedLineageFingerprint"] = a["expected_lineage_fingerprint"]
    return p


def _items(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


_NOT_FOUND = frozenset({"session_not_found", "ambiguous_session", "address_not_found"})


def run(argv: list[str]) -> int | None:
    """The exit status of a `--json` memory read a running server answered, or None: then
    nothing was printed and the full CLI takes over."""
    parsed = parse(argv)
    if parsed is None:
        return None
    command, verbose, a = parsed
    if not a["json"]:
        return None
    params = _params(command, a)
    if params is None or has_surrogates(params):
        return None
    scope = params.get("scope") if command != "history" else None
    if isinstance(scope, str) and scope.startswith("session:"):
        ref = scope[len("session:") :]
        if os.path.isfile(ref[len("file://") :] if ref.startswith("file://") else ref):
            return None  # whether it is a Pi session is checked by commands/memory.py
    agent = agent_dir_of(a)
    cwd = os.path.abspath(a["cwd"] or os.getcwd())
    if agent is None:
        return None
    from fabric_lsp import local_socket

    client = local_socket.connect(agent, local_socket.settings_inputs(cwd=cwd, init=init_options(a)))
    if client is None:
        say_unanswered(command, local_socket)
        return None
    try:
        answer = client.request(METHODS[command], params, cwd=cwd)
    finally:
        client.close()
    if answer is None or (answer.raw is None and answer.error is None):
        say_unanswered(command, local_socket)
        return None
    err = sys.stderr
    note = f"fabric-lsp {command}: {answered_note(client)}\n" if verbose else ""
    value_error = None
    if answer.error is not None:
        data = answer.error.get("data")
        stage = data.get("stage") if isinstance(data, dict) else None
        if stage == "params":
            err.write(f"{note}fabric-lsp {command}: invalid arguments: {data.get('detail')}\n")  # type: ignore[union-attr]
            return 2
        if stage != "engine":
            return None
        value_error = str(data.get("detail"))  # type: ignore[union-attr]
    raw = answer.raw or b"null"
    result: Any = None
    if value_error is None:  # a result object, or the full CLI takes over
        try:
            result = local_socket.wire_decode(raw)
        except ValueError:
            return None
        if not isinstance(result, dict):
            return None
    s = client.settings
    err.write(
        settings_report(
            command,
            verbose,
            warnings=s.get("warnings") or (),
            sources=s.get("sources") or (),
            agent_dir=str(s.get("agentDir")),
        )
        + note
    )
    if command == "history":
        if value_error is not None:
            err.write(f"fabric-lsp history: invalid arguments: {value_error}\n")
            return 2
        return _emit(raw, pipe_quietly=False)
    problem = agent_dir_error(str(s.get("agentDir")))
    if problem is None and value_error is not None:
        problem = value_error
    if problem is not None:
        err.write(f"fabric-lsp {command}: {problem}\n")
        return 2
    if command == "recall":
        cov = result["coverage"]
        code = _emit(raw)
        if "error" in cov:  # an invalid regex and friends are errors, never "no matches"
            err.write(f"fabric-lsp recall: {cov['error']['code']}: {cov['error']['message']}\n")
            return 2
        hint = index_hint(cov)
        if hint:
            err.write(f"fabric-lsp recall: {hint}\n")
        return code
    if command == "sessions":
        return _emit(raw) or (1 if "error" in result["coverage"] else 0)
    code = _emit(raw)  # expand
    if code or "error" not in result:
        return code
    return 2 if result["error"].get("code") in _NOT_FOUND else 1


def say_unanswered(command: str, local_socket: Any, *, done: bool = False) -> None:
    """One line on stderr for each server that did not answer in time (it is not asked
    again by this process, which computes the answer itself)."""
    for message in local_socket.take_unanswered():
        then = "the answer was computed here" if done else "computing the answer here"
        sys.stderr.write(f"fabric-lsp {command}: {message}; {then}\n")
        sys.stderr.flush()


def _emit(raw: bytes, *, pipe_quietly: bool = True) -> int:
    """Write `raw` and a newline to stdout (0); a reader that went away (`| head`) ends
    the process with 0 at once, as commands/memory.py and commands/history.py do."""
    try:
        sys.stdout.buffer.write(raw + b"\n")
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        if pipe_quietly:  # commands/memory.py: nothing may flush into the pipe again
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(0) from None
    return 0
