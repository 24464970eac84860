"""Connecting to the team database, with errors that say what to do."""

from __future__ import annotations

import re
from typing import Any

from .schema import LATEST, current_version

CONNECT_TIMEOUT_S = 5

# Per-connection settings, each best effort.
SESSION_SETTINGS = (
    # No JIT: the team queries run in milliseconds, but on a large history (2 GB pushed)
    # their estimated cost passes jit_above_cost, and compiling them took ~1.3 s per query
    # (EXPLAIN ANALYZE: JIT 1,293 ms of 1,297 ms).
    "SET jit = off",
    # lz4 instead of pglz for the values PostgreSQL compresses (posting arrays and records
    # over ~2 kB): a push's server CPU falls by a fifth to a third (docs/team.md, "Speed").
    # Servers built without lz4 refuse the value and keep pglz; reading needs nothing.
    "SET default_toast_compression = lz4",
)


class TeamUnavailable(Exception):
    """The team database cannot be used now (down, unreachable, refused, not migrated)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def redact(url: str) -> str:
    """`url` without its password (for messages)."""
    url = re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)
    return re.sub(r"(password\s*=\s*)(\S+)", r"\1***", url)


def connect(url: str, *, autocommit: bool = True, check_schema: bool = True) -> Any:
    """A psycopg connection to `url` (libpq URL or key=value string; libpq's own sources
    fill in what it leaves out: PG* variables, ~/.pgpass, the service file, TLS
    settings such as sslmode/sslrootcert pass through)."""
    try:
        import psycopg
    except ImportError:
        raise TeamUnavailable(
            "team_driver_missing",
            "team recall needs the PostgreSQL driver psycopg 3: pip install 'fabric-lsp[team]'",
        ) from None
    try:
        conn = psycopg.connect(
            url, autocommit=autocommit, connect_timeout=CONNECT_TIMEOUT_S, application_name="fabric-lsp"
        )
    except psycopg.Error as err:
        detail = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise TeamUnavailable(
            "team_unavailable",
            f"the team database at {redact(url)} is unavailable: {detail}; local recall keeps working "
            "(check team.url, that the server is up, and your credentials)",
        ) from None
    for setting in SESSION_SETTINGS:
        try:
            conn.execute(setting)
            if not autocommit:
                conn.commit()
        except psycopg.Error:  # a server without the setting or the value keeps its default
            if not autocommit:
                conn.rollback()
    if check_schema:
        try:
            version = current_version(conn)
        except psycopg.Error as err:
            conn.close()
            raise TeamUnavailable("team_unavailable", f"the team database refused a query: {err}") from None
        if version == 0:
            conn.close()
            raise TeamUnavailable(
                "team_not_migrated",
                f"the team database at {redact(url)} has no fabric-lsp team schema; "
                "the database owner runs `fabric-lsp team migrate` once",
            )
        if version != LATEST:
            conn.close()
            raise TeamUnavailable(
                "team_schema_mismatch",
                f"the team schema is version {version}, this fabric-lsp needs {LATEST}: "
                + ("run `fabric-lsp team migrate`" if version < LATEST else "upgrade fabric-lsp"),
            )
    return conn
