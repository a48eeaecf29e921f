"""The PostgreSQL engine (issue #24, SPEC §13.5): one log per database, reached by a
`postgresql://` URL through `store.open` (`engine.PostgresEngine` is the registry's
`postgresql` entry).

Like `sqlite/`, it is the only code that touches its database: the only package that
imports psycopg and psycopg_pool (tests/integration/test_layering.py); it may import the
rest of `store/` and the kernel, and nothing outside `store/` imports it.

Its parts, each a mixin over `base.PostgresBase` (the pool, transactions and the write
lock): `rows` (reads and writes of entries, the `/record` index, tiles, heads, stamps, keys),
`history` (the history tree), `checkpoints` (checkpoints, cosignatures, policies, witness
state), `audit` (the catalogs, grants and indexes, for the audit's `engine_findings`);
`schema` and `migrations/` hold the migrations and the service role's grants, `lease` the
sequencer's lease and fencing term, `errors` maps SQLSTATEs to the project's errors.
"""

from __future__ import annotations

from capability_anchor.store.interface import Store

from .audit import PostgresAudit
from .checkpoints import PostgresCheckpoints
from .history import PostgresHistory
from .rows import PostgresEntries, PostgresHeads
from .trust import PostgresTrust


class PostgresStore(
    PostgresEntries,
    PostgresHeads,
    PostgresTrust,
    PostgresHistory,
    PostgresCheckpoints,
    PostgresAudit,
    Store,
):
    """One log's database on a PostgreSQL server (`base.PostgresBase` holds the pool)."""


__all__ = ["PostgresStore"]

# Checked by mypy: only a class with no abstract method left may be assigned here.
_IMPLEMENTS: type[Store] = PostgresStore
