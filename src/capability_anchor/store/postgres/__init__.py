"""The PostgreSQL engine (issue #24, SPEC §13.5): one log per database, reached by a
`postgresql://` URL through `store.open` (`engine.PostgresEngine`); the only package that
imports psycopg. Its parts over `base.PostgresBase` (the pool, transactions, the write
lock): `reads` (its own spelling of a few reads), `lease` (the sequencer lease and fencing
term), `audit`; `schema` and `migrations/`, `errors`."""

from __future__ import annotations

from capability_anchor.store.interface import Store

from .audit import PostgresAudit
from .lease import PostgresLeader
from .reads import PostgresReads


class PostgresStore(PostgresReads, PostgresLeader, PostgresAudit, Store):
    """One log's database on a PostgreSQL server (`base.PostgresBase` holds the pool)."""


__all__ = ["PostgresStore"]

# Checked by mypy: only a class with no abstract method left may be assigned here.
_IMPLEMENTS: type[Store] = PostgresStore
