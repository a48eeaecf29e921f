"""Data dirs made by capability-anchor 0.x (the schema as hand-written SQL) and data dirs made
now (tables and the dedupe index through sqlite-utils) open, migrate and audit clean alike,
and the audit still names every dropped, changed or added column, index and trigger of a 0.x
data dir. Real files, the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from capability_anchor.log import Log
from capability_anchor.store import SCHEMA_VERSION
from capability_anchor.store.sqlite import DB_NAME
from capability_anchor.store.sqlite.schema import (
    HISTORIC_SQL,
    MIGRATIONS,
    expected_schema,
)
from tests.kit.logkit import DAY1, DAY5, Clock, History, at, build_history, record, run_cli

# The v1 schema as capability-anchor 0.x wrote it: its migration 1, verbatim (the f-string
# loop over the immutable tables expanded).
SCHEMA_V1_AS_0X_WROTE_IT = """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
    CREATE TABLE keys (kid TEXT PRIMARY KEY, jwk TEXT NOT NULL, added INTEGER NOT NULL) STRICT;
    CREATE TABLE entries (
        day TEXT NOT NULL,
        leaf_index INTEGER NOT NULL CHECK (leaf_index >= 0),
        leaf_hash BLOB NOT NULL CHECK (length(leaf_hash) = 32),
        claims BLOB NOT NULL,
        accepted_at INTEGER NOT NULL,
        PRIMARY KEY (day, leaf_index)
    ) STRICT;
    CREATE UNIQUE INDEX entries_by_hash ON entries (leaf_hash, day);
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
    CREATE TABLE stamps (
        day TEXT NOT NULL,
        tsa TEXT NOT NULL,
        token BLOB NOT NULL,
        gen_time TEXT NOT NULL,
        added INTEGER NOT NULL,
        PRIMARY KEY (day, tsa)
    ) STRICT;
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

    CREATE TRIGGER entries_no_update BEFORE UPDATE ON entries
    BEGIN SELECT RAISE(ABORT, 'append-only: entries cannot be updated'); END;
    CREATE TRIGGER entries_no_delete BEFORE DELETE ON entries
    BEGIN SELECT RAISE(ABORT, 'append-only: entries cannot be deleted'); END;

    CREATE TRIGGER heads_no_update BEFORE UPDATE ON heads
    BEGIN SELECT RAISE(ABORT, 'append-only: heads cannot be updated'); END;
    CREATE TRIGGER heads_no_delete BEFORE DELETE ON heads
    BEGIN SELECT RAISE(ABORT, 'append-only: heads cannot be deleted'); END;

    CREATE TRIGGER tiles_no_update BEFORE UPDATE ON tiles
    BEGIN SELECT RAISE(ABORT, 'append-only: tiles cannot be updated'); END;
    CREATE TRIGGER tiles_no_delete BEFORE DELETE ON tiles
    BEGIN SELECT RAISE(ABORT, 'append-only: tiles cannot be deleted'); END;

    CREATE TRIGGER stamps_no_update BEFORE UPDATE ON stamps
    BEGIN SELECT RAISE(ABORT, 'append-only: stamps cannot be updated'); END;
    CREATE TRIGGER stamps_no_delete BEFORE DELETE ON stamps
    BEGIN SELECT RAISE(ABORT, 'append-only: stamps cannot be deleted'); END;

    CREATE TRIGGER keys_no_update BEFORE UPDATE ON keys
    BEGIN SELECT RAISE(ABORT, 'append-only: keys cannot be updated'); END;
    CREATE TRIGGER keys_no_delete BEFORE DELETE ON keys
    BEGIN SELECT RAISE(ABORT, 'append-only: keys cannot be deleted'); END;

    CREATE TRIGGER servers_no_update BEFORE UPDATE ON servers
    BEGIN SELECT RAISE(ABORT, 'append-only: servers cannot be updated'); END;
    CREATE TRIGGER servers_no_delete BEFORE DELETE ON servers
    BEGIN SELECT RAISE(ABORT, 'append-only: servers cannot be deleted'); END;
    """

# Its migration 2, verbatim: with migration 1, the v2 schema as capability-anchor 0.x wrote it.
SCHEMA_V2_MIGRATION_AS_0X_WROTE_IT = """
    CREATE TABLE key_records (
        id INTEGER PRIMARY KEY,
        signer TEXT NOT NULL,
        kid TEXT NOT NULL,
        jws TEXT NOT NULL UNIQUE,
        added INTEGER NOT NULL
    ) STRICT;
    CREATE TABLE settings (
        id INTEGER PRIMARY KEY,
        kid TEXT NOT NULL,
        jws TEXT NOT NULL,
        added INTEGER NOT NULL
    ) STRICT;
    INSERT INTO meta (key, value) SELECT 'settings_unsigned', 'upgrade'
    WHERE EXISTS (SELECT 1 FROM meta WHERE key = 'iss');

    CREATE TRIGGER key_records_no_replace BEFORE INSERT ON key_records
    WHEN EXISTS (SELECT 1 FROM key_records WHERE id = NEW.id)
    BEGIN SELECT RAISE(ABORT, 'append-only: a key_records row is stored under this id'); END;
    CREATE TRIGGER key_records_no_update BEFORE UPDATE ON key_records
    BEGIN SELECT RAISE(ABORT, 'append-only: key_records cannot be updated'); END;
    CREATE TRIGGER key_records_no_delete BEFORE DELETE ON key_records
    BEGIN SELECT RAISE(ABORT, 'append-only: key_records cannot be deleted'); END;

    CREATE TRIGGER settings_no_replace BEFORE INSERT ON settings
    WHEN EXISTS (SELECT 1 FROM settings WHERE id = NEW.id)
    BEGIN SELECT RAISE(ABORT, 'append-only: a settings row is stored under this id'); END;
    CREATE TRIGGER settings_no_update BEFORE UPDATE ON settings
    BEGIN SELECT RAISE(ABORT, 'append-only: settings cannot be updated'); END;
    CREATE TRIGGER settings_no_delete BEFORE DELETE ON settings
    BEGIN SELECT RAISE(ABORT, 'append-only: settings cannot be deleted'); END;
    """
SCHEMA_V2_AS_0X_WROTE_IT = SCHEMA_V1_AS_0X_WROTE_IT + SCHEMA_V2_MIGRATION_AS_0X_WROTE_IT

V1_TABLES = ("meta", "keys", "entries", "heads", "tiles", "servers", "stamps")
V2_TABLES = ("key_records", "settings")
# Rows are copied in the order they were stored, so every append-only trigger lets them in
# (entries before the heads that seal their day).
ORDER = {"entries": "day, leaf_index", "servers": "key, day, leaf_index", "heads": "rowid"}


def audit(data: Path) -> dict[str, Any]:
    result = run_cli("audit", "--data", data)
    assert "Traceback" not in result.stderr, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    report["returncode"] = result.returncode
    return report


def _without_database(source: Path, dest: Path) -> Path:
    """A copy of the data dir `source` at `dest` whose database is a new empty file (0600)."""
    shutil.copytree(source, dest)
    for name in (DB_NAME, DB_NAME + "-wal", DB_NAME + "-shm"):
        (dest / name).unlink(missing_ok=True)
    db = dest / DB_NAME
    os.close(os.open(db, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    return db


def _copy_rows(conn: sqlite3.Connection, tables: Iterable[str]) -> None:
    """Every row of each table of the attached `made_now`, in its stored order."""
    for table in tables:
        order = ORDER.get(table, "rowid")
        conn.execute(f"INSERT INTO main.{table} SELECT * FROM made_now.{table} ORDER BY {order}")


def as_0x_wrote_it(source: Path, dest: Path, version: int = 2) -> Path:
    """A copy of the data dir `source` whose database has the schema (`version`, 1 or 2)
    exactly as capability-anchor 0.x created it, holding every row of `source` in its tables
    (so a history, which 0.x did not have, only by migration 3)."""
    db = _without_database(source, dest)
    script = SCHEMA_V2_AS_0X_WROTE_IT if version == 2 else SCHEMA_V1_AS_0X_WROTE_IT
    tables = V1_TABLES + (V2_TABLES if version == 2 else ())
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.executescript(script)
        conn.execute("ATTACH DATABASE ? AS made_now", (str(source / DB_NAME),))
        conn.execute("BEGIN")
        _copy_rows(conn, tables)
        conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("COMMIT")
        conn.execute("DETACH DATABASE made_now")
    finally:
        conn.close()
    return dest


def sql(data: Path, *statements: str) -> None:
    conn = sqlite3.connect(data / DB_NAME, isolation_level=None)
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


def schema_text(data: Path) -> dict[str, str | None]:
    conn = sqlite3.connect(data / DB_NAME)
    try:
        return dict(conn.execute("SELECT name, sql FROM sqlite_master"))
    finally:
        conn.close()


@pytest.fixture(scope="module")
def made_now(tmp_path_factory: pytest.TempPathFactory) -> History:
    return build_history(tmp_path_factory.mktemp("now"))


@pytest.fixture(scope="module")
def made_by_0x(made_now: History, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A schema 2 data dir as 0.x wrote it, opened once by this program: migrated to the
    current schema (the history built from its heads), its older objects keeping 0.x's text."""
    data = as_0x_wrote_it(made_now.data, tmp_path_factory.mktemp("0x") / "data")
    Log.open(data).close()
    return data


def test_the_fixture_is_what_0x_wrote(made_by_0x: Path) -> None:
    """The 0.x data dir really has 0.x's text, which is not sqlite-utils' for the objects
    sqlite-utils now creates, and is the text the audit keeps for them."""
    old = schema_text(made_by_0x)
    new = {row[1]: row[3] for row in expected_schema(SCHEMA_VERSION)}
    assert old.keys() == new.keys()
    differ = {name for name in old if old[name] != new[name]}
    assert set(HISTORIC_SQL) == {"meta", "keys", "stamps", "settings", "entries_by_hash"}
    # Migration 5 made entries_by_hash anew: 0.x's text of it is gone with it.
    assert differ == set(HISTORIC_SQL) - {"entries_by_hash"}
    assert {name: old[name] for name in differ} == {n: HISTORIC_SQL[n] for n in differ}


def test_both_writers_make_the_same_structure(made_now: History, made_by_0x: Path) -> None:
    """What SQLite makes of either text is the same: columns (type, NOT NULL, default, key),
    STRICT and WITHOUT ROWID, and every index's columns, order, collation and uniqueness."""

    def structure(data: Path) -> dict[str, object]:
        conn = sqlite3.connect(data / DB_NAME)
        try:
            found: dict[str, object] = {}
            for name, strict, wr in conn.execute(
                "SELECT name, strict, wr FROM pragma_table_list WHERE schema = 'main'"
            ):
                columns = conn.execute(f"PRAGMA table_xinfo({name})").fetchall()
                indexes = conn.execute(f"PRAGMA index_list({name})").fetchall()
                found[name] = (strict, wr, columns, indexes)
                for index in indexes:
                    found[index[1]] = conn.execute(f"PRAGMA index_xinfo({index[1]})").fetchall()
            return found
        finally:
            conn.close()

    assert structure(made_now.data) == structure(made_by_0x)


def test_a_0x_data_dir_audits_clean(made_now: History, made_by_0x: Path) -> None:
    now, old = audit(made_now.data), audit(made_by_0x)
    assert (old["returncode"], old["problems"]) == (0, [])
    assert old["checked"] == now["checked"]
    # schema 3: 2 tables, 3 indexes, 8 triggers; schema 4: 4 tables, 3 indexes, 11 triggers
    assert old["checked"]["schema_objects"] == 44 + 13 + 18


def test_a_0x_data_dir_opens_takes_appends_and_still_audits_clean(
    made_by_0x: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    shutil.copytree(made_by_0x, data)
    before = schema_text(data)
    with Log.open(data, clock=Clock(at(DAY5, 3600))) as log:
        assert [r.leaf_index for r in log.append([record(DAY5, n) for n in range(3)])] == [0, 1, 2]
        assert log.checkpoint() is not None
    assert schema_text(data) == before  # nothing to migrate, nothing rewritten
    report = audit(data)
    assert (report["returncode"], report["problems"]) == (0, [])
    assert report["checked"]["entries"] == 325 + 3


def test_a_0x_schema_1_data_dir_is_migrated_now_and_audits_clean(
    made_now: History, tmp_path: Path
) -> None:
    """Migration 2 runs now (sqlite-utils writes `settings`) on a database whose schema 1
    objects keep 0.x's text: the audit accepts each object in either writer's text."""
    data = as_0x_wrote_it(made_now.data, tmp_path / "data", version=1)
    with Log.open(data) as log:
        ((_, kid, _),) = log.store.settings_statements()
        assert kid == log.key.kid
    text = schema_text(data)
    assert text["meta"] == HISTORIC_SQL["meta"]
    assert text["settings"] == {row[1]: row[3] for row in expected_schema(2)}["settings"]
    report = audit(data)
    assert (report["returncode"], report["problems"]) == (0, [])


def _edit_schema(data: Path, name: str, old: str, new: str) -> None:
    """Change an object's stored SQL text in place, as an attacker with the file can."""
    conn = sqlite3.connect(data / DB_NAME, isolation_level=None)
    try:
        conn.execute("PRAGMA writable_schema = ON")
        (text,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()
        assert old in text
        conn.execute(
            "UPDATE sqlite_master SET sql = ? WHERE name = ?", (text.replace(old, new), name)
        )
    finally:
        conn.close()


TAMPERING = [
    pytest.param(
        lambda data: sql(data, "ALTER TABLE meta ADD COLUMN note TEXT"),
        ["schema: table meta differs from its definition in schema version 5"],
        id="column_added",
    ),
    pytest.param(
        lambda data: sql(data, "ALTER TABLE keys DROP COLUMN added"),
        ["schema: table keys differs from its definition in schema version 5"],
        id="column_dropped",
    ),
    pytest.param(
        lambda data: _edit_schema(data, "meta", "value TEXT NOT NULL", "value TEXT"),
        ["schema: table meta differs from its definition in schema version 5"],
        id="column_not_null_removed",
    ),
    pytest.param(
        lambda data: sql(
            data,
            "DROP INDEX entries_by_hash",
            "CREATE INDEX entries_by_hash ON entries (leaf_hash, day)",
        ),
        ["schema: index entries_by_hash differs from its definition in schema version 5"],
        id="index_no_longer_unique",
    ),
    pytest.param(
        lambda data: sql(data, "DROP INDEX entries_by_hash"),
        ["schema: index entries_by_hash is missing (schema version 5)"],
        id="index_dropped",
    ),
    pytest.param(
        lambda data: sql(data, "DROP INDEX entries_by_hash", HISTORIC_SQL["entries_by_hash"]),
        ["schema: index entries_by_hash differs from its definition in schema version 5"],
        id="index_back_as_0x_wrote_it",
    ),
    pytest.param(
        lambda data: sql(data, "CREATE INDEX stamps_by_tsa ON stamps (tsa)"),
        ["schema: index stamps_by_tsa on stamps is not part of schema version 5"],
        id="index_added",
    ),
    pytest.param(
        lambda data: sql(data, "DROP TRIGGER settings_no_delete"),
        ["schema: trigger settings_no_delete is missing (schema version 5)"],
        id="trigger_dropped",
    ),
    pytest.param(
        lambda data: _edit_schema(data, "keys_no_replace", "jwk != NEW.jwk", "0"),
        ["schema: trigger keys_no_replace differs from its definition in schema version 5"],
        id="trigger_defused",
    ),
    pytest.param(
        lambda data: sql(
            data,
            "CREATE TRIGGER meta_log AFTER INSERT ON meta BEGIN SELECT 1; END",
        ),
        ["schema: trigger meta_log on meta is not part of schema version 5"],
        id="trigger_added",
    ),
]


@pytest.mark.parametrize(("tamper", "expected"), TAMPERING)
def test_a_changed_0x_schema_is_named(
    made_by_0x: Path, tmp_path: Path, tamper: Any, expected: list[str]
) -> None:
    data = tmp_path / "data"
    shutil.copytree(made_by_0x, data)
    tamper(data)
    report = audit(data)
    assert report["returncode"] == 1
    assert report["problems"] == expected


# --- a data dir made by each earlier schema version (issue #21, item 7) -------------------

# Tables in an order every append-only trigger accepts their rows in: entries before the
# heads that seal their day, heads before their history leaves, those before checkpoints,
# checkpoints before cosignatures. A table a later migration adds goes last, by name.
COPY_ORDER = (
    "meta",
    "keys",
    "entries",
    "servers",
    "stamps",
    "heads",
    "tiles",
    "key_records",
    "settings",
    "history",
    "history_tiles",
    "checkpoints",
    "policies",
    "cosignatures",
    "witness_state",
)
# meta keys that schema 4's features write (an older log never had them).
META_SINCE_V4 = ("history_origin", "policies_signed")


def made_by_version(source: Path, dest: Path, version: int) -> Path:
    """A copy of the data dir `source` whose database is what schema `version` was: the
    migrations up to it (this program's, which never change once shipped), every row of
    `source` in the tables that version has, and its `user_version`."""
    db = _without_database(source, dest)
    tables = [row[1] for row in expected_schema(version) if row[0] == "table"]
    ordered = sorted(
        tables, key=lambda t: (COPY_ORDER.index(t) if t in COPY_ORDER else len(COPY_ORDER), t)
    )
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("BEGIN")
        for n in range(version):
            MIGRATIONS[n](conn, conn.execute)
        conn.execute("ATTACH DATABASE ? AS made_now", (str(source / DB_NAME),))
        _copy_rows(conn, ordered)
        if version < 4:
            marks = ", ".join("?" for _ in META_SINCE_V4)
            conn.execute(f"DELETE FROM main.meta WHERE key IN ({marks})", META_SINCE_V4)
        conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("COMMIT")
        conn.execute("DETACH DATABASE made_now")
    finally:
        conn.close()
    return dest


@pytest.fixture(scope="module")
def witnessed_now(made_now: History, tmp_path_factory: pytest.TempPathFactory) -> History:
    """The module's history with a witness policy stored (and signed: `policytrust`)."""
    history = made_now.copy(tmp_path_factory.mktemp("witnessed") / "data")
    with history.open() as log:
        log.set_policy(b"quorum none\n")
    return history


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION))
def test_a_data_dir_of_each_earlier_schema_opens_migrates_and_audits_clean(
    witnessed_now: History, tmp_path: Path, version: int
) -> None:
    data = made_by_version(witnessed_now.data, tmp_path / "data", version)
    before = audit(data)  # read-only: it sees the old version and says so
    assert before["returncode"] == 1
    assert f"schema version {version}: this program creates and audits" in str(before)
    # The first open through the real CLI migrates it (`proof` only reads the log).
    done = run_cli("proof", "--data", data, "--day", DAY1, "--index", "0")
    assert done.returncode == 0, done.stderr
    conn = sqlite3.connect(data / DB_NAME)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        conn.close()
    report = audit(data)
    assert (report["returncode"], report["problems"]) == (0, [])
    assert report["checked"]["entries"] == 325
    assert report["checked"]["history_checkpoints"] >= 1
    # It takes writes as a log made now does, and still audits clean.
    with Log.open(data, clock=Clock(at(DAY5, 3600))) as log:
        assert [r.leaf_index for r in log.append([record(DAY5, n) for n in range(3)])] == [0, 1, 2]
        assert log.checkpoint() is not None
    report = audit(data)
    assert (report["returncode"], report["problems"]) == (0, [])
    assert report["checked"]["entries"] == 325 + 3
