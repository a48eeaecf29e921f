"""Migration 1: meta, keys, entries (with the dedupe index), heads, tiles, servers, stamps and
the append-only triggers, in the order capability-anchor 0.x created them.

Frozen: the text below is what every log holds, byte for byte (and what the audit expects,
`schema.expected_schema`). Never edit it: add a migration."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from . import split_sql

SQL = """\
CREATE TABLE "meta" (
   "key" TEXT PRIMARY KEY,
   "value" TEXT NOT NULL
) STRICT;

CREATE TABLE "keys" (
   "kid" TEXT PRIMARY KEY,
   "jwk" TEXT NOT NULL,
   "added" INTEGER NOT NULL
) STRICT;

CREATE TABLE entries (
        day TEXT NOT NULL,
        leaf_index INTEGER NOT NULL CHECK (leaf_index >= 0),
        leaf_hash BLOB NOT NULL CHECK (length(leaf_hash) = 32),
        claims BLOB NOT NULL,
        accepted_at INTEGER NOT NULL,
        PRIMARY KEY (day, leaf_index)
    ) STRICT;

CREATE UNIQUE INDEX "entries_by_hash"
    ON "entries" ("leaf_hash", "day");

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

CREATE TABLE "stamps" (
   "day" TEXT NOT NULL,
   "tsa" TEXT NOT NULL,
   "token" BLOB NOT NULL,
   "gen_time" TEXT NOT NULL,
   "added" INTEGER NOT NULL,
   PRIMARY KEY ("day", "tsa")
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


def migration_1(conn: sqlite3.Connection, run: Callable[[str], object]) -> None:
    for statement in split_sql(SQL):
        run(statement)
