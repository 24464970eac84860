"""Every domain error code of recall and expand, and the invalid-params errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from memory_kit import DEMO_MTIME, demo_rows, engine, header, user, write_session

from fabric_lsp.engine.owned_dir import MARKER

CWD = "/home/user/demo"


@pytest.fixture()
def demo(tmp_path: Path):
    agent = tmp_path / "agent"
    return agent, write_session(agent, CWD, "2025-01-01_s1.jsonl", demo_rows(), DEMO_MTIME)


def _pointer(eng, path):
    out = eng.expand({"session": str(path), "indices": []})  # no entry: the pointer's facts
    return out["sourceHash"], out["lineageFingerprint"]


def test_invalid_params_raise_value_error_naming_the_field(demo):
    # The engine takes what the wire contract decodes (protocol.py); a Mapping given in
    # process is decoded by the same contract, so its errors name the field the same way.
    agent, path = demo
    eng = engine(agent)
    for params, field in [
        ({"scope": "projects"}, "scope"),
        ({"scope": "sesion"}, "scope"),
        ({"queryMode": "glob", "query": "x"}, "queryMode"),
        ({"branches": "some"}, "branches"),
        ({"expectedSourceHash": "0" * 64, "scope": "project"}, "expectedSourceHash"),
        ({"entryRange": {"first": 0, "last": 1}, "scope": "project"}, "entryRange"),
        ({"entryRange": {"first": 0}, "scope": f"session:{path}"}, "entryRange"),
    ]:
        with pytest.raises(ValueError, match=field):
            eng.recall(params, cwd=CWD)
    with pytest.raises(ValueError, match="indices"):
        eng.expand({"session": str(path), "indices": 3})
    with pytest.raises(ValueError, match="session"):
        eng.expand({"session": "  ", "indices": [0]})
    with pytest.raises(ValueError, match="exactly one selector"):
        eng.expand({"session": str(path)})
    with pytest.raises(ValueError, match="scope"):
        eng.sessions({"scope": "everything"})


def test_stale_pointer_on_rewrite_and_navigation(demo):
    agent, path = demo
    eng = engine(agent)
    h, fp = _pointer(eng, path)
    scope = f"session:{path}"
    ok = eng.recall(
        {"query": "auth", "scope": scope, "expectedSourceHash": h, "expectedLineageFingerprint": fp}, cwd=CWD
    )
    assert ok["items"] and ok["authoritative"]
    # Same-size rewrite with the mtime restored: the hash still catches it.
    data = path.read_bytes()
    path.write_bytes(data.replace(b"Fix the auth", b"Fix our auth"))
    os.utime(path, (DEMO_MTIME, DEMO_MTIME))
    assert path.stat().st_size == len(data)
    out = eng.recall({"query": "auth", "scope": scope, "expectedSourceHash": h}, cwd=CWD)
    assert out["items"] == [] and out["coverage"]["error"] == {
        "code": "stale_pointer",
        "message": "Session source changed after the pointer was issued.",
    }
    assert eng.expand({"session": str(path), "indices": [0], "expectedSourceHash": h}) == {
        "error": {"code": "stale_pointer", "message": "Session source changed after the pointer was issued."}
    }
    # Navigation: an append under an earlier entry moves the leaf; lineage changes.
    h2, fp2 = _pointer(eng, path)
    with path.open("a") as fh:
        fh.write(
            '{"type":"message","id":"z9","parentId":"u1","timestamp":"2025-01-01T00:00:09.000Z",'
            '"message":{"role":"user","content":"other way"}}\n'
        )
    out = eng.expand({"session": str(path), "indices": [0], "expectedLineageFingerprint": fp2})
    assert out == {
        "error": {"code": "stale_pointer", "message": "Session active lineage changed after the pointer was issued."}
    }
    out = eng.recall({"scope": scope, "expectedLineageFingerprint": fp2}, cwd=CWD)
    assert out["coverage"]["error"]["code"] == "stale_pointer"


def test_address_errors_and_off_lineage(demo):
    agent, path = demo
    eng = engine(agent)
    assert eng.expand({"session": str(path), "entryIds": ["nope"]}) == {
        "error": {"code": "address_not_found", "message": 'Entry address "nope" was not found.'}
    }
    assert eng.expand({"session": str(path), "operationAddresses": ["a1/0"]}) == {
        "error": {"code": "address_not_found", "message": 'Operation address "a1/0" was not found.'}
    }
    # u2 is on an abandoned branch: not found in active mode, found in all mode.
    assert eng.expand({"session": str(path), "entryIds": ["u2"]})["error"]["code"] == "address_not_found"
    out = eng.expand({"session": str(path), "entryIds": ["u2"], "branches": "all"})
    assert [e["text"] for e in out["expanded"]] == ["abandoned branch text"]


def test_ambiguous_address_with_duplicate_ids(tmp_path):
    agent = tmp_path / "agent"
    rows = [header("d1", CWD), user("x1", None, "first", 1), user("x1", None, "second", 2)]
    path = write_session(agent, CWD, "d.jsonl", rows)
    eng = engine(agent)
    out = eng.expand({"session": str(path), "entryIds": ["x1"], "branches": "all"})
    assert out == {"error": {"code": "ambiguous_address", "message": 'Entry address "x1" resolves to 2 records.'}}
    rec = eng.recall({"scope": f"session:{path}", "branches": "all", "query": "first"}, cwd=CWD)
    assert "duplicate_entry_id" in rec["coverage"]["reasons"] and not rec["authoritative"]


def test_session_resolution_errors(tmp_path):
    agent = tmp_path / "agent"
    a = write_session(agent, CWD, "a.jsonl", [header("same", CWD), user("u", None, "one", 1)])
    b = write_session(agent, "/elsewhere", "b.jsonl", [header("same", "/elsewhere"), user("u", None, "two", 1)])
    eng = engine(agent)
    out = eng.expand({"session": "same", "indices": [0]})
    assert out == {
        "error": {
            "code": "ambiguous_session",
            "message": 'Session id "same" is ambiguous; use an exact session file path.',
            "candidates": sorted([str(a), str(b)]),
        }
    }
    rec = eng.recall({"scope": "session:same"}, cwd=CWD)
    assert rec["coverage"]["error"]["code"] == "ambiguous_session" and rec["items"] == []
    assert eng.expand({"session": "missing-id", "indices": [0]}) == {
        "error": {"code": "session_not_found", "message": "Session not found: missing-id"}
    }
    assert eng.expand({"session": str(tmp_path / "gone.jsonl"), "indices": [0]})["error"]["code"] == "session_not_found"
    # Exact paths and file:// URIs resolve.
    assert eng.expand({"session": str(a), "indices": [0]})["expanded"][0]["text"] == "one"
    assert eng.expand({"session": a.as_uri(), "indices": [0]})["expanded"][0]["text"] == "one"
    assert eng.expand({"session": "b", "indices": [0]})["expanded"][0]["text"] == "two"  # file stem


def test_index_out_of_bounds(demo):
    agent, path = demo
    eng = engine(agent)
    bad = "Every entry index must be a non-negative safe integer."
    # past JavaScript's safe integers: the reference's domain error
    assert eng.expand({"session": str(path), "indices": [2**53]}) == {
        "error": {"code": "index_out_of_bounds", "message": bad}
    }
    assert eng.expand({"session": str(path), "entryRange": {"first": 0, "last": 2**53}}) == {
        "error": {
            "code": "index_out_of_bounds",
            "message": "Entry range requires safe integers with 0 <= first <= last.",
        }
    }
    # what the wire contract refuses never reaches the engine: invalid params naming the field
    for params, field in [
        ({"indices": [-1]}, "indices"),
        ({"indices": [1.5]}, "indices"),
        ({"entryRange": {"first": 3, "last": 1}}, "first"),
    ]:
        with pytest.raises(ValueError, match=field):
            eng.expand({"session": str(path), **params})
    assert eng.expand({"session": str(path), "entryRange": {"first": 3, "last": 5}}) == {
        "error": {"code": "index_out_of_bounds", "message": "Entry range ends at 5, but the session has 5 entries."}
    }
    out = eng.expand({"session": str(path), "entryRange": {"first": 3, "last": 4}})
    assert [e["entryId"] for e in out["expanded"]] == ["b1", "cm1"]
    scope = f"session:{path}"
    with pytest.raises(ValueError, match="entryRange.first"):
        eng.recall({"scope": scope, "entryRange": {"first": -1, "last": 2}}, cwd=CWD)
    r = eng.recall({"scope": scope, "entryRange": {"first": 2, "last": 7}}, cwd=CWD)
    assert r["coverage"]["error"]["message"] == "Entry range ends at 7, but the session has 5 entries."
    r = eng.recall({"scope": scope, "entryRange": {"first": 1, "last": 1}}, cwd=CWD)
    entries = [e for it in r["items"] for e in it["segment"]["entries"]]
    assert [e["index"] for e in entries] == [1]


def test_source_unavailable_coverage_and_cleanup(demo):
    agent, path = demo
    eng = engine(agent, hot_sessions=0)
    assert eng.recall({"query": "auth", "scope": "project"}, cwd=CWD)["totalItems"] == 1
    index = Path(eng.index_dir)
    assert any(p.name.endswith(".digest.json") for p in index.iterdir())
    scope = f"session:{path}"
    path.unlink()
    # A fresh engine sees an orphan record and removes it.
    eng2 = engine(agent, hot_sessions=0)
    out = eng2.recall({"query": "auth", "scope": "project"}, cwd=CWD)
    assert out["text"] == 'No matches for "auth".' or out["items"] == []
    assert [p.name for p in index.iterdir()] == [MARKER]  # only the ownership marker is left
    assert eng2.recall({"scope": scope}, cwd=CWD)["coverage"]["error"]["code"] == "session_not_found"


def test_config_defaults_bounds_and_camel_case():
    import msgspec

    from fabric_lsp.engine.memory.api import MemoryConfig

    d = MemoryConfig()
    assert (d.max_sessions, d.max_entry_chars, d.hot_sessions, d.regex_timeout_ms) == (500, 2000, 50, 250)
    assert d.index_thinking is False and d.index_tool_output is True
    c = msgspec.convert({"hotSessions": 3, "maxEntryChars": 150, "indexThinking": True}, MemoryConfig)
    assert (c.hot_sessions, c.max_entry_chars, c.index_thinking) == (3, 150, True)
    clamped = MemoryConfig.from_settings(
        {
            "hotSessions": -1,
            "digestTerms": 0,
            "maxEntryChars": 5,
            "regexTimeoutMs": 10**9,
            "maxSessions": "many",
            "indexToolOutput": "no",
            "indexDir": "  ",
        }
    )
    assert clamped.hot_sessions == 0 and clamped.digest_terms == 1 and clamped.max_entry_chars == 100
    assert clamped.regex_timeout_ms == 10_000 and clamped.max_sessions == 500 and clamped.index_tool_output is True
    assert clamped.index_dir is None
    assert msgspec.to_builtins(MemoryConfig())["hotSessions"] == 50


def test_source_unavailable_when_a_session_vanishes_mid_call(tmp_path: Path):
    agent = tmp_path / "agent"
    path = write_session(agent, CWD, "2025-01-01_s1.jsonl", demo_rows(), DEMO_MTIME)
    eng = engine(agent)

    def vanish(event):  # the session disappears after it was resolved, before it is read
        if path.exists():
            path.unlink()

    out = eng.expand({"session": str(path), "indices": [0]}, activity=vanish)
    assert out == {"error": {"code": "source_unavailable", "message": f"Session source is unavailable: {path}"}}
    path = write_session(agent, CWD, "2025-01-01_s1.jsonl", demo_rows(), DEMO_MTIME)
    rec = engine(agent).recall({"query": "auth", "scope": "project"}, cwd=CWD, activity=vanish)
    assert rec["coverage"]["reasons"] == ["source_unavailable"] and rec["coverage"]["staleSessions"] == 1
    assert not rec["authoritative"] and rec["text"].startswith('No indexed matches for "auth"; coverage is incomplete')
