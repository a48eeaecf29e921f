"""Migration 3: the history tree (SPEC §12.1), a leaf per published head in publication
order and its tiles as the day trees keep theirs, filled from the stored heads in the same
transaction (a log made before it gets its history in one step, or not at all). Publication
order is checked against the last leaf only: by induction every earlier one is smaller, and
the check stays O(log n) however long the history grows. Frozen as migration 1 is."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from capability_anchor.merkle import TreeEdge, hash_leaf
from capability_anchor.store.rows import HeadRow

from ..base import store_error
from . import split_sql

SQL = """\
CREATE TABLE history (
        idx INTEGER PRIMARY KEY CHECK (idx >= 0),
        leaf_hash BLOB NOT NULL CHECK (length(leaf_hash) = 32),
        day TEXT NOT NULL,
        sealed INTEGER NOT NULL CHECK (sealed IN (0, 1)),
        tree_size INTEGER NOT NULL CHECK (tree_size >= 0)
    ) STRICT;

CREATE UNIQUE INDEX "history_by_head"
    ON "history" ("day", "sealed", "tree_size");

CREATE UNIQUE INDEX "history_by_hash"
    ON "history" ("leaf_hash");

CREATE TABLE history_tiles (
        level INTEGER NOT NULL CHECK (level >= 0),
        idx INTEGER NOT NULL CHECK (idx >= 0),
        width INTEGER NOT NULL CHECK (width BETWEEN 1 AND 256),
        hashes BLOB NOT NULL CHECK (length(hashes) = 32 * width),
        root BLOB CHECK (root IS NULL OR length(root) = 32),
        PRIMARY KEY (level, idx, width)
    ) STRICT;

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

CREATE TRIGGER history_no_update BEFORE UPDATE ON history
    BEGIN SELECT RAISE(ABORT, 'append-only: history cannot be updated'); END;

CREATE TRIGGER history_no_delete BEFORE DELETE ON history
    BEGIN SELECT RAISE(ABORT, 'append-only: history cannot be deleted'); END;

CREATE TRIGGER history_tiles_no_update BEFORE UPDATE ON history_tiles
    BEGIN SELECT RAISE(ABORT, 'append-only: history_tiles cannot be updated'); END;

CREATE TRIGGER history_tiles_no_delete BEFORE DELETE ON history_tiles
    BEGIN SELECT RAISE(ABORT, 'append-only: history_tiles cannot be deleted'); END;
"""


def migration_3(conn: sqlite3.Connection, run: Callable[[str], object]) -> None:
    for statement in split_sql(SQL):
        run(statement)
    try:
        _backfill_history(conn)
    except sqlite3.Error as exc:
        raise store_error(exc, "the history could not be built from the stored heads") from None


# As the write path inserts a history tile (`store.sql.rows`).
_INSERT_TILE = (
    "INSERT INTO history_tiles (level, idx, width, hashes, root) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT DO NOTHING"
)


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
        conn.executemany(_INSERT_TILE, edge.extend_published(leaf_hash))
