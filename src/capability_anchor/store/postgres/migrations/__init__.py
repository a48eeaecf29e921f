"""The PostgreSQL schema's migrations, each its DDL frozen as literal SQL (`vN.SQL`), applied
in order, each in its own transaction with the row that records it in `schema_migrations`.
Never change what a shipped migration creates: add one. They import nothing but each other.
"""

from __future__ import annotations

from . import v1, v3

# v3 is the third migration: v2 comes from a branch of its own (the search_path fixes).
MIGRATIONS: tuple[str, ...] = (v1.SQL, v3.SQL)
"""Migration n (1-based) is MIGRATIONS[n - 1]."""

__all__ = ["MIGRATIONS"]
