"""Migration 5 converts a schema 4 log in place (issue #23): its `/record` index keyed by
the text keys becomes one keyed by their digests, the dedupe index becomes the prefix one,
and the log then audits clean, finds its servers, dedupes and takes appends.

The schema 4 log is built as schema 4 was: the frozen migrations 1 to 4 on an empty file,
the rows of a log made now copied in, the index rows written back as schema 4 wrote them
(`sub:<id>`, `url:<canonical url>`, from the records themselves).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

from capability_anchor.audit import audit_store
from capability_anchor.log import Log, server_keys
from capability_anchor.store.sqlite import DB_NAME
from capability_anchor.store.sqlite.schema import MIGRATIONS, expected_schema
from tests.integration.test_record import ISS, Clock, server

DAY = "2026-11-02"
TABLES = ("meta", "keys", "entries", "stamps", "heads", "tiles", "key_records", "settings")
LATER = ("history", "history_tiles", "checkpoints", "policies", "cosignatures", "witness_state")


def _as_schema_4(source: Path, dest: Path) -> None:
    shutil.copytree(source, dest)
    for side in ("", "-wal", "-shm"):
        (dest / (DB_NAME + side)).unlink(missing_ok=True)
    db = dest / DB_NAME
    os.close(os.open(db, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("BEGIN")
        for n in range(4):
            MIGRATIONS[n](conn, conn.execute)
        conn.execute("ATTACH DATABASE ? AS now", (str(source / DB_NAME),))
        for table in TABLES + LATER:
            order = "day, leaf_index" if table == "entries" else "rowid"
            conn.execute(f"INSERT INTO main.{table} SELECT * FROM now.{table} ORDER BY {order}")
        rows = conn.execute("SELECT day, leaf_index, claims FROM main.entries").fetchall()
        conn.executemany(
            "INSERT OR IGNORE INTO main.servers (key, day, leaf_index) VALUES (?, ?, ?)",
            [(k, d, i) for d, i, c in rows for k in server_keys(json.loads(c))],
        )
        conn.execute("PRAGMA user_version = 4")
        conn.execute("COMMIT")
        conn.execute("DETACH DATABASE now")
    finally:
        conn.close()


def _schema(db: Path) -> list[tuple[str, str, str, str | None]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name"
        ).fetchall()
    finally:
        conn.close()


def test_a_schema_4_log_is_converted_in_place_and_works(tmp_path: Path) -> None:
    clock = Clock()
    made = tmp_path / "now"
    with Log.init(made, iss=ISS, clock=clock) as log:
        log.append([server(n) for n in range(1, 8)])
        log.checkpoint()
    old = tmp_path / "v4"
    _as_schema_4(made, old)
    conn = sqlite3.connect(old / DB_NAME)
    try:
        assert conn.execute("SELECT count(*) FROM servers WHERE key LIKE 'sub:%'").fetchone() == (
            7,
        )
    finally:
        conn.close()

    with Log.open(old, clock=clock) as log:
        assert log.store.execute_raw("PRAGMA user_version") == [(5,)]
        assert audit_store(log).ok
        assert log.record(sub="example:3")["sub"] == "example:3"
        assert log.record(url="https://s5.example/mcp")["sub"] == "example:5"
        again = log.append([server(2), server(9)])
        assert again[0].duplicate and again[0].leaf_index == 1
        assert not again[1].duplicate and again[1].leaf_index == 7
        log.checkpoint()
        assert log.record(sub="example:9")["sub"] == "example:9"
        assert audit_store(log).ok
    # The same schema, object by object, as the migrations give an empty database.
    assert _schema(old / DB_NAME) == expected_schema(5)
    # Every index row now a digest, none left in schema 4's form.
    conn = sqlite3.connect(old / DB_NAME)
    try:
        keys = [k for (k,) in conn.execute("SELECT key FROM servers")]
    finally:
        conn.close()
    assert len(keys) == 16 and all(len(k) == 12 and ":" not in k for k in keys)
