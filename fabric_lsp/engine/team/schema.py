"""The team database's schema, its migrations and the rights of the team role.

Everything lives in one schema, `fabric_team`. Every table that grows with the corpus is
keyed by the session key `skey` (a UUID made from member, machine, session file and
branch mode, `push.session_key`) and hash-partitioned by it, so a distributed PostgreSQL
(Citus) can shard every table on `skey` and co-locate a session's rows (docs/team.md,
"Scaling out"). `fabric-lsp team migrate`, run by the database owner, applies the
migrations in order, records each in `schema_version`, and grants the team role what a
member needs: read everything, write only its own rows (row-level security: each row
carries the role that wrote it in `owner`), never create tables.
"""

from __future__ import annotations

from typing import Any

SCHEMA = "fabric_team"
DEFAULT_TEAM_ROLE = "fabric_team"
PARTITIONS = 8
# The tables members write (all carry `owner`), in the order a full re-push deletes them.
SESSION_TABLES = ("postings", "entries", "segments", "file_ops")
MEMBER_TABLES = ("members", "pushes", "sessions") + SESSION_TABLES


def _partitioned(name: str, columns: str, key: str) -> str:
    parts = "\n".join(
        f"CREATE TABLE {SCHEMA}.{name}_p{i} PARTITION OF {SCHEMA}.{name} "
        f"FOR VALUES WITH (MODULUS {PARTITIONS}, REMAINDER {i});"
        for i in range(PARTITIONS)
    )
    return f"CREATE TABLE {SCHEMA}.{name} ({columns}, PRIMARY KEY ({key})) PARTITION BY HASH (skey);\n{parts}\n"


_V1 = f"""
CREATE TABLE {SCHEMA}.members (
  member text PRIMARY KEY,
  owner text NOT NULL DEFAULT current_user,
  claimed_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE {SCHEMA}.pushes (
  member text NOT NULL REFERENCES {SCHEMA}.members (member),
  machine text NOT NULL,
  owner text NOT NULL DEFAULT current_user,
  pushed_at timestamptz NOT NULL DEFAULT now(),
  pending_sessions int NOT NULL DEFAULT 0,
  pending_reasons text[] NOT NULL DEFAULT '{{}}',
  PRIMARY KEY (member, machine)
);
CREATE TABLE {SCHEMA}.sessions (
  skey uuid PRIMARY KEY,
  owner text NOT NULL DEFAULT current_user,
  member text NOT NULL REFERENCES {SCHEMA}.members (member),
  machine text NOT NULL,
  session_file text NOT NULL,
  file_key bytea NOT NULL,
  branches text NOT NULL,
  session_id text NOT NULL,
  record_session_id text NOT NULL,
  cwd text NOT NULL,
  source_hash text NOT NULL,
  lineage_fingerprint text NOT NULL,
  leaf_id text,
  mtime float8 NOT NULL,
  size bigint NOT NULL,
  stat_key text NOT NULL,
  policy text NOT NULL,
  entry_count int NOT NULL,
  total_len bigint NOT NULL,
  seg_count int NOT NULL,
  records_hash text NOT NULL,
  complete boolean NOT NULL,
  reasons text[] NOT NULL,
  first_ts text,
  last_ts text,
  gen int NOT NULL,
  pushed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sessions_member ON {SCHEMA}.sessions (member, machine);
CREATE INDEX sessions_recency ON {SCHEMA}.sessions (branches, mtime DESC, file_key, member);
{
    _partitioned(
        "entries",
        "skey uuid NOT NULL, pos int NOT NULL, dl int NOT NULL, rec text NOT NULL, "
        "owner text NOT NULL DEFAULT current_user",
        "skey, pos",
    )
}
{
    _partitioned(
        "segments",
        "skey uuid NOT NULL, seg int NOT NULL, start_pos int NOT NULL, start_index bigint NOT NULL, "
        "owner text NOT NULL DEFAULT current_user",
        "skey, seg",
    )
}
{
    _partitioned(
        "postings",
        "skey uuid NOT NULL, term text NOT NULL, gen int NOT NULL, pos int[] NOT NULL, "
        "tf int[] NOT NULL, dl int[] NOT NULL, seg int[] NOT NULL, owner text NOT NULL DEFAULT current_user",
        "skey, term, gen",
    )
}
CREATE INDEX postings_term ON {SCHEMA}.postings (term);
{_partitioned("file_ops", "skey uuid NOT NULL, data bytea NOT NULL, owner text NOT NULL DEFAULT current_user", "skey")}
"""

# (version, SQL). Append only: a released migration is never edited.
MIGRATIONS: list[tuple[int, str]] = [(1, _V1)]
LATEST = MIGRATIONS[-1][0]


def _policies(table: str) -> str:
    """Row-level security: the team role reads every row, writes only rows it owns."""
    t = f"{SCHEMA}.{table}"
    own = "owner = current_user"
    if table == "sessions":
        # a session is pushed under a member name the role has claimed
        check = f"{own} AND member IN (SELECT m.member FROM {SCHEMA}.members m WHERE m.owner = current_user)"
    elif table == "pushes":
        check = f"{own} AND member IN (SELECT m.member FROM {SCHEMA}.members m WHERE m.owner = current_user)"
    else:
        check = own
    return f"""
ALTER TABLE {t} ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS team_read ON {t};
DROP POLICY IF EXISTS own_insert ON {t};
DROP POLICY IF EXISTS own_update ON {t};
DROP POLICY IF EXISTS own_delete ON {t};
CREATE POLICY team_read ON {t} FOR SELECT TO {{role}} USING (true);
CREATE POLICY own_insert ON {t} FOR INSERT TO {{role}} WITH CHECK ({check});
CREATE POLICY own_update ON {t} FOR UPDATE TO {{role}} USING ({own}) WITH CHECK ({check});
CREATE POLICY own_delete ON {t} FOR DELETE TO {{role}} USING ({own});
"""


def rights_sql(role_ident: str) -> str:
    """Grants and policies for the team role (`role_ident` already quoted)."""
    tables = ", ".join(f"{SCHEMA}.{t}" for t in MEMBER_TABLES)
    out = [
        f"GRANT USAGE ON SCHEMA {SCHEMA} TO {role_ident};",
        f"REVOKE CREATE ON SCHEMA {SCHEMA} FROM {role_ident};",
        f"GRANT SELECT ON {SCHEMA}.schema_version TO {role_ident};",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON {tables} TO {role_ident};",
    ]
    for table in MEMBER_TABLES:
        out.append(_policies(table).replace("{role}", role_ident))
    return "\n".join(out)


class MigrationError(Exception):
    pass


def current_version(conn: Any) -> int:
    """The schema version the database has (0: none)."""
    row = conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.schema_version",)).fetchone()
    if row is None or row[0] is None:
        return 0
    got = conn.execute(f"SELECT coalesce(max(version), 0) FROM {SCHEMA}.schema_version").fetchone()
    return int(got[0]) if got is not None else 0


def migrate(conn: Any, team_role: str = DEFAULT_TEAM_ROLE) -> tuple[int, int]:
    """Apply the missing migrations and (re)grant the team role, in one transaction;
    (version before, version after)."""
    from psycopg import sql

    role_ident = sql.Identifier(team_role).as_string(conn)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('fabric_team.migrate'))")
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (team_role,)).fetchone()
        if exists is None:
            try:
                with conn.transaction():
                    conn.execute(f"CREATE ROLE {role_ident} NOLOGIN")
            except Exception as err:
                raise MigrationError(
                    f'the team role "{team_role}" does not exist and this role cannot create it ({err}); '
                    f"create it as an administrator (CREATE ROLE {role_ident} NOLOGIN) and run migrate again"
                ) from None
        before = current_version(conn)
        if before > LATEST:
            raise MigrationError(
                f"the database has team schema version {before}, newer than this fabric-lsp knows ({LATEST}); "
                "upgrade fabric-lsp"
            )
        if before == 0:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {SCHEMA}.schema_version "
                "(version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
        for version, body in MIGRATIONS:
            if version > before:
                conn.execute(body)
                conn.execute(f"INSERT INTO {SCHEMA}.schema_version (version) VALUES (%s)", (version,))
        conn.execute(rights_sql(role_ident))
    return before, LATEST
