"""Regex mode speaks JavaScript: `new RegExp(pattern, "iu")`, as the reference and Pi do.

Every case is checked against a JavaScript engine directly (node running a separate,
minimal script: the oracle), and the distinguishing ones also against hard-coded
expectations, so both a wrong worker and a wrong oracle fail. Without node the JavaScript
cases skip locally and FAIL when CI is set (CI installs node: scripts/deps/realpi.sh).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path

import pytest
from memory_kit import engine, header, user, write_session

from fabric_lsp.engine.memory.regex_worker import NODE_ENV, RegexRunner, find_node

CWD = "/home/user/rxjs"

# (pattern, haystacks, expected hits or the start of the invalid_regex message)
CASES: list[tuple[str, list[str], object]] = [
    ("(?<word>ab)c", ["xABC", "ab c"], [0]),  # named group
    ("(?<w>ab)\\k<w>", ["abAB", "abba"], [0]),  # named backreference
    ("^\\p{L}+$", ["Ünïcödé", "abc1", "日本語"], [0, 2]),  # Unicode property
    ("\\p{Script=Greek}", ["λόγος", "logos"], [0]),
    ("\\u{1F600}", ["smile 😀", "smile"], [0]),  # code point escape
    ("^.$", ["😀", "ab"], [0]),  # `u`: one astral code point is one character
    ("^\\w+$", ["é", "abc", "ſ"], [1, 2]),  # JS \w is ASCII (+ ſ, K under `iu`); Python's is Unicode
    ("abc$", ["abc\n", "xabc"], [1]),  # JS $ does not match before a final newline
    ("^\\d$", ["٣", "3"], [1]),  # JS \d is ASCII digits only
    ("straße", ["STRASSE", "Straße"], [1]),  # simple case folding, no ß → ss
    ("k", ["\u212a"], [0]),  # Kelvin sign folds to k under `iu`
    ("(?<=a)b", ["ab", "cb"], [0]),  # lookbehind
    ("\\ud800", ["a\ud800b", "ab"], [0]),  # a lone surrogate haystack is one UTF-16 unit
    ("(?i)abc", ["abc"], "Invalid regular expression: /(?i)abc/iu: Invalid group"),  # inline flags: JS rejects
    ("(unclosed", ["x"], "Invalid regular expression: /(unclosed/iu: Unterminated group"),
    ("\\1(a)", ["aa"], None),  # legal in JS (empty backreference); compare with the oracle only
    ("[\\d-z]", ["-"], "Invalid regular expression"),  # `u`: a class range from \d is an error
    ("\\-", ["-"], "Invalid regular expression"),  # `u`: `\-` only inside a class
    ("[\\-]", ["-"], [0]),
    ("\\q", ["q"], "Invalid regular expression"),  # `u`: identity escapes of letters are errors
]

ORACLE = r"""
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
const out = cases.map(([p, hs]) => {
  let rx;
  try { rx = new RegExp(p, "iu"); } catch (e) { return { error: e.message }; }
  return { hits: hs.map((h, i) => (rx.test(h) ? i : -1)).filter((i) => i >= 0) };
});
process.stdout.write(JSON.stringify(out));
"""


def require_node() -> str:
    node = find_node()
    if node is None:
        why = f"no JavaScript engine: set {NODE_ENV} or put node on PATH (CI: scripts/deps/realpi.sh)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return node


def oracle(node: str, cases: list[tuple[str, list[str]]]) -> list[dict]:
    data = json.dumps(cases).encode("ascii")  # lone surrogates as \ud800 escapes
    done = subprocess.run([node, "-e", ORACLE], input=data, capture_output=True, timeout=60, check=True)
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def runner():
    node = require_node()
    r = RegexRunner()
    yield node, r
    r.close()


def test_worker_matches_a_javascript_engine(runner):
    node, r = runner
    expected = oracle(node, [(p, hs) for p, hs, _ in CASES])
    for (pattern, haystacks, pinned), want in zip(CASES, expected):
        got = r.run(pattern, haystacks, 10_000)
        assert r.dialect == "javascript"
        if "error" in want:
            assert got.error == {"code": "invalid_regex", "message": want["error"]}, pattern
            assert isinstance(pinned, str) and want["error"].startswith(pinned), (pattern, want)
        else:
            assert got.error is None and got.hits == want["hits"], (pattern, got.hits, got.error, want)
            if pinned is not None:
                assert want["hits"] == pinned, (pattern, want)


def test_recall_runs_javascript_patterns(tmp_path: Path):
    require_node()
    agent = tmp_path / "agent"
    rows = [header("js1", CWD), user("u1", None, "Ünïcödé status 404 😀", 1), user("u2", "u1", "plain words", 2)]
    write_session(agent, CWD, "js.jsonl", rows, 1_700_000_000)
    eng = engine(agent, regex_timeout_ms=10_000)
    try:
        for pattern in ("(?<code>40\\d)", "^\\p{L}{7}\\s", "\\u{1F600}"):
            out = eng.recall({"query": pattern, "queryMode": "regex", "scope": "project"}, cwd=CWD)
            assert out["totalMatches"] == 1 and "error" not in out["coverage"], (pattern, out["coverage"])
        out = eng.recall({"query": "(?i)status", "queryMode": "regex", "scope": "project"}, cwd=CWD)
        assert out["coverage"]["error"] == {
            "code": "invalid_regex",
            "message": "Invalid regular expression: /(?i)status/iu: Invalid group",
        }
        assert out["coverage"]["reasons"] == ["invalid_regex"] and out["items"] == []
    finally:
        eng.close()


def test_find_node_honours_the_environment(tmp_path: Path):
    fake = tmp_path / "mynode"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    assert find_node({NODE_ENV: str(fake), "PATH": ""}) == str(fake)
    assert find_node({NODE_ENV: str(tmp_path / "missing"), "PATH": str(tmp_path)}) is None
    (tmp_path / "node").symlink_to(fake)
    assert find_node({NODE_ENV: str(tmp_path / "missing"), "PATH": str(tmp_path)}) == str(tmp_path / "node")


def test_without_node_python_re_runs_and_says_so(tmp_path: Path, caplog):
    """The fallback is never silent: a warning names the dialect, `dialect` says python."""
    broken = tmp_path / "node"
    broken.write_text("#!/bin/sh\nexit 1\n")  # starts, never says ready
    broken.chmod(0o755)
    for node in (str(tmp_path / "missing-node"), str(broken)):
        r = RegexRunner(node=node)
        try:
            with caplog.at_level(logging.WARNING, logger="fabric_lsp.engine.memory.regex_worker"):
                out = r.run("(?<w>a)", ["a"], 10_000)
            assert r.dialect == "python"
            assert out.error is not None and out.error["code"] == "invalid_regex"
            assert "Python `re`, not JavaScript RegExp" in caplog.text
            assert r.run("^\\w$", ["é"], 10_000).hits == [0]  # Python's Unicode \w
        finally:
            r.close()
        caplog.clear()
