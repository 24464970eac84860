"""Team recall on a real PostgreSQL (tests/team/conftest.py): two members push the
bundled examples; `scope: "team"` answers exactly what a local `scope: "global"` with
every session hot answers; pushes are opt-in and incremental; row-level security keeps
each member to its own rows; an unreachable database is a clear answer."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from typing import Any as Cluster  # (the cluster fixture's type: tests/team/conftest.py)

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from team_kit import (
    append_rows,
    entry_row,
    last_entry_id,
    local_global,
    member_engine,
    memory_config,
    session_rows,
    strip_local,
    strip_team,
    write_session,
)

from fabric_lsp.commands.examples import write_examples
from fabric_lsp.engine.team.api import TeamEngine
from fabric_lsp.engine.team.push import PushError
from fabric_lsp.engine.team.schema import SCHEMA
from fabric_lsp.engine.team.settings import TeamSettings
from tests.support.examples import profile_examples
from tests.support.wire import WireMemoryEngine, WireTeamEngine

LEDGER = "/home/user/projects/ledger"
ORBIT = "/home/user/projects/orbit"


def _wipe(cluster: Cluster) -> None:
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute(
            f"TRUNCATE {SCHEMA}.postings, {SCHEMA}.entries, {SCHEMA}.segments, {SCHEMA}.file_ops, "
            f"{SCHEMA}.sessions, {SCHEMA}.pushes, {SCHEMA}.members"
        )


def _admin_rows(cluster: Cluster, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


@pytest.fixture
def db(team_db: Cluster) -> Iterator[Cluster]:
    _wipe(team_db)
    yield team_db


@pytest.fixture
def examples(tmp_path: Path) -> Path:
    agent = tmp_path / "agent"
    write_examples(agent)
    return agent


def _same(team: TeamEngine, local: Any, params: dict[str, Any]) -> dict[str, Any]:
    t = team.recall(dict(params, scope="team"))
    loc = local_global(local, params)
    assert "error" not in t["coverage"], t["coverage"]
    assert strip_team(t) == strip_local(loc), params
    return t


# ---- equality ---------------------------------------------------------------------------------


def test_two_members_team_equals_local_global(db: Cluster, examples: Path) -> None:
    alice, la = member_engine(db.member_url("alice"), "alice@test", [LEDGER], examples)
    bob, lb = member_engine(db.member_url("bob"), "bob@test", [ORBIT + "*"], examples)
    assert alice.push(la).counts() == {"new": 3}
    assert bob.push(lb).counts() == {"new": 4}
    queries = [
        "auth login",
        "test",
        "the",
        "migration ledger",
        "zzzz",
        "error failed",
        "src ts",
        "Ｆｕｌｌ",
        "session compaction",
        "orbit",
        "fix the bug",
        "json",
        "a",
        # many terms: the float sum's order (query order) shows in the last bits
        "the test auth login migration ledger error failed src json fix bug session orbit a to",
    ]
    seen_members: set[str] = set()
    for q in queries:
        for page, size in ((1, 25), (1, 3), (2, 3), (4, 7), (100, 5)):
            t = _same(alice, la, {"query": q, "page": page, "pageSize": size})
            for item in t["items"]:
                seen_members.add(item["segment"]["member"])
                assert item["segment"]["machine"]
    # browse (no query), both branch modes' answers for active
    for page, size in ((1, 25), (2, 10), (7, 4)):
        _same(alice, la, {"page": page, "pageSize": size})
    assert seen_members == {"alice@test", "bob@test"}
    # bob sees the same team answer as alice
    p = {"query": "test", "scope": "team", "pageSize": 10}
    assert strip_team(bob.recall(p)) == strip_team(alice.recall(p))
    # team:<member> ranks over that member's sessions alone
    only = alice.recall({"query": "test", "scope": "team:bob@test", "pageSize": 100})
    assert only["items"] and all(i["segment"]["member"] == "bob@test" for i in only["items"])
    assert all(
        ORBIT in (i["segment"]["sessionFile"] or "") or "orbit" in i["segment"]["sessionFile"] for i in only["items"]
    )


def test_team_member_scope_equals_local_global_of_those_sessions(db: Cluster, examples: Path, tmp_path: Path) -> None:
    """`team:<member>` over bob's sessions = local global over an agent dir holding only them."""
    bob, lb = member_engine(db.member_url("bob"), "bob@test", [ORBIT + "*"], examples)
    alice, la = member_engine(db.member_url("alice"), "alice@test", [LEDGER], examples)
    bob.push(lb)
    alice.push(la)
    only_orbit = tmp_path / "orbit-agent"
    shutil.copytree(examples, only_orbit, copy_function=shutil.copy2)
    for folder in (only_orbit / "sessions").iterdir():
        if "ledger" in folder.name:
            shutil.rmtree(folder)
    _t, local_orbit = member_engine(db.member_url("bob"), "x", [], only_orbit)
    for q in ("test", "the", "auth"):
        t = alice.recall({"query": q, "scope": "team:bob@test", "pageSize": 8})
        loc = local_global(local_orbit, {"query": q, "pageSize": 8})
        a, b = strip_team(t), strip_local(loc)
        # the session files differ only in the agent dir prefix
        assert str(a).replace(str(examples), "X") == str(b).replace(str(only_orbit), "X")


# ---- opt-in and incremental push --------------------------------------------------------------


def test_push_is_opt_in(db: Cluster, examples: Path) -> None:
    nobody, ln = member_engine(db.member_url("alice"), "alice@test", [], examples)
    report = nobody.push(ln)
    assert report.counts() == {} and report.steps == []
    assert _admin_rows(db, f"SELECT count(*) FROM {SCHEMA}.sessions")[0][0] == 0
    assert _admin_rows(db, f"SELECT count(*) FROM {SCHEMA}.entries")[0][0] == 0
    alice, la = member_engine(db.member_url("alice"), "alice@test", [LEDGER], examples)
    alice.push(la)
    cwds = {r[0] for r in _admin_rows(db, f"SELECT DISTINCT cwd FROM {SCHEMA}.sessions")}
    assert cwds == {LEDGER}
    # no orbit text reached any table: every stored entry belongs to a ledger session
    orphans = _admin_rows(
        db,
        f"SELECT count(*) FROM {SCHEMA}.entries e JOIN {SCHEMA}.sessions s USING (skey) WHERE s.cwd <> %s",
        (LEDGER,),
    )
    assert orphans[0][0] == 0
    total = _admin_rows(db, f"SELECT count(*) FROM {SCHEMA}.entries")[0][0]
    assert total == sum(r[0] for r in _admin_rows(db, f"SELECT entry_count FROM {SCHEMA}.sessions"))
    # dry run lists, sends nothing
    bob, lb = member_engine(db.member_url("bob"), "bob@test", [ORBIT], examples)
    dry = bob.push(lb, dry_run=True)
    assert dry.counts() == {"new": 4} and all(s.entries_sent > 0 for s in dry.steps)
    assert _admin_rows(db, f"SELECT count(*) FROM {SCHEMA}.sessions WHERE member = 'bob@test'")[0][0] == 0


def test_push_is_incremental(db: Cluster, tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    turns = [
        ("user", "deploy the ledger service"),
        ("assistant", "running the deploy script now"),
        ("bash", "make deploy"),
        ("user", "it failed with a timeout"),
        ("assistant", "raising the timeout"),
    ]
    files = [
        write_session(agent, f"/w/p{i}", f"s{i}.jsonl", session_rows(f"sess-{i}", f"/w/p{i}", turns), 1_700_000_000 + i)
        for i in range(3)
    ]
    alice, la = member_engine(db.member_url("alice"), "alice@test", ["/w/*"], agent)
    first = alice.push(la)
    assert first.counts() == {"new": 3}
    again = alice.push(la)
    assert again.counts() == {"unchanged": 3}
    assert all(s.entries_sent == 0 and s.postings_sent == 0 for s in again.steps)
    # a grown session sends exactly its new entries
    grow = files[1]
    parent = last_entry_id(grow)
    append_rows(
        grow,
        [
            entry_row("feedbeef", parent, "user", "zebra quantum appended words", 40),
            entry_row("feedbee2", "feedbeef", "assistant", "appended answer zebra", 41),
        ],
    )
    before_gen1 = _admin_rows(db, f"SELECT count(*) FROM {SCHEMA}.postings WHERE gen = 1")[0][0]
    grown = alice.push(la)
    steps = {s.session_file: s for s in grown.steps}
    assert steps[str(grow)].action == "append"
    assert steps[str(grow)].entries_sent == 2
    assert {steps[str(f)].action for f in (files[0], files[2])} == {"unchanged"}
    new_terms = _admin_rows(db, f"SELECT term FROM {SCHEMA}.postings WHERE gen = 1")
    assert before_gen1 == 0 and {t for (t,) in new_terms} == {"zebra", "quantum", "appended", "words", "answer"}
    assert steps[str(grow)].postings_sent == len(new_terms)
    _same(alice, la, {"query": "zebra timeout"})
    _same(alice, la, {"query": "deploy", "pageSize": 2, "page": 2})
    # a rewritten session is replaced
    write_session(agent, "/w/p0", "s0.jsonl", session_rows("sess-0", "/w/p0", turns[::-1]), 1_700_000_100)
    assert {s.session_file: s.action for s in alice.push(la).steps}[str(files[0])] == "replace"
    _same(alice, la, {"query": "deploy timeout"})
    # a deleted session is removed; a project no longer opted in is removed
    files[2].unlink()
    assert [s.action for s in alice.push(la).steps if s.session_file == str(files[2])] == ["delete"]
    narrowed, ln = member_engine(db.member_url("alice"), "alice@test", ["/w/p1"], agent)
    report = narrowed.push(ln)
    assert {s.session_file: s.action for s in report.steps} == {str(files[0]): "delete", str(files[1]): "unchanged"}
    assert [r[0] for r in _admin_rows(db, f"SELECT session_file FROM {SCHEMA}.sessions")] == [str(files[1])]
    assert (
        _admin_rows(db, f"SELECT count(*) FROM {SCHEMA}.entries")[0][0]
        == _admin_rows(db, f"SELECT entry_count FROM {SCHEMA}.sessions")[0][0]
    )


def test_stale_push_is_a_coverage_reason(db: Cluster, tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    path = write_session(agent, "/w/a", "a.jsonl", session_rows("a", "/w/a", [("user", "alpha beta")]), 1_700_000_000)
    alice, la = member_engine(db.member_url("alice"), "alice@test", ["/w/*"], agent)
    alice.push(la)
    fresh = alice.recall({"query": "alpha", "scope": "team"})
    assert fresh["authoritative"] and fresh["coverage"]["staleSessions"] == 0
    append_rows(path, [entry_row("0000beef", last_entry_id(path), "user", "gamma", 9)])
    stale = alice.recall({"query": "gamma", "scope": "team"})
    assert not stale["authoritative"]
    assert stale["coverage"]["staleSessions"] == 1 and "team_push_stale" in stale["coverage"]["reasons"]
    assert stale["text"].startswith('No indexed matches for "gamma"')
    alice.push(la)
    assert alice.recall({"query": "gamma", "scope": "team"})["totalItems"] == 1


# ---- security ---------------------------------------------------------------------------------


def test_team_connections_never_jit_compile(db: Cluster) -> None:
    """On a 2 GB team history PostgreSQL's JIT compiled every team query (~1.3 s of a
    ~5 ms query): the team connection turns it off for its session."""
    from fabric_lsp.engine.team.db import connect

    conn = connect(db.member_url("alice"))
    try:
        assert conn.execute("SHOW jit").fetchone()[0] == "off"
    finally:
        conn.close()
    with psycopg.connect(db.url(), autocommit=True) as other:  # only ours: the server default stays
        assert other.execute("SHOW jit").fetchone()[0] == "on"


def test_row_level_security(db: Cluster, examples: Path) -> None:
    alice, la = member_engine(db.member_url("alice"), "alice@test", [LEDGER], examples)
    alice.push(la)
    counts = _admin_rows(
        db,
        f"SELECT (SELECT count(*) FROM {SCHEMA}.sessions), (SELECT count(*) FROM {SCHEMA}.entries), "
        f"(SELECT count(*) FROM {SCHEMA}.postings)",
    )[0]
    with psycopg.connect(db.member_url("bob"), autocommit=True) as bob:
        # bob reads alice's rows ...
        assert bob.execute(f"SELECT count(*) FROM {SCHEMA}.entries").fetchone()[0] == counts[1]
        # ... and cannot change or delete them
        for sql in (
            f"DELETE FROM {SCHEMA}.sessions",
            f"DELETE FROM {SCHEMA}.entries",
            f"DELETE FROM {SCHEMA}.postings",
            f"UPDATE {SCHEMA}.entries SET rec = '{{}}'",
            f"UPDATE {SCHEMA}.sessions SET member = 'bob@test'",
        ):
            assert bob.execute(sql).rowcount == 0, sql
        skey = bob.execute(f"SELECT skey FROM {SCHEMA}.sessions LIMIT 1").fetchone()[0]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            bob.execute(
                f"INSERT INTO {SCHEMA}.entries (skey, pos, dl, rec, owner) VALUES (%s, 999, 1, '{{}}', 'alice')",
                (skey,),
            )
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            bob.execute(f"INSERT INTO {SCHEMA}.members (member, owner) VALUES ('evil', 'alice')")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            bob.execute(f"CREATE TABLE {SCHEMA}.mine (x int)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            bob.execute(f"TRUNCATE {SCHEMA}.entries")
    after = _admin_rows(
        db,
        f"SELECT (SELECT count(*) FROM {SCHEMA}.sessions), (SELECT count(*) FROM {SCHEMA}.entries), "
        f"(SELECT count(*) FROM {SCHEMA}.postings)",
    )[0]
    assert after == counts
    # bob cannot push under alice's member name
    impostor, li = member_engine(db.member_url("bob"), "alice@test", [ORBIT], examples)
    with pytest.raises(PushError, match='belongs to the database role "alice"'):
        impostor.push(li)
    assert _admin_rows(db, f"SELECT DISTINCT owner FROM {SCHEMA}.sessions") == [("alice",)]


def test_unreachable_database_is_a_clear_answer_and_local_recall_works(tmp_path: Path, examples: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = memory_config()

    local = WireMemoryEngine(cfg, agent_dir=str(examples), index_dir=str(tmp_path / "idx"))
    team = WireTeamEngine(
        TeamSettings(url=f"postgresql://alice:pw@127.0.0.1:{port}/fabric", member="a"), cfg, lambda: local
    )
    res = team.recall({"query": "test", "scope": "team"})
    err = res["coverage"]["error"]
    assert err["code"] == "team_unavailable" and f"127.0.0.1:{port}" in err["message"]
    assert "pw" not in err["message"] and "local recall keeps working" in err["message"]
    assert res["items"] == [] and not res["authoritative"]
    assert local.recall({"query": "test", "scope": "global"})["totalItems"] > 0
    unset = WireTeamEngine(TeamSettings(), cfg).recall({"query": "x", "scope": "team"})
    assert unset["coverage"]["error"]["code"] == "team_not_configured"
    assert "team.url" in unset["coverage"]["error"]["message"]


# ---- property: team == local over generated sessions --------------------------------------------

WORDS = ["alpha", "beta", "gamma", "delta", "deploy", "fix", "bug", "test", "auth", "é", "ﬁle", "x1", "under_score"]
ROLES = ["user", "assistant", "bash"]

turn_st = st.tuples(st.sampled_from(ROLES), st.lists(st.sampled_from(WORDS), min_size=0, max_size=8).map(" ".join))
session_st = st.tuples(
    st.sampled_from(["/p/one", "/p/two", "/p/three"]), st.integers(0, 3), st.lists(turn_st, min_size=0, max_size=12)
)
query_st = st.lists(st.sampled_from(WORDS + ["absent"]), min_size=0, max_size=3).map(" ".join)


@settings(max_examples=profile_examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sessions=st.lists(session_st, min_size=1, max_size=5),
    queries=st.lists(query_st, min_size=1, max_size=4),
    page_size=st.integers(1, 6),
    page=st.integers(1, 4),
)
def test_property_team_equals_local(
    team_db: Cluster,
    tmp_path_factory: pytest.TempPathFactory,
    sessions: list[tuple[str, int, list[tuple[str, str]]]],
    queries: list[str],
    page_size: int,
    page: int,
) -> None:
    _wipe(team_db)
    agent = tmp_path_factory.mktemp("prop") / "agent"
    for i, (cwd, tick, turns) in enumerate(sessions):
        # equal mtimes on purpose (ties are broken by the path's UTF-16 order)
        write_session(agent, cwd, f"s{i}.jsonl", session_rows(f"id{i}", cwd, turns), 1_700_000_000 + tick)
    team, local = member_engine(team_db.member_url("alice"), "alice@test", ["/p/*"], agent)
    team.push(local)
    try:
        for q in queries:
            params: dict[str, Any] = {"pageSize": page_size, "page": page}
            if q:
                params["query"] = q
            _same(team, local, params)
            _same(team, local, dict(params, page=1))
    finally:
        team.close()
        local.close()
