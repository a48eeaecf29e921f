"""The SQLite engine: one database file in a data dir, reached through `store.open`; the only
package that imports `sqlite3` or `sqlite_utils`. Its parts over `base.SqliteBase`: `engine`
(opening), `reads`, `audit`, `schema` and `migrations/`, `errors`, `scrub`, `wal`, and `witness`
(the witness's own database)."""

from __future__ import annotations

from capability_anchor.store.interface import Store

from .audit import SqliteAudit
from .base import DB_NAME
from .reads import SqliteReads


class SqliteStore(SqliteReads, SqliteAudit):
    """One SQLite database in a data dir (`base.SqliteBase` holds the connections)."""


__all__ = ["DB_NAME", "SqliteStore"]

# Checked by mypy: only a class with no abstract method left may be assigned here.
_IMPLEMENTS: type[Store] = SqliteStore
