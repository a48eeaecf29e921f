"""The SQLite engine: one database file in a data dir (`base.DB_NAME`), an implementation of
`interface.Store`, reached only through `store.open` (`engine.SqliteEngine` is the registry's
`sqlite` entry). This package is the only one in the project that imports `sqlite3` or
`sqlite_utils` (tests/integration/test_layering.py); it may import the rest of `store/` and
the kernel, and nothing outside `store/` imports it.

Its parts, each a mixin over `base.SqliteBase` (connections and transactions): `open`
(create, open and migrate, open read-only), `rows` (reads and writes), `history` (the
history tree's leaves and tiles; both it and `rows` keep tiles through `tiles`),
`checkpoints` (checkpoints, cosignatures, policies, witness state), `audit` (SQLite's
structures, for the audit's `engine_findings`); `schema` and `migrations/` hold the
migrations, `errors` maps SQLite's errors to the project's, `scrub` is the background
damage check and `witness` the witness's own database.

Tiles are stored when they become full (width 256, with their root, the hash one tile level
up) and, at every published head's size, the partial tiles of that size. Any tree size up
to a published head can therefore be proven from stored tiles alone; the right edge of an
unpublished tree is rebuilt from the last entries and the roots of the last full tiles.
"""

from __future__ import annotations

from capability_anchor.store.interface import Store

from .audit import SqliteAudit
from .base import DB_NAME
from .checkpoints import SqliteCheckpoints
from .history import SqliteHistory
from .open import SqliteOpening
from .rows import SqliteEntries, SqliteHeads


class SqliteStore(
    SqliteOpening, SqliteEntries, SqliteHeads, SqliteHistory, SqliteCheckpoints, SqliteAudit
):
    """One SQLite database in a data dir (`base.SqliteBase` holds the connections)."""


__all__ = ["DB_NAME", "SqliteStore"]

# Checked by mypy: only a class with no abstract method left may be assigned here.
_IMPLEMENTS: type[Store] = SqliteStore
