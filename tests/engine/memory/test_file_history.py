"""`fabric/fileHistory` in the memory engine: typed file operations per session (Pi tool
calls and Fabric trace operations), path normalization, branches, tiers, the persisted
table and its freshness."""

from __future__ import annotations

import json
import os
import posixpath
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memory_kit import assistant, engine, header, tool_result, ts, user, write_session

from fabric_lsp import protocol
from fabric_lsp.engine.memory import file_history
from fabric_lsp.engine.memory.file_history import normalize_path, path_of_target
from tests.support.examples import profile_examples

CWD = "/home/user/proj"
TARGET = "/home/user/proj/src/app.py"


def call(cid: str, name: str, **args) -> dict:
    return {"type": "toolCall", "id": cid, "name": name, "arguments": args}


TRACE = {
    "kind": "pi-fabric.execution",
    "version": 1,
    "outcome": "failed",
    "phases": ["Inspect"],
    "operations": [
        {
            "type": "call",
            "sequence": 0,
            "ref": "pi.read",
            "provider": "pi",
            "action": "read",
            "args": {"path": "src/app.py"},
            "outcome": "succeeded",
        },
        {
            "type": "call",
            "sequence": 1,
            "ref": "pi.edit",
            "provider": "pi",
            "action": "edit",
            "args": {"path": "./src/../src/app.py", "oldText": "a", "newText": "b"},
            "outcome": "failed",
            "failureStage": "invoke",
            "error": "no match",
        },
        {
            "type": "call",
            "sequence": 2,
            "ref": "pi.write",
            "provider": "pi",
            "action": "write",
            "args": {"path": "/elsewhere/other.py", "content": "x"},
            "outcome": "succeeded",
        },
        {
            "type": "call",
            "sequence": 3,
            "ref": "pi.bash",
            "provider": "pi",
            "action": "bash",
            "args": {"command": "cat src/app.py", "path": "src/app.py"},
            "outcome": "succeeded",
        },
    ],
    "counts": {"droppedValues": 0, "truncatedValues": 0, "redactedValues": 0, "droppedOperations": 0},
}


def main_rows(sid: str = "s-main") -> list[dict]:
    return [
        header(sid, CWD),
        user("u1", None, "fix app", 1),
        assistant(
            "a1",
            "u1",
            [
                {"type": "text", "text": "reading"},
                call("c1", "read", path="src/app.py"),
                call("c2", "read", path="/home/user/proj//src/./app.py"),
            ],
            2,
        ),
        tool_result("r1", "a1", "c1", "read", "print(1)", 3),
        tool_result("r2", "r1", "c2", "read", "print(1)", 4),
        assistant("a2", "r2", [call("c3", "edit", path="../proj/src/app.py", oldText="1", newText="2")], 5),
        tool_result("r3", "a2", "c3", "edit", "Could not find the text", 6, is_error=True),
        # not file operations of app.py: other tools, other keys, prose, another file
        assistant(
            "a3",
            "r3",
            [
                call("c4", "bash", command="sed -i s/1/2/ src/app.py", path="src/app.py"),
                call("c5", "write", file="src/app.py", content="x"),
                {"type": "text", "text": "I edited /home/user/proj/src/app.py"},
                call("c6", "write", path="src/app.pyc", content="x"),
            ],
            7,
        ),
        tool_result("r4", "a3", "c4", "bash", "", 8),
        tool_result("r5", "r4", "c5", "write", "", 9),
        tool_result("r6", "r5", "c6", "write", "", 10),
        assistant("a4", "r6", [call("k1", "fabric_exec", code="...")], 11),
        tool_result(
            "r7", "a4", "k1", "fabric_exec", "prose: wrote src/app.py", 12, details={"success": False, "trace": TRACE}
        ),
        # the last call has no result yet: left out
        assistant("a5", "r7", [call("c7", "write", path="src/app.py", content="new")], 13),
    ]


def ops(result: dict) -> list[tuple]:
    return [
        (i["entryId"], i.get("operationAddress"), i["action"], i["toolName"], i["outcome"]) for i in result["items"]
    ]


@pytest.fixture()
def agent(tmp_path: Path) -> Path:
    return tmp_path / "agent"


def test_pi_calls_and_fabric_operations_of_one_path(agent: Path):
    path = write_session(agent, CWD, "main.jsonl", main_rows())
    out = engine(agent).file_history({"path": TARGET})
    assert ops(out) == [
        ("r7", "r7/1", "edit", "fabric_exec", "failed"),
        ("r7", "r7/0", "read", "fabric_exec", "succeeded"),
        ("a2", None, "edit", "edit", "failed"),
        ("a1", None, "read", "read", "succeeded"),
        ("a1", None, "read", "read", "succeeded"),
    ]
    first = out["items"][0]
    assert first["sessionId"] == "s-main" and first["sessionFile"] == str(path) and first["cwd"] == CWD
    assert first["ref"] == "pi-entry:s-main/r7" and first["operationRef"] == "pi.edit"
    assert first["timestamp"] == 1735689612000
    assert [i["toolCallId"] for i in out["items"][3:]] == ["c2", "c1"]
    assert out["totalItems"] == 5 and out["totalSessions"] == 1 and not out["hasNext"]
    assert out["sessions"] == [
        {
            "sessionId": "s-main",
            "sessionFile": str(path),
            "cwd": CWD,
            "count": 5,
            "lastAction": "edit",
            "lastTimestamp": 1735689612000,
        }
    ]
    assert out["coverage"]["complete"] is True
    msgspec.convert(out, protocol.FileHistoryResult)
    # the indices are the memory records' indices: expand finds the same entries
    exp = engine(agent).expand({"session": str(path), "indices": [i["index"] for i in out["items"]]})
    by_index = {e["index"]: e for e in exp["expanded"]}
    assert [by_index[i["index"]]["entryId"] for i in out["items"]] == ["r7/1", "r7/0", "a2", "a1", "a1"]
    other = engine(agent).file_history({"uri": "file:///elsewhere/other.py"})
    assert ops(other) == [("r7", "r7/2", "write", "fabric_exec", "succeeded")]
    assert engine(agent).file_history({"path": "/home/user/proj/src/app.pyc"})["totalItems"] == 1
    assert engine(agent).file_history({"path": "/home/user/proj/src"})["totalItems"] == 0  # never by substring


def test_a_result_appended_later_completes_the_call(agent: Path):
    path = write_session(agent, CWD, "main.jsonl", main_rows())
    pending = "a5"
    for round_ in range(2):
        eng = engine(agent)  # round 0: built from source; round 1: loaded from the disk cache
        before = eng.file_history({"path": TARGET})["totalItems"]
        with path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(tool_result(f"r8{round_}", pending, "c7", "write", "ok", 14 + 2 * round_)) + "\n")
        out = eng.file_history({"path": TARGET})
        assert out["totalItems"] == before + 1
        assert ops(out)[0] == (pending, None, "write", "write", "succeeded")
        # the next call of the same id is pending again
        pending = f"a9{round_}"
        with path.open("a", encoding="utf-8") as fh:
            fh.write(
                json.dumps(assistant(pending, f"r8{round_}", [call("c7", "write", path="src/app.py")], 15 + 2 * round_))
                + "\n"
            )
        assert eng.file_history({"path": TARGET})["totalItems"] == before + 1
    assert engine(agent).file_history({"path": TARGET}) == eng.file_history({"path": TARGET})


def test_branches_active_and_all(agent: Path):
    rows = main_rows()[:5] + [
        # an abandoned branch from r2 edits the file; the active branch continues from r2 too
        assistant("b1", "r2", [call("d1", "edit", path="src/app.py", oldText="x", newText="y")], 20),
        tool_result("b2", "b1", "d1", "edit", "ok", 21),
        assistant("m1", "r2", [call("d2", "read", path="src/app.py")], 22),
        tool_result("m2", "m1", "d2", "read", "ok", 23),
    ]
    write_session(agent, CWD, "branchy.jsonl", rows)
    eng = engine(agent)
    active = eng.file_history({"path": TARGET})
    assert [i["entryId"] for i in active["items"]] == ["m1", "a1", "a1"]
    every = eng.file_history({"path": TARGET, "branches": "all"})
    assert [i["entryId"] for i in every["items"]] == ["m1", "b1", "a1", "a1"] and every["branches"] == "all"


@pytest.mark.parametrize("hot", [50, 0])
def test_cold_and_hot_sessions_answer_the_same(agent: Path, hot: int):
    write_session(agent, CWD, "main.jsonl", main_rows(), mtime_s=1_700_000_000)
    write_session(
        agent,
        "/srv/other",
        "other.jsonl",
        [
            header("s-other", "/srv/other"),
            assistant("x1", None, [call("e1", "write", path=TARGET, content="")], 30),
            tool_result("x2", "x1", "e1", "write", "ok", 31),
        ],
        mtime_s=1_700_000_100,
    )
    expected = engine(agent, hot_sessions=50).file_history({"path": TARGET})
    engine(agent).drop_caches()
    cold = engine(agent, hot_sessions=hot)
    assert cold.file_history({"path": TARGET}) == expected
    assert [s["sessionId"] for s in expected["sessions"]] == ["s-other", "s-main"]
    assert expected["sessions"][0]["lastAction"] == "write" and expected["totalSessions"] == 2
    # a fresh engine answers from the persisted tables, equal again
    assert engine(agent, hot_sessions=hot).file_history({"path": TARGET}) == expected
    # project scope: only the sessions of that cwd
    project = engine(agent, hot_sessions=hot).file_history({"path": TARGET, "scope": "project"}, cwd="/srv/other")
    assert [i["sessionId"] for i in project["items"]] == ["s-other"]
    assert project["coverage"]["eligibleSessions"] == 1


def test_cold_tables_are_persisted_and_never_stale(agent: Path):
    path = write_session(agent, CWD, "main.jsonl", main_rows())
    eng = engine(agent, hot_sessions=0)
    first = eng.file_history({"path": TARGET})
    index = Path(eng.index_dir)
    tables = [p for p in index.iterdir() if p.name.endswith(".files.json")]
    assert len(tables) == 1 and (tables[0].stat().st_mode & 0o777) == 0o600
    # a flipped byte that still parses is caught by the seal: rebuilt from source, same answer
    raw = tables[0].read_bytes()
    i = raw.index(b'"edit"')
    tables[0].write_bytes(raw[:i] + b'"tide"' + raw[i + 6 :])
    assert engine(agent, hot_sessions=0).file_history({"path": TARGET}) == first
    # a rewrite of the same size with other content is never answered from the table
    text = path.read_text()
    path.write_text(text.replace('"path":"src/app.py"', '"path":"src/app.px"', 1))
    changed = engine(agent, hot_sessions=0).file_history({"path": TARGET})
    assert changed["totalItems"] == first["totalItems"] - 1
    # a vanished session takes its table with it
    path.unlink()
    assert engine(agent, hot_sessions=0).file_history({"path": TARGET})["totalItems"] == 0
    eng.file_history({"path": TARGET})
    assert not [p for p in index.iterdir() if p.name.endswith(".files.json")]


def test_paging_and_order(agent: Path):
    rows = [header("s-page", CWD)]
    parent = None
    for n in range(7):
        rows.append(assistant(f"a{n}", parent, [call(f"c{n}", "read", path="src/app.py")], 10 + n))
        rows.append(tool_result(f"r{n}", f"a{n}", f"c{n}", "read", "ok", 10 + n))
        parent = f"r{n}"
    write_session(agent, CWD, "page.jsonl", rows)
    eng = engine(agent)
    pages = [eng.file_history({"path": TARGET, "page": p, "pageSize": 3}) for p in (1, 2, 3)]
    assert [[i["entryId"] for i in p["items"]] for p in pages] == [["a6", "a5", "a4"], ["a3", "a2", "a1"], ["a0"]]
    assert [p["hasNext"] for p in pages] == [True, True, False] and pages[0]["totalItems"] == 7


def test_bounds_and_relative_paths_without_cwd_are_reported(agent: Path, monkeypatch: pytest.MonkeyPatch):
    write_session(agent, CWD, "main.jsonl", main_rows())
    monkeypatch.setattr(file_history, "MAX_FILE_OPERATIONS", 2)
    out = engine(agent).file_history({"path": TARGET})
    assert out["totalItems"] == 2 and out["coverage"]["complete"] is False
    assert out["coverage"]["reasons"] == ["max_file_operations"] and out["coverage"]["incompleteSessions"] == 1
    monkeypatch.undo()
    rows = [
        {"type": "session", "version": 3, "id": "s-nocwd", "timestamp": ts(0)},
        assistant("a1", None, [call("c1", "read", path="src/app.py"), call("c2", "read", path=TARGET)], 1),
        tool_result("r1", "a1", "c1", "read", "ok", 2),
        tool_result("r2", "r1", "c2", "read", "ok", 3),
    ]
    write_session(agent, "/nocwd", "nocwd.jsonl", rows)
    out = engine(agent).file_history({"path": TARGET})
    assert "unresolved_relative_path" in out["coverage"]["reasons"]
    assert [i["entryId"] for i in out["items"] if i["sessionId"] == "s-nocwd"] == ["a1"]


def test_invalid_params(agent: Path):
    eng = engine(agent)
    for params, message in [
        ({}, "exactly one of"),
        ({"path": "src/app.py"}, "`path` must be an absolute path"),
        ({"uri": "untitled:Untitled-1"}, "`uri` must be a file: URI"),
        ({"path": TARGET, "uri": "file:///x"}, "exactly one of"),
        ({"path": TARGET, "scope": "session"}, "scope"),
        ({"path": TARGET, "branches": "some"}, "branches"),
    ]:
        with pytest.raises(ValueError, match=message):
            eng.file_history(params)
    assert path_of_target(None, "file:///a/b%20c/./d.py") == "/a/b c/d.py"


# ---- path normalization (property tests) --------------------------------------------------

segment = st.sampled_from(["a", "b", "src", "app.py", ".", "..", "", "x y", "ü"])
raw_paths = st.lists(segment, min_size=0, max_size=8).map("/".join)


@given(raw_paths, raw_paths)
@settings(max_examples=profile_examples(300), deadline=None)
def test_normalized_paths_are_canonical(rel: str, cwd_tail: str):
    cwd = "/" + cwd_tail
    out = normalize_path(rel, cwd) if rel.strip() else None
    if out is None:
        return
    assert out.startswith("/") and not out.startswith("//")
    parts = out.split("/")[1:]
    assert out == "/" or all(p not in ("", ".", "..") for p in parts)
    assert normalize_path(out) == out  # idempotent
    assert normalize_path(out, "/somewhere/else") == out  # absolute paths ignore cwd
    if rel.startswith("/"):
        expected = posixpath.normpath(rel)
    else:
        expected = posixpath.normpath(posixpath.join(cwd, rel))
    assert out == "/" + expected.lstrip("/")


@given(raw_paths)
@settings(max_examples=profile_examples(200), deadline=None)
def test_noise_segments_do_not_change_the_path(tail: str):
    base = normalize_path("/" + tail)
    assert base is not None
    noisy = base.replace("/", "//./", 1) if base != "/" else "//./"
    assert normalize_path(noisy) == base
    assert normalize_path(base + "/zz/..") == base
    assert normalize_path(os.path.relpath(base, "/home/user"), "/home/user") == base


def test_relative_paths_need_an_absolute_cwd():
    assert normalize_path("src/a.py", None) is None
    assert normalize_path("src/a.py", "undefined") is None
    assert normalize_path("  ", "/x") is None
    assert normalize_path("../../../a", "/x") == "/a"


def test_a_tool_call_named_by_an_odd_json_value_is_indexed_and_never_a_file_operation(agent: Path):
    """A tool call's name may be any JSON value in a damaged or foreign file: a list used
    to stop the whole session's indexing (it is unhashable); now it is just not a Pi file tool."""
    rows = [
        header("s-odd", CWD),
        user("u1", None, "odd names", 1),
        assistant(
            "a1",
            "u1",
            [
                {"type": "toolCall", "id": "c1", "name": ["read"], "arguments": {"path": "src/app.py"}},
                {"type": "toolCall", "id": "c2", "name": {"n": 1}, "arguments": {"path": "src/app.py"}},
                call("c3", "read", path="src/app.py"),
            ],
            2,
        ),
        tool_result("r1", "a1", "c1", "read", "x", 3),
        tool_result("r2", "r1", "c3", "read", "print(1)", 4),
    ]
    write_session(agent, CWD, "2025-01-01_odd.jsonl", rows)
    eng = engine(agent)
    out = eng.recall({"query": "odd names", "scope": "global"})
    assert out["coverage"]["indexedSessions"] == 1 and out["items"]
    history = eng.file_history({"path": TARGET, "scope": "global"})
    assert [(i["entryId"], i["action"], i["outcome"]) for i in history["items"]] == [("a1", "read", "succeeded")]
