"""The SQLite schema's migrations, one module per version, each its DDL frozen as literal SQL
(`vN.SQL`): migration n brings `user_version` from n-1 to n. Never change what a shipped
migration creates: add one. A migration may import `errors`, the kernel, the store's rows
and its own engine's modules."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from .statements import split_sql
from .v1 import migration_1
from .v2 import migration_2
from .v3 import migration_3
from .v4 import migration_4
from .v5 import migration_5

# Each: (connection, run one statement with the caller's error handling), inside the caller's
# transaction.
Migration = Callable[[sqlite3.Connection, Callable[[str], object]], None]
MIGRATIONS: tuple[Migration, ...] = (
    migration_1,
    migration_2,
    migration_3,
    migration_4,
    migration_5,
)

__all__ = ["MIGRATIONS", "Migration", "split_sql"]
