"""The SQLite schema: its migrations, and what the audit accepts as each object's definition.

Tables and indexes are created through sqlite-utils where its API says everything the
definition needs (`create_table(..., strict=True)`, `create_index`). Tables with CHECK
constraints, `WITHOUT ROWID` or a column-level UNIQUE stay SQL: `create_table` has no public
parameter for any of them. Triggers stay SQL too: sqlite-utils has no API for arbitrary
triggers (its own triggers are only the FTS and counts ones).

Migration n brings user_version from n-1 to n. Never change what a shipped migration creates:
add one. The SQL text sqlite-utils writes is not the text capability-anchor 0.x wrote for the
same objects (quoting, layout), so the audit accepts, object by object, either the text the
migrations below write or the text 0.x wrote (`HISTORIC_SQL`): both exactly, nothing in
between (README, Decisions).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import sqlite_utils

from capability_anchor.errors import StoreError
from capability_anchor.merkle import TreeEdge, hash_leaf
from capability_anchor.store.rows import SCHEMA_VERSION, HeadRow
from capability_anchor.store.sqlite.migrations.v4 import migration_4

from .errors import store_error
from .tiles import HISTORY_TILES

SchemaRow = tuple[str, str, str, str | None]  # (type, name, tbl_name, sql) in sqlite_master

_IMMUTABLE = ("entries", "heads", "tiles", "stamps", "keys", "servers")  # schema 1
_TRUST = ("key_records", "settings")

# CHECK constraints and WITHOUT ROWID: no public create_table parameter (module docstring).
_V1_TABLES_SQL = """
    CREATE TABLE entries (
        day TEXT NOT NULL,
        leaf_index INTEGER NOT NULL CHECK (leaf_index >= 0),
        leaf_hash BLOB NOT NULL CHECK (length(leaf_hash) = 32),
        claims BLOB NOT NULL,
        accepted_at INTEGER NOT NULL,
        PRIMARY KEY (day, leaf_index)
    ) STRICT;
    CREATE TABLE heads (
        day TEXT NOT NULL,
        tree_size INTEGER NOT NULL CHECK (tree_size >= 0),
        sealed INTEGER NOT NULL CHECK (sealed IN (0, 1)),
        root BLOB NOT NULL CHECK (length(root) = 32),
        iat INTEGER NOT NULL,
        kid TEXT NOT NULL,
        doc BLOB NOT NULL,
        PRIMARY KEY (day, tree_size, sealed)
    ) STRICT;
    CREATE TABLE tiles (
        day TEXT NOT NULL,
        level INTEGER NOT NULL CHECK (level >= 0),
        idx INTEGER NOT NULL CHECK (idx >= 0),
        width INTEGER NOT NULL CHECK (width BETWEEN 1 AND 256),
        hashes BLOB NOT NULL CHECK (length(hashes) = 32 * width),
        root BLOB CHECK (root IS NULL OR length(root) = 32),
        PRIMARY KEY (day, level, idx, width)
    ) STRICT;
    CREATE TABLE servers (
        key TEXT NOT NULL,
        day TEXT NOT NULL,
        leaf_index INTEGER NOT NULL,
        PRIMARY KEY (key, day, leaf_index)
    ) STRICT, WITHOUT ROWID;
"""

_V1_TRIGGERS_SQL = """
    CREATE TRIGGER entries_next_index BEFORE INSERT ON entries
    WHEN NEW.leaf_index != COALESCE(
        (SELECT max(leaf_index) FROM entries WHERE day = NEW.day), -1) + 1
    BEGIN SELECT RAISE(ABORT, 'append-only: leaf_index is not the next index of its day'); END;
    CREATE TRIGGER entries_not_sealed BEFORE INSERT ON entries
    WHEN EXISTS (SELECT 1 FROM heads WHERE day = NEW.day AND sealed = 1)
    BEGIN SELECT RAISE(ABORT, 'append-only: the day is sealed'); END;
    CREATE TRIGGER heads_not_sealed BEFORE INSERT ON heads
    WHEN EXISTS (SELECT 1 FROM heads WHERE day = NEW.day AND sealed = 1)
    BEGIN SELECT RAISE(ABORT, 'append-only: the day is sealed'); END;
    CREATE TRIGGER entries_no_replace BEFORE INSERT ON entries
    WHEN EXISTS (SELECT 1 FROM entries WHERE leaf_hash = NEW.leaf_hash AND day = NEW.day)
    BEGIN SELECT RAISE(ABORT, 'append-only: this leaf is already stored in this day'); END;
    CREATE TRIGGER heads_no_replace BEFORE INSERT ON heads
    WHEN EXISTS (SELECT 1 FROM heads WHERE day = NEW.day AND tree_size = NEW.tree_size
                 AND sealed = NEW.sealed AND doc != NEW.doc)
    BEGIN SELECT RAISE(ABORT, 'append-only: a different head of this size is stored'); END;
    CREATE TRIGGER tiles_no_replace BEFORE INSERT ON tiles
    WHEN EXISTS (SELECT 1 FROM tiles WHERE day = NEW.day AND level = NEW.level
                 AND idx = NEW.idx AND width = NEW.width
                 AND (hashes != NEW.hashes OR root IS NOT NEW.root))
    BEGIN SELECT RAISE(ABORT, 'append-only: a different tile is stored under this name'); END;
    CREATE TRIGGER stamps_no_replace BEFORE INSERT ON stamps
    WHEN EXISTS (SELECT 1 FROM stamps WHERE day = NEW.day AND tsa = NEW.tsa)
    BEGIN SELECT RAISE(ABORT, 'append-only: this TSA already stamped this day'); END;
    CREATE TRIGGER keys_no_replace BEFORE INSERT ON keys
    WHEN EXISTS (SELECT 1 FROM keys WHERE kid = NEW.kid AND jwk != NEW.jwk)
    BEGIN SELECT RAISE(ABORT, 'append-only: a different key is stored under this kid'); END;
    CREATE TRIGGER heads_same_root BEFORE INSERT ON heads
    WHEN EXISTS (SELECT 1 FROM heads
                 WHERE day = NEW.day AND tree_size = NEW.tree_size AND root != NEW.root)
    BEGIN SELECT RAISE(ABORT, 'append-only: another head of this size has another root'); END;
    """ + "".join(
    f"""
    CREATE TRIGGER {t}_no_update BEFORE UPDATE ON {t}
    BEGIN SELECT RAISE(ABORT, 'append-only: {t} cannot be updated'); END;
    CREATE TRIGGER {t}_no_delete BEFORE DELETE ON {t}
    BEGIN SELECT RAISE(ABORT, 'append-only: {t} cannot be deleted'); END;
    """
    for t in _IMMUTABLE
)

# A column-level UNIQUE: no public create_table parameter either.
_V2_KEY_RECORDS_SQL = """
    CREATE TABLE key_records (
        id INTEGER PRIMARY KEY,
        signer TEXT NOT NULL,
        kid TEXT NOT NULL,
        jws TEXT NOT NULL UNIQUE,
        added INTEGER NOT NULL
    ) STRICT;
"""

# Data, not schema: a log upgraded from schema 1 marks its settings unsigned (rows.py).
_V2_MARK_SQL = """
    INSERT INTO meta (key, value) SELECT 'settings_unsigned', 'upgrade'
    WHERE EXISTS (SELECT 1 FROM meta WHERE key = 'iss');
"""

_V2_TRIGGERS_SQL = "".join(
    f"""
    CREATE TRIGGER {t}_no_replace BEFORE INSERT ON {t}
    WHEN EXISTS (SELECT 1 FROM {t} WHERE id = NEW.id)
    BEGIN SELECT RAISE(ABORT, 'append-only: a {t} row is stored under this id'); END;
    CREATE TRIGGER {t}_no_update BEFORE UPDATE ON {t}
    BEGIN SELECT RAISE(ABORT, 'append-only: {t} cannot be updated'); END;
    CREATE TRIGGER {t}_no_delete BEFORE DELETE ON {t}
    BEGIN SELECT RAISE(ABORT, 'append-only: {t} cannot be deleted'); END;
    """
    for t in _TRUST
)


def _migration_1(db: sqlite_utils.Database, run: Callable[[str], object]) -> None:
    """meta, keys, entries (with the dedupe index), heads, tiles, servers, stamps and the
    append-only triggers, in the order 0.x created them."""
    db.create_table("meta", {"key": str, "value": str}, pk="key", not_null={"value"}, strict=True)
    db.create_table(
        "keys",
        {"kid": str, "jwk": str, "added": int},
        pk="kid",
        not_null={"jwk", "added"},
        strict=True,
    )
    tables = split_sql(_V1_TABLES_SQL)
    run(tables[0])  # entries
    db.table("entries").create_index(
        ["leaf_hash", "day"], index_name="entries_by_hash", unique=True
    )
    for statement in tables[1:]:
        run(statement)
    stamps = {"day": str, "tsa": str, "token": bytes, "gen_time": str, "added": int}
    db.create_table("stamps", stamps, pk=("day", "tsa"), not_null=set(stamps), strict=True)
    for statement in split_sql(_V1_TRIGGERS_SQL):
        run(statement)


def _migration_2(db: sqlite_utils.Database, run: Callable[[str], object]) -> None:
    """Key rotation records and signed settings statements (trust.py), append-only."""
    run(split_sql(_V2_KEY_RECORDS_SQL)[0])
    settings = {"id": int, "kid": str, "jws": str, "added": int}
    db.create_table("settings", settings, pk="id", not_null={"kid", "jws", "added"}, strict=True)
    for statement in split_sql(_V2_MARK_SQL) + split_sql(_V2_TRIGGERS_SQL):
        run(statement)


# The history tree (SPEC §12.1): a leaf per published head, in publication order, and its
# tiles as the day trees keep theirs (CHECK constraints: SQL, as above).
_V3_TABLES_SQL = """
    CREATE TABLE history (
        idx INTEGER PRIMARY KEY CHECK (idx >= 0),
        leaf_hash BLOB NOT NULL CHECK (length(leaf_hash) = 32),
        day TEXT NOT NULL,
        sealed INTEGER NOT NULL CHECK (sealed IN (0, 1)),
        tree_size INTEGER NOT NULL CHECK (tree_size >= 0)
    ) STRICT;
    CREATE TABLE history_tiles (
        level INTEGER NOT NULL CHECK (level >= 0),
        idx INTEGER NOT NULL CHECK (idx >= 0),
        width INTEGER NOT NULL CHECK (width BETWEEN 1 AND 256),
        hashes BLOB NOT NULL CHECK (length(hashes) = 32 * width),
        root BLOB CHECK (root IS NULL OR length(root) = 32),
        PRIMARY KEY (level, idx, width)
    ) STRICT;
"""

# Publication order is checked against the last leaf only: by induction every earlier one is
# smaller, and the check stays O(log n) however long the history grows.
_V3_TRIGGERS_SQL = """
    CREATE TRIGGER history_next_index BEFORE INSERT ON history
    WHEN NEW.idx != COALESCE((SELECT max(idx) FROM history), -1) + 1
    BEGIN SELECT RAISE(ABORT, 'append-only: idx is not the next index of the history'); END;
    CREATE TRIGGER history_in_order BEFORE INSERT ON history
    WHEN EXISTS (SELECT 1 FROM (SELECT day, sealed, tree_size FROM history
                                ORDER BY idx DESC LIMIT 1) AS last
                 WHERE (last.day, last.sealed, last.tree_size)
                       >= (NEW.day, NEW.sealed, NEW.tree_size))
    BEGIN SELECT RAISE(ABORT, 'append-only: a history leaf out of publication order'); END;
    CREATE TRIGGER history_of_a_head BEFORE INSERT ON history
    WHEN NOT EXISTS (SELECT 1 FROM heads WHERE day = NEW.day AND tree_size = NEW.tree_size
                     AND sealed = NEW.sealed)
    BEGIN SELECT RAISE(ABORT, 'append-only: a history leaf must be a stored head'); END;
    CREATE TRIGGER history_tiles_no_replace BEFORE INSERT ON history_tiles
    WHEN EXISTS (SELECT 1 FROM history_tiles WHERE level = NEW.level
                 AND idx = NEW.idx AND width = NEW.width
                 AND (hashes != NEW.hashes OR root IS NOT NEW.root))
    BEGIN SELECT RAISE(ABORT, 'append-only: a different tile is stored under this name'); END;
    """ + "".join(
    f"""
    CREATE TRIGGER {t}_no_update BEFORE UPDATE ON {t}
    BEGIN SELECT RAISE(ABORT, 'append-only: {t} cannot be updated'); END;
    CREATE TRIGGER {t}_no_delete BEFORE DELETE ON {t}
    BEGIN SELECT RAISE(ABORT, 'append-only: {t} cannot be deleted'); END;
    """
    for t in ("history", "history_tiles")
)


def _migration_3(db: sqlite_utils.Database, run: Callable[[str], object]) -> None:
    """The history tree, filled from the stored heads in the same transaction (a log made
    before it gets its history in one step, or not at all)."""
    tables = split_sql(_V3_TABLES_SQL)
    run(tables[0])
    history = db.table("history")
    history.create_index(["day", "sealed", "tree_size"], index_name="history_by_head", unique=True)
    history.create_index(["leaf_hash"], index_name="history_by_hash", unique=True)
    run(tables[1])
    for statement in split_sql(_V3_TRIGGERS_SQL):
        run(statement)
    try:
        _backfill_history(db.conn)
    except sqlite3.Error as exc:
        raise store_error(exc, "the history could not be built from the stored heads") from None


def _backfill_history(conn: sqlite3.Connection) -> None:
    """Every stored head as a history leaf, in SPEC §12.1's order, with the tiles the write
    path stores: full tiles as they complete and the partial tiles at every size."""
    edge = TreeEdge()
    rows = conn.execute(
        "SELECT day, tree_size, sealed, root, iat, kid, doc FROM heads "
        "ORDER BY day, sealed, tree_size"
    ).fetchall()
    for day, tree_size, sealed, root, iat, kid, doc in rows:
        head = HeadRow(day, tree_size, bool(sealed), root, iat, kid, bytes(doc))
        leaf_hash = hash_leaf(head.history_leaf())
        conn.execute(
            "INSERT INTO history (idx, leaf_hash, day, sealed, tree_size) VALUES (?, ?, ?, ?, ?)",
            (edge.size, leaf_hash, day, int(sealed), tree_size),
        )
        conn.executemany(HISTORY_TILES.insert, edge.extend_published(leaf_hash))


MIGRATIONS: tuple[Callable[[sqlite_utils.Database, Callable[[str], object]], None], ...] = (
    _migration_1,
    _migration_2,
    _migration_3,
    lambda db, run: migration_4(db, run, split_sql),
)


def migrate(conn: sqlite3.Connection, version: int, run: Callable[[str], object]) -> None:
    """Apply the migrations after `version` on `conn`, inside the caller's transaction (it
    stays open: sqlite-utils commits only when no transaction is). `run` executes one SQL
    statement with the caller's error handling."""
    db = database(conn)
    for n in range(version, SCHEMA_VERSION):
        MIGRATIONS[n](db, run)


def database(conn: sqlite3.Connection) -> sqlite_utils.Database:
    """sqlite-utils over one of our connections, changing nothing on it: the connection's
    pragmas are set where it is opened, and no plugin gets to prepare it."""
    return sqlite_utils.Database(conn, recursive_triggers=False, execute_plugins=False)


def split_sql(script: str) -> list[str]:
    """Split SQL into statements (SQLite's own parser decides where one ends, so the `;`
    inside a trigger's BEGIN ... END does not)."""
    statements: list[str] = []
    current = ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip():
        raise StoreError(f"incomplete statement in a migration: {current.strip()[:60]}")
    return statements


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


def expected_schema(version: int) -> list[SchemaRow]:
    """What the migrations up to `version` create, applied to an empty in-memory database
    (a migration added later is covered by itself)."""
    if not 0 <= version <= SCHEMA_VERSION:
        raise StoreError(f"no schema version {version}")
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        db = database(conn)
        for n in range(version):
            MIGRATIONS[n](db, conn.execute)
        return schema_rows(conn)
    finally:
        conn.close()


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
    return got[3] == want[3] or (got[3] is not None and got[3] == HISTORIC_SQL.get(got[1]))


__all__ = ["HISTORIC_SQL", "MIGRATIONS", "expected_schema", "migrate", "schema_problems"]
