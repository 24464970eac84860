"""A private PostgreSQL cluster for the team tests (one per test session).

initdb in a fresh temporary dir, a free TCP port on 127.0.0.1, the unix socket in that
dir, run as a non-root OS user (`nobody` when the tests run as root, else the current
user), and stopped (`pg_ctl stop -m immediate`) and removed at the end. Never a
system-wide cluster. The server binaries come from Debian's package
(scripts/deps/postgres.sh): /usr/lib/postgresql/<version>/bin, newest first.

The database owner (`fabric_admin`, superuser) runs `team migrate`; the members `alice`
and `bob` are LOGIN roles in the team role `fabric_team`, with passwords (scram over TCP).
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ADMIN = "fabric_admin"
MEMBERS = {"alice": "alice-pw", "bob": "bob-pw"}


def _bin_dir() -> str:
    found = []
    for d in glob.glob("/usr/lib/postgresql/*/bin"):
        try:
            major = int(os.path.basename(os.path.dirname(d)).split(".")[0])
        except ValueError:
            continue
        if major >= 15 and os.path.exists(os.path.join(d, "initdb")):
            found.append((major, d))
    if not found:
        pytest.fail("PostgreSQL >= 15 is not installed: run scripts/deps/postgres.sh (as root on Debian)")
    return max(found)[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    host: str
    port: int
    dbname: str
    sockdir: str

    def url(self, user: str = ADMIN, password: str | None = None) -> str:
        if password is None:
            return f"host={self.sockdir} port={self.port} dbname={self.dbname} user={user}"
        return f"postgresql://{user}:{password}@{self.host}:{self.port}/{self.dbname}"

    def member_url(self, name: str) -> str:
        return self.url(name, MEMBERS[name])


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    bindir = _bin_dir()
    root = tempfile.mkdtemp(prefix="fabric-team-pg-")
    run_as: list[str] = []
    if os.geteuid() == 0:
        user = os.environ.get("FABRIC_PG_USER", "nobody")
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
        run_as = ["runuser", "-u", user, "--"]
    data = os.path.join(root, "data")
    port = _free_port()

    def pg(*cmd: str) -> None:
        res = subprocess.run(run_as + list(cmd), capture_output=True, text=True, cwd=root)
        if res.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}): {res.stdout}\n{res.stderr}")

    pg(
        os.path.join(bindir, "initdb"),
        "-D",
        data,
        "-U",
        ADMIN,
        "--auth-local=trust",
        "--auth-host=scram-sha-256",
        "-E",
        "UTF8",
        "--locale=C.UTF-8",
        "--no-sync",
    )
    # (bench/bench_team.py --shared-buffers sets FABRIC_TEST_PG_SHARED_BUFFERS; the tests use 64MB)
    buffers = os.environ.get("FABRIC_TEST_PG_SHARED_BUFFERS", "64MB")
    if not re.fullmatch(r"[0-9]+[MG]B", buffers):
        raise ValueError(f"FABRIC_TEST_PG_SHARED_BUFFERS={buffers!r}: expected a size such as 64MB or 1GB")
    opts = (
        f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={root} "
        f"-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c shared_buffers={buffers}"
    )
    log = os.path.join(root, "server.log")
    try:
        pg(os.path.join(bindir, "pg_ctl"), "-D", data, "-l", log, "-o", opts, "-w", "-t", "60", "start")
    except RuntimeError as err:
        text = open(log).read() if os.path.exists(log) else ""
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"{err}\n{text}") from None
    cluster = Cluster("127.0.0.1", port, "fabric", root)
    try:
        import psycopg

        with psycopg.connect(
            cluster.url(ADMIN, None).replace("dbname=fabric", "dbname=postgres"), autocommit=True
        ) as conn:
            conn.execute("CREATE DATABASE fabric")
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            for name, pw in MEMBERS.items():
                conn.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{pw}'")
        yield cluster
    finally:
        subprocess.run(
            run_as + [os.path.join(bindir, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop"],
            capture_output=True,
            cwd=root,
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def team_db(pg_cluster: Cluster) -> Cluster:
    """The cluster with the team schema migrated by the owner and both members in the
    team role."""
    from fabric_lsp.engine.team.db import connect
    from fabric_lsp.engine.team.schema import migrate

    conn = connect(pg_cluster.url(), check_schema=False)
    try:
        migrate(conn)
        for name in MEMBERS:
            conn.execute(f"GRANT fabric_team TO {name}")
    finally:
        conn.close()
    return pg_cluster


# the bundled examples' projects, as each member pushes them (two_members_pushed)
LEDGER = "/home/user/projects/ledger"
ORBIT = "/home/user/projects/orbit"


@pytest.fixture
def two_members_pushed(team_db: Cluster, tmp_path: Path) -> Iterator[tuple[Cluster, list[Any]]]:
    """alice pushed the ledger examples, bob the orbit ones, each from an agent dir of its
    own under `tmp_path/<name>-machine/` (the editor tests delete them: that machine is
    elsewhere). Yields the cluster and `(team engine, local engine, agent dir)` per member;
    the tables are emptied first."""
    import psycopg

    from fabric_lsp.commands.examples import write_examples
    from fabric_lsp.engine.team.schema import SCHEMA
    from tests.team.team_kit import member_engine

    with psycopg.connect(team_db.url(), autocommit=True) as conn:
        conn.execute(
            f"TRUNCATE {SCHEMA}.postings, {SCHEMA}.entries, {SCHEMA}.segments, {SCHEMA}.file_ops, "
            f"{SCHEMA}.sessions, {SCHEMA}.pushes, {SCHEMA}.members"
        )
    engines = []
    for name, projects in (("alice", [LEDGER]), ("bob", [ORBIT + "*"])):
        agent = tmp_path / f"{name}-machine" / "agent"
        write_examples(agent)
        team, local = member_engine(team_db.member_url(name), f"{name}@test", projects, agent)
        assert team.push(local).counts().get("new", 0) > 0
        engines.append((team, local, agent))
    yield team_db, engines
    for team, local, _agent in engines:
        team.close()
        local.close()
