from __future__ import annotations

import os

import pytest

from fabric_lsp.engine.session import (
    AmbiguousSession,
    SessionNotFound,
    by_recency,
    default_agent_dir,
    encode_cwd,
    list_session_files,
    resolve_session,
    session_ref,
)


def test_encode_cwd_matches_pi() -> None:
    assert encode_cwd("/home/user/project") == "--home-user-project--"
    assert encode_cwd("/a:b\\c/d") == "--a-b-c-d--"


def test_agent_dir_from_environment(tmp_path) -> None:
    assert default_agent_dir({"PI_CODING_AGENT_DIR": str(tmp_path)}) == str(tmp_path)
    assert default_agent_dir({}).endswith(os.path.join(".pi", "agent"))
    assert default_agent_dir({"PI_CODING_AGENT_DIR": "~/x"}) == os.path.join(os.path.expanduser("~"), "x")


def _write(folder, name, sid, cwd="/p"):
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_text(f'{{"type":"session","version":3,"id":"{sid}","timestamp":"t","cwd":"{cwd}"}}\n')
    return p


def test_resolve_by_path_uri_header_id_and_stem(tmp_path) -> None:
    sessions = tmp_path / "sessions"
    a = _write(sessions / "--p--", "2026-01-01T00-00-00-000Z_aaa.jsonl", "aaa")
    b = _write(sessions / "--q--", "2026-01-02T00-00-00-000Z_bbb.jsonl", "bbb", cwd="/q")
    assert resolve_session(str(a), str(sessions)) == str(a)
    assert resolve_session(a.as_uri(), str(sessions)) == str(a)
    assert resolve_session("bbb", str(sessions)) == str(b)
    assert resolve_session("2026-01-01T00-00-00-000Z_aaa", str(sessions)) == str(a)
    with pytest.raises(SessionNotFound):
        resolve_session("nope", str(sessions))
    with pytest.raises(SessionNotFound):
        resolve_session(str(tmp_path / "missing.jsonl"), str(sessions))
    dup = _write(sessions / "--r--", "2026-01-03T00-00-00-000Z_other.jsonl", "aaa")
    with pytest.raises(AmbiguousSession) as err:
        resolve_session("aaa", str(sessions))
    assert err.value.candidates == sorted([str(a), str(dup)])
    assert err.value.code == "ambiguous_session"


def test_listing_is_one_level_deep_and_recency_ordered(tmp_path) -> None:
    sessions = tmp_path / "sessions"
    a = _write(sessions / "--p--", "a.jsonl", "a")
    b = _write(sessions / "--p--", "b.jsonl", "b")
    _write(sessions / "--p--" / "deeper", "c.jsonl", "c")
    os.utime(a, ns=(2_000_000_000, 2_000_000_000))
    os.utime(b, ns=(1_000_000_000, 1_000_000_000))
    assert list_session_files(str(sessions)) == [str(a), str(b)]
    assert list_session_files(str(sessions), cwd="/p") == [str(a), str(b)]
    refs = by_recency([session_ref(f) for f in list_session_files(str(sessions))])
    assert [r.id for r in refs] == ["a", "b"]
    assert refs[0].cwd == "/p"
