"""The quick path's parser (fabric_lsp/quick_cli.py) reads the memory reads' arguments as the
full parser does (fabric_lsp/cli_parser.py: argparse over commands/memory.py and
commands/history.py), or not at all; and its JSON on the wire is json's.

Served answers themselves are compared with the full CLI's, byte for byte, in
tests/reliability/test_local_socket.py.
"""

from __future__ import annotations

import argparse
import json

import pytest

from fabric_lsp import quick_cli
from fabric_lsp.cli_parser import build_parser
from fabric_lsp.local_socket import wire_decode, wire_encode

_GLOBAL = {"command", "run", "log_file", "verbose"}


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


@pytest.mark.parametrize("name", sorted(quick_cli.SPECS))
def test_the_spec_is_what_argparse_declares(name):
    (positional, required), options, defaults = quick_cli.SPECS[name]
    declared: dict[str, tuple[str, object]] = {}
    positionals = []
    for action in _subparser(name)._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if not action.option_strings:
            positionals.append((action.dest, action.nargs is None))
            continue
        assert len(action.option_strings) == 1, action.option_strings
        if isinstance(action, argparse._StoreTrueAction):
            kind: object = "flag"
        elif action.choices is not None:
            kind = tuple(action.choices)
        elif action.type is int:
            kind = "int"
        else:
            assert action.type is None and action.nargs is None, action
            kind = "str"
        declared[action.option_strings[0]] = (action.dest, kind)
        assert defaults[action.dest] == action.default, action.dest
    assert declared == options
    assert positionals == ([(positional, required)] if positional else [])
    if positional:
        assert defaults.get(positional) is None or not required


CASES = [
    ["recall", "auth login", "--json"],
    ["-v", "recall", "--json", "x", "--scope", "global", "--page", "2", "--page-size", "5"],
    ["-vv", "recall", "--mode", "regex", "^a+$", "--json", "--branches", "all", "--agent-dir", "/a", "--trusted"],
    ["recall", "--json", "--scope=project", "--index-dir", "i", "--cwd", "/w", "--expected-source-hash", "h"],
    ["recall", "--json"],
    ["--verbose", "sessions", "--json", "--page-size", " 7", "--page", "+2"],
    ["expand", "/s.jsonl", "--indices", "1,2", "--json", "--session", "abc"],
    ["expand", "x", "--entry-ids", "a, b", "--expected-lineage-fingerprint", "f", "--json"],
    ["history", "src/a.py", "--json", "--scope", "project", "--page-size", "3"],
    ["history", "file:///x", "--json", "--branches", "active", "--index-dir", ""],
    ["recall", "-", "--json"],
]


@pytest.mark.parametrize("argv", CASES, ids=lambda a: " ".join(a))
def test_the_quick_parser_reads_what_argparse_reads(argv):
    got = quick_cli.parse(argv)
    assert got is not None
    command, verbose, values = got
    ns = build_parser().parse_args(argv)
    assert (command, verbose) == (ns.command, ns.verbose)
    assert values == {k: v for k, v in vars(ns).items() if k not in _GLOBAL}


REFUSED = [
    ["recall", "x", "--json", "--help"],
    ["recall", "x", "--jso"],  # abbreviations are argparse's
    ["recall", "x", "--json", "--page", "1", "--page", "2"],
    ["recall", "x", "--json", "--page", "two"],
    ["recall", "x", "--json", "--mode", "glob"],
    ["recall", "x", "--json", "--page", "-1"],
    ["recall", "x", "y", "--json"],
    ["recall", "--json", "--", "-x"],
    ["recall", "--json=1", "x"],
    ["--log-file", "l", "recall", "x", "--json"],
    ["sessions", "extra", "--json"],
    ["expand", "--json"],
    ["expand", "s", "--indices", "1", "--range", "1:2", "--json"],
    ["history", "--json"],
    ["preview", "x"],
    ["recall", "x", "--json", "--scope"],
]


@pytest.mark.parametrize("argv", REFUSED, ids=lambda a: " ".join(a))
def test_anything_else_is_left_to_argparse(argv):
    assert quick_cli.parse(argv) is None


@pytest.mark.parametrize(
    "value",
    [
        {"a": [1, -2, 2.5, 1e16, None, True, False, 'é\n"\\\u2028'], "b": {}, "": ""},
        [],
        "x",
        0.1,
        -0.0,
        12345678901234567890,
        {"nested": [[{"k": "v"}]]},
    ],
)
def test_wire_json_is_json(value):
    assert json.loads(wire_encode(value)) == value
    assert wire_decode(wire_encode(value)) == value
    assert wire_decode(json.dumps(value, ensure_ascii=False).encode()) == value
    assert wire_decode(b" \n" + json.dumps(value).encode() + b"\r\n") == value


@pytest.mark.parametrize("text", [b"", b"nope", b"{} {}", b'{"a":}', b"[1,]", b"NaNx"])
def test_wire_decode_refuses_what_is_not_json(text):
    with pytest.raises(ValueError):
        wire_decode(text)
