"""The PostgreSQL schema's migrations, each its DDL frozen as literal SQL (`vN.SQL`), applied
in order, each in its own transaction with the row that records it in `schema_migrations`.
Never change what a shipped migration creates: add one. They import nothing but each other.
"""

from __future__ import annotations

from . import v1, v2, v3

MIGRATIONS: tuple[str, ...] = (v1.SQL, v2.SQL, v3.SQL)
"""Migration n (1-based) is MIGRATIONS[n - 1]."""

__all__ = ["MIGRATIONS"]
