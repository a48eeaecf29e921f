"""The SQLite schema's migrations, one module per version, each its DDL frozen as literal SQL
(`vN.SQL`): migration n brings `user_version` from n-1 to n (`schema.MIGRATIONS`). Never
change what a shipped migration creates: add one. A migration may import `errors`, the
kernel, the store's rows and its own engine's modules."""

from __future__ import annotations

import sqlite3

from capability_anchor.errors import StoreError


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


__all__ = ["split_sql"]
