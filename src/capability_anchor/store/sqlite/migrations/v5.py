"""Migration 5 (issue #23): fewer bytes per record, converting a schema 4 log in place, in
the migration's one transaction: the 6-byte prefix dedupe index, the `/record` index by
key digest (docs/explanation/store.md, "Migration notes").

Frozen as migration 1 is: never edit it, add a migration."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from capability_anchor.store.rows import server_key_digest

from . import split_sql

SQL = """\
DROP TRIGGER entries_no_replace;

DROP INDEX entries_by_hash;

CREATE INDEX "entries_by_hash"
    ON "entries" (substr("leaf_hash", 1, 6));

CREATE TRIGGER entries_no_replace BEFORE INSERT ON entries
    WHEN EXISTS (SELECT 1 FROM entries
                 WHERE substr(leaf_hash, 1, 6) = substr(NEW.leaf_hash, 1, 6)
                 AND leaf_hash = NEW.leaf_hash AND day = NEW.day)
    BEGIN SELECT RAISE(ABORT, 'append-only: this leaf is already stored in this day'); END;

CREATE TABLE servers_v5 (
        key TEXT NOT NULL CHECK (length(key) = 12),
        day TEXT NOT NULL,
        leaf_index INTEGER NOT NULL,
        PRIMARY KEY (key, day, leaf_index)
    ) STRICT, WITHOUT ROWID;

INSERT INTO servers_v5 (key, day, leaf_index)
    SELECT CASE WHEN substr(key, 1, 4) IN ('sub:', 'url:') THEN ca_server_key_digest(key)
           ELSE key END, day, leaf_index
    FROM servers ORDER BY key, day, leaf_index;

DROP TABLE servers;

ALTER TABLE servers_v5 RENAME TO servers;

CREATE TRIGGER servers_no_update BEFORE UPDATE ON servers
    BEGIN SELECT RAISE(ABORT, 'append-only: servers cannot be updated'); END;

CREATE TRIGGER servers_no_delete BEFORE DELETE ON servers
    BEGIN SELECT RAISE(ABORT, 'append-only: servers cannot be deleted'); END;
"""


def migration_5(conn: sqlite3.Connection, run: Callable[[str], object]) -> None:
    # The digest as the store writes it, for the rows the INSERT converts.
    conn.create_function("ca_server_key_digest", 1, server_key_digest, deterministic=True)
    for statement in split_sql(SQL):
        run(statement)
