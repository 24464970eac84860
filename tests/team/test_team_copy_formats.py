"""The two COPY encodings of posting rows (engine/team/copy_rows.py) store the same rows
in a real PostgreSQL: the binary one the push uses, and the text one it falls back to
where array items are not 4 and 8 bytes wide."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any as Cluster  # (the cluster fixture's type: tests/team/conftest.py)

import psycopg
import pytest
from team_kit import memory_config

from fabric_lsp.commands.examples import write_examples
from fabric_lsp.engine.team import copy_rows
from fabric_lsp.engine.team.db import connect
from fabric_lsp.engine.team.prepare import PushTask, prepare
from fabric_lsp.engine.team.push import claim_member, policy_of, write_prepared
from fabric_lsp.engine.team.schema import SCHEMA


def test_binary_and_text_postings_store_the_same_rows(
    team_db: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with psycopg.connect(team_db.url(), autocommit=True) as admin:
        admin.execute(
            f"TRUNCATE {SCHEMA}.postings, {SCHEMA}.entries, {SCHEMA}.segments, {SCHEMA}.file_ops, "
            f"{SCHEMA}.sessions, {SCHEMA}.pushes, {SCHEMA}.members"
        )
    write_examples(tmp_path / "agent")
    file = str(max((tmp_path / "agent").rglob("*.jsonl"), key=lambda p: p.stat().st_size))
    cfg = memory_config()
    keys = {"binary": uuid.uuid4(), "text": uuid.uuid4()}
    with connect(team_db.member_url("alice")) as conn:
        claim_member(conn, "alice@test")
        for fmt, skey in keys.items():
            monkeypatch.setattr(copy_rows, "ARRAYS_OK", fmt == "binary")
            ready = prepare(PushTask(file, cfg, "id", "/cwd", str(skey), policy_of(cfg), None, False))
            assert ready["postingsFormat"] == fmt
            write_prepared(conn, skey, ready, SimpleNamespace(file=file), member="alice@test", machine="m")  # type: ignore[arg-type]
        got = {
            fmt: conn.execute(
                f"SELECT term, gen, pos, tf, dl, seg FROM {SCHEMA}.postings WHERE skey = %s ORDER BY term", (skey,)
            ).fetchall()
            for fmt, skey in keys.items()
        }
        # the push's connection compresses with lz4 (Debian's server has it): db.SESSION_SETTINGS
        assert conn.execute("SHOW default_toast_compression").fetchone() == ("lz4",)
        methods = conn.execute(
            f"SELECT DISTINCT pg_column_compression(rec) FROM {SCHEMA}.entries "
            "WHERE pg_column_compression(rec) IS NOT NULL"
        ).fetchall()
        assert methods == [("lz4",)]
    assert got["binary"] == got["text"]
    assert any(len(row[2]) == 1 for row in got["binary"]) and any(len(row[2]) > 1 for row in got["binary"])
    assert len(got["binary"]) == ready["postingsCount"] > 100
