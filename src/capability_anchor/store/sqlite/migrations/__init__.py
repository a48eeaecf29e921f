"""The SQLite schema's migrations, one module per version, each its DDL frozen as literal SQL
(`vN.SQL`): migration n brings `user_version` from n-1 to n. Never change what a shipped
migration creates: add one. A migration may import `errors`, the kernel, the store's rows
and its own engine's modules."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from capability_anchor.errors import StoreError

Migration = Callable[[sqlite3.Connection, Callable[[str], object]], None]
"""(connection, run one statement with the caller's error handling), inside the caller's
transaction."""


def split_sql(script: str) -> list[str]:
    """Split SQL into statements (SQLite's own parser decides where one ends, so the `;`
    inside a trigger's BEGIN ... END does not)."""
    statements: list[str] = []
    current = ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip():
        raise StoreError(f"incomplete statement in a migration: {current.strip()[:60]}")
    return statements


def migrations() -> tuple[Migration, ...]:
    from .v1 import migration_1
    from .v2 import migration_2
    from .v3 import migration_3
    from .v4 import migration_4
    from .v5 import migration_5

    return (migration_1, migration_2, migration_3, migration_4, migration_5)


__all__ = ["Migration", "migrations", "split_sql"]
