"""Migration 2: key rotation records and signed settings statements (`keys.trust`),
append-only. Frozen as migration 1 is (its docstring)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from . import split_sql

TABLES_SQL = """\
CREATE TABLE key_records (
        id INTEGER PRIMARY KEY,
        signer TEXT NOT NULL,
        kid TEXT NOT NULL,
        jws TEXT NOT NULL UNIQUE,
        added INTEGER NOT NULL
    ) STRICT;

CREATE TABLE "settings" (
   "id" INTEGER PRIMARY KEY,
   "kid" TEXT NOT NULL,
   "jws" TEXT NOT NULL,
   "added" INTEGER NOT NULL
) STRICT;
"""

TRIGGERS_SQL = """\
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

# Data, not schema: a log upgraded from schema 1 marks its settings unsigned (rows.py).
MARK_SQL = """\
INSERT INTO meta (key, value) SELECT 'settings_unsigned', 'upgrade'
WHERE EXISTS (SELECT 1 FROM meta WHERE key = 'iss');
"""


def migration_2(conn: sqlite3.Connection, run: Callable[[str], object]) -> None:
    for statement in split_sql(TABLES_SQL) + split_sql(MARK_SQL) + split_sql(TRIGGERS_SQL):
        run(statement)
