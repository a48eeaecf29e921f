"""Migration 4 (SPEC §12.2-§12.3): the signed checkpoints of the history, the witnesses'
cosignatures, the witness policies and the submitter's per-witness state; and an index of
the heads by (day, sealed, tree_size).

Checkpoints are signed by the log's key, which the store never holds: a log migrated to
this version gets its missing checkpoints from the first writer that opens it
(`log.history.catch_up`), in one write transaction, before any new head is published.
CHECK constraints and triggers keep this SQL, as in `sqlite_schema`; the index is sqlite-utils'.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlite_utils

_V4_TABLES_SQL = """
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
"""

# A checkpoint is only ever the next size, and only of a size the history has: so the
# stored checkpoints are always 1..n with n at most the history's size. `INSERT OR REPLACE`
# would delete without firing a delete trigger, hence the no-replace triggers.
_V4_TRIGGERS_SQL = """
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
    """ + "".join(
    f"""
    CREATE TRIGGER {t}_no_update BEFORE UPDATE ON {t}
    BEGIN SELECT RAISE(ABORT, 'append-only: {t} cannot be updated'); END;
    CREATE TRIGGER {t}_no_delete BEFORE DELETE ON {t}
    BEGIN SELECT RAISE(ABORT, 'append-only: {t} cannot be deleted'); END;
    """
    for t in ("checkpoints", "cosignatures", "policies")
)


def migration_4(
    db: sqlite_utils.Database,
    run: Callable[[str], object],
    split_sql: Callable[[str], list[str]],
) -> None:
    """The checkpoint, cosignature, policy and witness-state tables and their triggers."""
    for statement in split_sql(_V4_TABLES_SQL) + split_sql(_V4_TRIGGERS_SQL):
        run(statement)
    # A day's sealed head, and its newest unsealed one, without scanning the day's heads:
    # the primary key (day, tree_size, sealed) orders sealed last. Every head's publication
    # asks for both (the history's order), and a day can hold a head per write.
    db.table("heads").create_index(["day", "sealed", "tree_size"], index_name="heads_by_kind")
