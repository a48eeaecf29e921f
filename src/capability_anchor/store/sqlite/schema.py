"""The SQLite schema: its migrations (each its DDL frozen as literal SQL) and what the audit
accepts as each object's definition: the frozen text or the text 0.x wrote
(`HISTORIC_SQL`), and the same structure (docs/explanation/store.md, "Module notes")."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable

import sqlite_utils

from capability_anchor.errors import StoreError
from capability_anchor.store.rows import SCHEMA_VERSION

from .migrations import v1, v2, v3, v4, v5

SchemaRow = tuple[str, str, str, str | None]  # (type, name, tbl_name, sql) in sqlite_master
# Each: (connection, run one statement with the caller's error handling), inside the caller's
# transaction.
Migration = Callable[[sqlite3.Connection, Callable[[str], object]], None]
MIGRATIONS: tuple[Migration, ...] = (
    v1.migration_1,
    v2.migration_2,
    v3.migration_3,
    v4.migration_4,
    v5.migration_5,
)


def migrate(conn: sqlite3.Connection, version: int, run: Callable[[str], object]) -> None:
    """Apply the migrations after `version` on `conn`, inside the caller's transaction."""
    for n in range(version, SCHEMA_VERSION):
        MIGRATIONS[n](conn, run)


def database(conn: sqlite3.Connection) -> sqlite_utils.Database:
    """sqlite-utils over one of our connections, changing nothing on it: the connection's
    pragmas are set where it is opened, and no plugin gets to prepare it."""
    return sqlite_utils.Database(conn, recursive_triggers=False, execute_plugins=False)


def schema_rows(conn: sqlite3.Connection) -> list[SchemaRow]:
    """(type, name, tbl_name, sql) of every schema object, by name. Read from sqlite_master
    itself, not through sqlite-utils' listings (`Database.tables`, `.views`, `.triggers`,
    `Table.indexes`): those give no index's SQL text, and the audit compares every object's
    text, whatever its kind."""
    return [
        (str(t), str(n), str(tb), None if s is None else str(s))
        for t, n, tb, s in conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name"
        )
    ]


def _made(version: int) -> sqlite3.Connection:
    """An empty in-memory database with the frozen migrations up to `version` applied."""
    if not 0 <= version <= SCHEMA_VERSION:
        raise StoreError(f"no schema version {version}")
    conn = sqlite3.connect(":memory:", isolation_level=None)
    for n in range(version):
        MIGRATIONS[n](conn, conn.execute)
    return conn


def expected_schema(version: int) -> list[SchemaRow]:
    """What the migrations up to `version` create (a migration added later is covered by
    itself)."""
    conn = _made(version)
    try:
        return schema_rows(conn)
    finally:
        conn.close()


def _structure(db: sqlite_utils.Database) -> dict[str, tuple[object, ...]]:
    """Each table's columns (name, type, NOT NULL, default, key position), indexes (name,
    unique, columns) and trigger names, as sqlite-utils reads them from SQLite."""
    return {
        name: (
            [(c.name, c.type, c.notnull, c.default_value, c.is_pk) for c in table.columns],
            sorted((i.name, i.unique, tuple(i.columns)) for i in table.indexes),
            sorted(t.name for t in table.triggers),
        )
        for name in db.table_names()
        for table in (db.table(name),)
    }


def structure_problems(conn: sqlite3.Connection, version: int) -> list[str]:
    """Every table whose structure, as SQLite reads it, is not that of schema `version`'s
    frozen migrations. Asked only of a schema whose every text was accepted (a text that
    differs is named by `schema_problems`); what cannot be read is left to that check."""
    made = _made(version)
    try:
        want = _structure(database(made))
        try:
            have = _structure(database(conn))
        except (sqlite3.Error, UnicodeDecodeError):
            return []
    finally:
        made.close()
    return [
        f"schema: table {name}: its columns, indexes or triggers as SQLite reads them differ "
        f"from schema version {version}"
        for name in sorted(set(want) | set(have))
        if want.get(name) != have.get(name)
    ]


# The text capability-anchor 0.x stored for the objects sqlite-utils now writes: a log made by
# 0.x keeps it, as SQLite keeps every CREATE statement as it was written.
HISTORIC_SQL: dict[str, str] = {
    "meta": "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT",
    "keys": "CREATE TABLE keys (kid TEXT PRIMARY KEY, jwk TEXT NOT NULL, added INTEGER NOT NULL) "
    "STRICT",
    "entries_by_hash": "CREATE UNIQUE INDEX entries_by_hash ON entries (leaf_hash, day)",
    "stamps": "CREATE TABLE stamps (\n        day TEXT NOT NULL,\n        tsa TEXT NOT NULL,\n"
    "        token BLOB NOT NULL,\n        gen_time TEXT NOT NULL,\n        added INTEGER NOT NULL,"
    "\n        PRIMARY KEY (day, tsa)\n    ) STRICT",
    "settings": "CREATE TABLE settings (\n        id INTEGER PRIMARY KEY,\n"
    "        kid TEXT NOT NULL,\n        jws TEXT NOT NULL,\n"
    "        added INTEGER NOT NULL\n    ) STRICT",
}


def schema_problems(got: list[SchemaRow], version: int) -> list[str]:
    """Every object of `got` that is missing from, added to, or not as schema `version`
    defines it. An object matches when its type and table are the definition's and its SQL
    is, exactly, either the text the migrations write or the text 0.x wrote."""
    want = {row[1]: row for row in expected_schema(version)}
    have = {row[1]: row for row in got}
    problems: list[str] = []
    for name in sorted(set(want) | set(have)):
        w, g = want.get(name), have.get(name)
        if g is None and w is not None:
            problems.append(f"schema: {w[0]} {name} is missing (schema version {version})")
        elif w is None and g is not None:
            problems.append(
                f"schema: {g[0]} {name} on {g[2]} is not part of schema version {version}"
            )
        elif w is not None and g is not None and not _same(w, g):
            problems.append(
                f"schema: {g[0]} {name} differs from its definition in schema version {version}"
            )
    return problems


def _same(want: SchemaRow, got: SchemaRow) -> bool:
    if got[:3] != want[:3]:
        return False
    if got[3] == want[3]:
        return True
    # 0.x's text stands only for the object it wrote: not for one a later migration made
    # anew under the same name (schema 5's entries_by_hash).
    v2 = _v2_texts().get(got[1])
    return got[3] is not None and got[3] == HISTORIC_SQL.get(got[1]) and want[3] == v2


@functools.cache
def _v2_texts() -> dict[str, str | None]:
    """The text the migrations up to schema 2 (what 0.x had) give each object."""
    return {row[1]: row[3] for row in expected_schema(2)}
