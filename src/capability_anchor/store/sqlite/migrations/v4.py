"""Migration 4 (SPEC §12.2-§12.3): the history's signed checkpoints, the cosignatures, the
witness policies, the per-witness state, and an index of the heads by (day, sealed,
tree_size) (docs/explanation/store.md, "Migration notes").

Frozen as migration 1 is."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from . import split_sql

SQL = """\
CREATE TABLE checkpoints (
        size INTEGER PRIMARY KEY CHECK (size >= 1),
        note BLOB NOT NULL
    ) STRICT;

CREATE TABLE cosignatures (
        id INTEGER PRIMARY KEY,
        witness TEXT NOT NULL,
        key_id BLOB NOT NULL CHECK (length(key_id) = 4),
        size INTEGER NOT NULL CHECK (size >= 1),
        timestamp INTEGER NOT NULL CHECK (timestamp >= 0),
        line TEXT NOT NULL,
        added INTEGER NOT NULL,
        UNIQUE (size, line)
    ) STRICT;

CREATE TABLE policies (
        id INTEGER PRIMARY KEY,
        policy BLOB NOT NULL,
        added INTEGER NOT NULL
    ) STRICT;

CREATE TABLE witness_state (
        witness TEXT PRIMARY KEY,
        size INTEGER NOT NULL CHECK (size >= 0),
        status TEXT NOT NULL CHECK (status IN ('ok', 'retry', 'stopped')),
        retry_at INTEGER NOT NULL,
        failures INTEGER NOT NULL CHECK (failures >= 0),
        detail TEXT NOT NULL,
        updated INTEGER NOT NULL
    ) STRICT;

CREATE TRIGGER checkpoints_next_size BEFORE INSERT ON checkpoints
    WHEN NEW.size != COALESCE((SELECT max(size) FROM checkpoints), 0) + 1
    BEGIN SELECT RAISE(ABORT, 'append-only: a checkpoint is only ever of the next size'); END;

CREATE TRIGGER checkpoints_of_the_history BEFORE INSERT ON checkpoints
    WHEN NEW.size > COALESCE((SELECT max(idx) FROM history), -1) + 1
    BEGIN SELECT RAISE(ABORT, 'append-only: a checkpoint is of a size the history has'); END;

CREATE TRIGGER cosignatures_of_a_checkpoint BEFORE INSERT ON cosignatures
    WHEN NOT EXISTS (SELECT 1 FROM checkpoints WHERE size = NEW.size)
    BEGIN SELECT RAISE(ABORT, 'append-only: a cosignature is of a stored checkpoint'); END;

CREATE TRIGGER cosignatures_no_replace BEFORE INSERT ON cosignatures
    WHEN EXISTS (SELECT 1 FROM cosignatures
                 WHERE id = NEW.id OR (size = NEW.size AND line = NEW.line))
    BEGIN SELECT RAISE(ABORT, 'append-only: this cosignature is already stored'); END;

CREATE TRIGGER policies_no_replace BEFORE INSERT ON policies
    WHEN EXISTS (SELECT 1 FROM policies WHERE id = NEW.id)
    BEGIN SELECT RAISE(ABORT, 'append-only: a policies row is stored under this id'); END;

CREATE TRIGGER checkpoints_no_update BEFORE UPDATE ON checkpoints
    BEGIN SELECT RAISE(ABORT, 'append-only: checkpoints cannot be updated'); END;

CREATE TRIGGER checkpoints_no_delete BEFORE DELETE ON checkpoints
    BEGIN SELECT RAISE(ABORT, 'append-only: checkpoints cannot be deleted'); END;

CREATE TRIGGER cosignatures_no_update BEFORE UPDATE ON cosignatures
    BEGIN SELECT RAISE(ABORT, 'append-only: cosignatures cannot be updated'); END;

CREATE TRIGGER cosignatures_no_delete BEFORE DELETE ON cosignatures
    BEGIN SELECT RAISE(ABORT, 'append-only: cosignatures cannot be deleted'); END;

CREATE TRIGGER policies_no_update BEFORE UPDATE ON policies
    BEGIN SELECT RAISE(ABORT, 'append-only: policies cannot be updated'); END;

CREATE TRIGGER policies_no_delete BEFORE DELETE ON policies
    BEGIN SELECT RAISE(ABORT, 'append-only: policies cannot be deleted'); END;

CREATE INDEX "heads_by_kind"
    ON "heads" ("day", "sealed", "tree_size");
"""


def migration_4(conn: sqlite3.Connection, run: Callable[[str], object]) -> None:
    for statement in split_sql(SQL):
        run(statement)
