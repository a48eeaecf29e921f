"""The SQLite store: one database file in a data dir (`rows.DB_NAME`), the one implementation
of `interface.Store`. Its parts, each a mixin over `sqlite_base.SqliteBase` (connections and
transactions): `sqlite_open` (create, open and migrate, open read-only), `sqlite_rows`
(reads and writes), `sqlite_history` (the history tree's leaves and tiles; both it and
`sqlite_rows` keep tiles through `sqlite_tiles`), `sqlite_checkpoints` (checkpoints,
cosignatures, policies, witness state), `sqlite_audit` (SQLite's structures, for
the audit); `sqlite_schema` holds the migrations and `sqlite_errors` maps SQLite's errors
to the project's.

Tiles are stored when they become full (width 256, with their root, the hash one tile level
up) and, at every published head's size, the partial tiles of that size. Any tree size up
to a published head can therefore be proven from stored tiles alone; the right edge of an
unpublished tree is rebuilt from the last entries and the roots of the last full tiles.
"""

from __future__ import annotations

from capability_anchor.store.interface import Store

from .audit import SqliteAudit
from .checkpoints import SqliteCheckpoints
from .history import SqliteHistory
from .open import SqliteOpening
from .rows import SqliteEntries, SqliteHeads


class SqliteStore(
    SqliteOpening, SqliteEntries, SqliteHeads, SqliteHistory, SqliteCheckpoints, SqliteAudit
):
    """One SQLite database in a data dir (see `sqlite_base.SqliteBase` for the connections)."""


__all__ = ["SqliteStore"]

# Checked by mypy: only a class with no abstract method left may be assigned here.
_IMPLEMENTS: type[Store] = SqliteStore
