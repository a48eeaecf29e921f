"""The SQLite migrations are frozen literal SQL (issue #22 item 4): the audit's expected schema
is made without sqlite-utils writing anything, and sqlite-utils' introspection compares the
structure SQLite reads (columns, indexes, triggers) with the frozen migrations'."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
import sqlite_utils

from capability_anchor.store import SCHEMA_VERSION
from capability_anchor.store.sqlite.schema import MIGRATIONS, expected_schema, structure_problems


def _refuse(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("a migration asked sqlite-utils to write DDL")


def test_the_expected_schema_is_made_from_the_frozen_sql_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = [expected_schema(v) for v in range(SCHEMA_VERSION + 1)]
    monkeypatch.setattr(sqlite_utils.Database, "create_table", _refuse)
    monkeypatch.setattr(sqlite_utils.db.Table, "create", _refuse)
    monkeypatch.setattr(sqlite_utils.db.Table, "create_index", _refuse)
    assert [expected_schema(v) for v in range(SCHEMA_VERSION + 1)] == before
    names = {row[1] for row in before[SCHEMA_VERSION]}
    assert {"entries", "entries_by_hash", "meta", "keys", "stamps", "settings"} <= names


def _made(version: int) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    for n in range(version):
        MIGRATIONS[n](conn, conn.execute)
    return conn


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION + 1))
def test_the_frozen_structure_is_what_sqlite_reads_back(version: int) -> None:
    conn = _made(version)
    try:
        assert structure_problems(conn, version) == []
    finally:
        conn.close()


def test_a_changed_structure_is_named_by_table() -> None:
    conn = _made(SCHEMA_VERSION)
    try:
        conn.execute("ALTER TABLE meta ADD COLUMN note TEXT")
        conn.execute("DROP TRIGGER stamps_no_update")
        assert structure_problems(conn, SCHEMA_VERSION) == [
            f"schema: table {name}: its columns, indexes or triggers as SQLite reads them "
            f"differ from schema version {SCHEMA_VERSION}"
            for name in ("meta", "stamps")
        ]
    finally:
        conn.close()
