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


def test_resolve_by_unique_prefix_of_at_least_8_characters(tmp_path) -> None:
    sessions = tmp_path / "sessions"
    a = _write(sessions / "--p--", "2026-01-01T00-00-00-000Z_01a182b4-1092.jsonl", "01a182b4-1092-7a6b")
    b = _write(sessions / "--p--", "2026-01-01T00-01-00-000Z_01a182b4-2222.jsonl", "01a182b4-2222-0000")
    c = _write(sessions / "--q--", "2026-01-02T00-00-00-000Z_01a1820f.jsonl", "01a1820f-4040-7e31", cwd="/q")
    root = str(sessions)
    assert resolve_session("01a1820f", root) == str(c)
    assert resolve_session("01a182b4-1", root) == str(a)
    assert resolve_session("01a182b4-2222-0000", root) == str(b)  # full ids keep working
    with pytest.raises(SessionNotFound):
        resolve_session("01a1820", root)  # 7 characters: never a prefix
    with pytest.raises(AmbiguousSession) as err:
        resolve_session("01a182b4", root)
    assert err.value.code == "ambiguous_session"
    assert err.value.candidates == sorted([str(a), str(b)])
    assert "01a182b4-1092-7a6b" in str(err.value) and "01a182b4-2222-0000" in str(err.value)


def test_an_exact_id_wins_over_a_longer_id_it_prefixes(tmp_path) -> None:
    sessions = tmp_path / "sessions"
    short = _write(sessions / "--p--", "x.jsonl", "01a182b4")
    _write(sessions / "--p--", "y.jsonl", "01a182b4-1092")
    assert resolve_session("01a182b4", str(sessions)) == str(short)


def test_a_headerless_file_is_found_by_the_id_in_its_name(tmp_path) -> None:
    folder = tmp_path / "sessions" / "--p--"
    folder.mkdir(parents=True)
    f = folder / "2026-01-01T00-00-00-000Z_01a18abc-dead.jsonl"
    f.write_text("not json\n")
    assert resolve_session("01a18abc", str(tmp_path / "sessions")) == str(f)
