"""The sequencer's lease on PostgreSQL (SPEC §13.4): a session advisory lock, and the fencing
term taken with it.

The lock belongs to one database session: the server frees it the moment that session ends
(the process killed, the connection cut by `pg_terminate_backend` or a restart), so a
standby can take it without waiting for a timeout to pass. Holding the lock is not what
makes a signature safe: the term is. Whoever takes the lock takes a new term in the same
step, and every head and checkpoint insert is checked against the current term in its own
transaction (`migrations/v1.py`, `fenced_insert`), so a leader that lost its session but
not yet noticed, or was paused, cannot sign once another has a newer term.
"""

from __future__ import annotations

import psycopg

# The key of the lease's advisory lock. Advisory locks are per database, so this only has to
# be a key no other code of ours takes in the log's database.
LEASE_KEY = 0x63612D73  # "ca-s"

HEARTBEAT_S = 1.0
"""How often the holder's session runs a statement (and checks it still holds the lease)."""

WAKE_CHANNEL = "capability_anchor_sign"
"""NOTIFY channel a standby wakes the lease holder on (`Store.wake_signer`); the holder's
lease session LISTENs on it."""

CLOCK_TOLERANCE_S = 300.0
"""A replica whose clock is off the database server's by more than this signs nothing (the
service's own clock guard's tolerance, `log.clockguard.TOLERANCE_S`): its heads' `iat` and
days would disagree with the leaders' before and after it."""

IDLE_TIMEOUT_MS = 5_000
"""The lease session's `idle_session_timeout`: a holder that ran nothing for this long (it
is paused, or its machine is frozen) loses its session, and so the lease, to a standby. Its
term was already superseded when it resumes: nothing it signs then is stored."""


def try_take(conn: psycopg.Connection) -> int | None:
    """Take the lease on `conn`'s session if nobody holds it: the new term, else None.
    `conn` must be in autocommit mode: the lock outlives transactions, the term is
    committed at once."""
    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (LEASE_KEY,)).fetchone()
    if not row or not row[0]:
        return None
    # The function checks this session holds the lock just taken (migrations/v2.py).
    term = conn.execute("SELECT sequencer_take_term()").fetchone()
    assert term is not None  # the function always returns the row it updated
    return int(term[0])


def held(conn: psycopg.Connection) -> bool:
    """Whether `conn`'s session still holds the lease (False also once the session ended)."""
    try:
        row = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'"
            " AND pid = pg_backend_pid() AND classid = 0 AND objid = %s AND objsubid = 1"
            " AND granted)",
            (LEASE_KEY,),
        ).fetchone()
    except psycopg.OperationalError:
        return False
    return bool(row and row[0])


def current_term(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT term FROM sequencer_term").fetchone()
    return int(row[0]) if row else 0


def woken(conn: psycopg.Connection) -> bool:
    """Whether a wake-up (NOTIFY on WAKE_CHANNEL) arrived on the lease session, without
    waiting; False also once the session ended (the heartbeat finds that)."""
    try:
        return bool(list(conn.notifies(timeout=0)))
    except psycopg.Error:
        return False


def server_clock(conn: psycopg.Connection) -> float:
    """The database server's wall clock, seconds since the epoch."""
    row = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
    assert row is not None
    return float(row[0])
