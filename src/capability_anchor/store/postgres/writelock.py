"""The PostgreSQL engine's write lock: the `write_lock` table's EXCLUSIVE lock, taken first in
every write transaction with the server's clock in the same round trip, and a holder stalled
on its client ended by the writers waiting for it (docs/explanation/store.md,
`writelock.py`)."""

from __future__ import annotations

import logging
import time
from typing import Any

import psycopg

from capability_anchor.errors import StoreBusy
from capability_anchor.metrics.service import observe

STALL_S = 5.0
"""How long a write transaction may stall (between statements, or inside a COPY) before
its session is ended and the write lock is free again."""
LOCK_WAIT_S = 10.0
"""How long a writer waits for the write lock before it is answered StoreBusy (503)."""
_LOCK_TRY_S = STALL_S / 2  # a waiter looks for a stalled holder this often
# One round trip: the transaction's settings, the lock (under a savepoint, so that a lock
# wait that timed out can be retried in the same transaction), and the server's clock. The
# store dedupes before it inserts: the per-row probe that words a leaf already stored for SQL
# run by hand is skipped (migration 4), the unique index still refuses one.
_TAKE_WRITE_LOCK = (
    "SET LOCAL synchronous_commit = on; "
    "SET LOCAL capability_anchor.leaf_probe = off; "
    f"SET LOCAL idle_in_transaction_session_timeout = {int(STALL_S * 1000)}; "
    f"SET LOCAL lock_timeout = {int(_LOCK_TRY_S * 1000)}; "
    "SAVEPOINT write_lock; LOCK TABLE write_lock IN EXCLUSIVE MODE; RELEASE write_lock; "
    f"SET LOCAL lock_timeout = {int(LOCK_WAIT_S * 1000)}; "
    "SELECT extract(epoch FROM clock_timestamp())::float8"
)
# A ROW SHARE lock waits for the EXCLUSIVE one's holder and is let go at once: the writer
# reads ahead after the holder's COMMIT. A stalled holder is `take_write_lock`'s business.
_SETTLE_S = 0.5
_WAIT_FOR_HOLDER = (
    f"BEGIN; SET LOCAL lock_timeout = {int(_SETTLE_S * 1000)}; "
    "LOCK TABLE write_lock IN ROW SHARE MODE; COMMIT"
)
_STALLED_COPY_S = 2.0
# The write lock's holder if it waited on its client for _STALLED_COPY_S inside a statement
# (a COPY) or STALL_S between statements (docs/explanation/store.md, `writelock.py`); the activity
# read afresh (a transaction keeps its first reading), against the clock (not now()).
_END_STALLED = (
    "SELECT pg_stat_clear_snapshot(); "
    "SELECT a.pid, a.state, pg_terminate_backend(a.pid) FROM pg_locks l"
    " JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'relation' AND l.relation = 'write_lock'::regclass"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND l.mode = 'ExclusiveLock' AND l.granted AND l.pid <> pg_backend_pid()"
    " AND a.wait_event_type = 'Client' AND a.wait_event IN ('ClientRead', 'ClientWrite')"
    " AND a.state_change < clock_timestamp() - CASE a.state"
    f" WHEN 'active' THEN interval '{_STALLED_COPY_S} s' ELSE interval '{STALL_S} s' END"
)
_logger = logging.getLogger("capability_anchor.store")


def take_write_lock(conn: psycopg.Connection[Any], where: str) -> float:
    """Take the write lock in `conn`'s new transaction (the log at WHERE); the server's clock
    once taken. A holder stalled on its client is ended by the waiter; StoreBusy after
    LOCK_WAIT_S."""
    began = time.monotonic()
    try:
        while True:
            try:
                cur = conn.execute(_TAKE_WRITE_LOCK)
                while cur.nextset():
                    pass
                row = cur.fetchone()
                assert row is not None
                return float(row[0])
            except psycopg.errors.LockNotAvailable:
                conn.execute("ROLLBACK TO write_lock")
                if time.monotonic() - began >= LOCK_WAIT_S:
                    raise StoreBusy(
                        f"another writer held the write lock of the log at {where} "
                        f"for {LOCK_WAIT_S:.0f} s"
                    ) from None
                _end_stalled(conn)
                conn.execute("RELEASE write_lock")
    finally:
        observe().lock_wait.observe(time.monotonic() - began)


def wait_for_holder(conn: psycopg.Connection[Any]) -> None:
    """Return once the write lock is free (at most _SETTLE_S), taking it in no mode."""
    try:
        conn.execute(_WAIT_FOR_HOLDER)
    except psycopg.errors.LockNotAvailable:
        conn.execute("ROLLBACK")


def _end_stalled(conn: psycopg.Connection[Any]) -> None:
    """End the sessions that hold the lock `conn` waits for (at its savepoint `write_lock`)
    and stalled on their client, inside a COPY or between statements."""
    try:
        cur = conn.execute(_END_STALLED)
        cur.nextset()
        ended = cur.fetchall()
    except psycopg.errors.InsufficientPrivilege:
        # A superuser's session: its own timeout, or its operator, ends it.
        conn.execute("ROLLBACK TO write_lock")
        return
    for pid, state, done in ended:
        if done:
            inside = state == "active"
            _logger.warning(
                "ended the database session %d: it held the log's write lock and had "
                "waited on its client %s for more than %.1f s",
                pid,
                "inside a statement (a COPY)" if inside else f"while {state}",
                _STALLED_COPY_S if inside else STALL_S,
            )


__all__ = ["LOCK_WAIT_S", "STALL_S", "take_write_lock", "wait_for_holder"]
