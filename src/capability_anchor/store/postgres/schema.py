"""Bringing a PostgreSQL database to the current schema (as its owner, one transaction per
migration under an advisory lock), and the grants of the service's role: read and insert
the log's tables, nothing more (SPEC §13.5; docs/explanation/store.md)."""

from __future__ import annotations

import psycopg
from psycopg import sql

from .migrations import v1, v2, v3, v4

APPEND_ONLY_TABLES = (
    "entries",
    "heads",
    "tiles",
    "servers",
    "keys",
    "stamps",
    "history",
    "history_tiles",
    "checkpoints",
    "cosignatures",
    "key_records",
    "policies",
    "settings",
)
"""The log's tables: the service's role may only read and insert them."""

MUTABLE_TABLES = ("meta", "witness_state")
"""Operational state the service rewrites (as on SQLite, where they have no triggers)."""

LOCK_TABLES = ("write_lock", "sequencer_lease")
"""The tables whose EXCLUSIVE lock is the write lock and the lease (`migrations/v3.py`):
the service's role gets UPDATE on them, which is what `LOCK TABLE` asks for (they have no
columns, so there is nothing to update)."""

MIGRATIONS = (v1.SQL, v2.SQL, v3.SQL, v4.SQL)
"""Migration n (1-based) is MIGRATIONS[n - 1]: never change what a shipped one creates."""
SCHEMA_VERSION = len(MIGRATIONS)
# The log's schema (store.rows.SCHEMA_VERSION, SQLite's numbering) each migration gives: the
# audit and the store contract speak of that one, whichever engine keeps it.
_LOG_SCHEMA = {1: 5, 2: 5, 3: 5, 4: 5}


def log_schema_version(version: int) -> int:
    """The log schema migration `version` implements (0: none; -1: not one of ours)."""
    return 0 if version == 0 else _LOG_SCHEMA.get(version, -1)


# Any constant both sides agree on; it only has to be one no other code of ours takes.
_MIGRATION_LOCK = 0x63612D6D  # "ca-m"

_LEDGER = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version integer PRIMARY KEY CHECK (version >= 1),
    applied timestamptz NOT NULL DEFAULT now()
)"""


def version(conn: psycopg.Connection) -> int:
    """The schema version of the database `conn` is on (0: none applied)."""
    exists = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return 0
    row = conn.execute("SELECT COALESCE(max(version), 0) FROM schema_migrations").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: psycopg.Connection, upto: int = SCHEMA_VERSION) -> int:
    """Apply every migration the database lacks, up to `upto` (a database as an earlier
    release left it, for the tests of what a migration changes); the version it is on
    afterwards."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute(_LEDGER)
    while (current := version(conn)) < upto:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            if version(conn) != current:  # another process applied it while we waited
                continue
            conn.execute(MIGRATIONS[current].encode())
            conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (current + 1,))
    return version(conn)


def grant_service_role(conn: psycopg.Connection, role: str) -> None:
    """Give `role` what the service needs and nothing more, in one transaction."""
    name = sql.Identifier(role)

    def grant(what: str, tables: tuple[str, ...]) -> None:
        on = sql.SQL(", ").join(map(sql.Identifier, tables))
        conn.execute(sql.SQL(f"GRANT {what} ON {{}} TO {{}}").format(on, name))

    with conn.transaction():
        grant("SELECT, INSERT", APPEND_ONLY_TABLES)
        grant("SELECT, INSERT, UPDATE, DELETE", MUTABLE_TABLES)
        grant("SELECT", ("schema_migrations", "sequencer_term"))
        # A term only as the lease holder: sequencer_next_term() is the owner's (migration 2).
        conn.execute(sql.SQL("GRANT EXECUTE ON FUNCTION sequencer_take_term() TO {}").format(name))
        # The identity columns' sequences: an INSERT that takes the default draws from one.
        conn.execute(sql.SQL("GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {}").format(name))
        grant("UPDATE", LOCK_TABLES)
        # Defence in depth (SPEC §14.3): a role nobody granted anything cannot even connect,
        # so it cannot hold what a connection can (connections, advisory keys).
        database = sql.Identifier(conn.info.dbname)
        conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(database, name))
        conn.execute(sql.SQL("REVOKE CONNECT ON DATABASE {} FROM PUBLIC").format(database))
