"""The sequencer's lease on PostgreSQL (SPEC §13.4, §14.3): the EXCLUSIVE lock of the
`sequencer_lease` table, held by an open transaction of a session of its own, and the
fencing term taken with it.

Only a role with the log's grants may lock the table (`migrations/v3.py`); an advisory
lock, which it was, any role that may connect could hold. The lock belongs to its session's
transaction: the server frees it the moment that session ends (the process killed, the
connection cut by `pg_terminate_backend` or a restart), so a standby can take it without
waiting for a timeout to pass. A holder that stalls (SIGSTOP, a frozen VM) stops its
heartbeat, a statement a second inside the transaction: after `STALL_MS` idle in it the
server ends the session (`idle_in_transaction_session_timeout`), and the lease is free.
The transaction takes no transaction id and holds no snapshot between statements, so
however long it lives it holds back no vacuum.

Holding the lock is not what makes a signature safe: the term is. Whoever takes the lock
takes a new term while holding it, and every head and checkpoint insert is checked against
the current term in its own transaction (`migrations/v1.py`, `fenced_insert`), so a leader
that lost its session but not yet noticed, or was paused, cannot sign once another has a
newer term.

Wake-ups (NOTIFY) are delivered to a session only between its transactions, so they are
heard on a second session of the holder's, in autocommit. The term is taken by the holding
session itself (the function checks it holds the lock) in a short transaction of its own,
committed before the lease's long one begins.
"""

from __future__ import annotations

import psycopg

HEARTBEAT_S = 1.0
"""How often the holder's session runs a statement (and checks it still holds the lease)."""

WAKE_CHANNEL = "capability_anchor_sign"
"""NOTIFY channel a standby wakes the lease holder on (`Store.wake_signer`); the holder's
listening session LISTENs on it."""

STALL_MS = 5_000
"""The lease transaction's `idle_in_transaction_session_timeout`: a holder that ran nothing
for this long (it is paused, or its machine is frozen) loses its session, and so the
lease, to a standby. Its term was already superseded when it resumes: nothing it signs then
is stored."""

_HELD = (
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'relation'"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND relation = 'sequencer_lease'::regclass AND pid = pg_backend_pid()"
    " AND mode = 'ExclusiveLock' AND granted)"
)
# The `application_name` of the session holding the lease (`PostgresLeader.lease_holder`).
HOLDER = (
    "SELECT COALESCE(NULLIF(a.application_name, ''), 'pid ' || l.pid) FROM pg_locks l"
    " LEFT JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'relation'"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND l.relation = 'sequencer_lease'::regclass AND l.mode = 'ExclusiveLock' AND l.granted"
)


def try_take(hold: psycopg.Connection) -> int | None:
    """Take the lease in a transaction of `hold`'s if nobody holds it: the new term (taken
    and committed while the lock is held), else None. `hold` is in autocommit mode; its
    transaction stays open while the lease is held."""
    hold.execute("BEGIN")
    try:
        hold.execute("LOCK TABLE sequencer_lease IN EXCLUSIVE MODE NOWAIT")
    except psycopg.errors.LockNotAvailable:
        hold.execute("ROLLBACK")
        return None
    # A term only as the lock's holder (the function checks, migrations/v3.py), committed at
    # once: an update left open in the lease's transaction would hold every fenced insert.
    term = hold.execute("SELECT sequencer_take_term()").fetchone()
    hold.execute("COMMIT")
    assert term is not None  # the function always returns the row it updated
    # The lease's transaction proper. Whoever took the lock between the two took a newer
    # term: then ours is already fenced, and the lease is theirs.
    hold.execute("BEGIN")
    try:
        hold.execute("LOCK TABLE sequencer_lease IN EXCLUSIVE MODE NOWAIT")
    except psycopg.errors.LockNotAvailable:
        hold.execute("ROLLBACK")
        return None
    if current_term(hold) != int(term[0]):
        hold.execute("ROLLBACK")
        return None
    return int(term[0])


def held(hold: psycopg.Connection) -> bool:
    """Whether `hold`'s session still holds the lease (False also once the session ended);
    a heartbeat too, inside the lease's transaction."""
    try:
        row = hold.execute(_HELD).fetchone()
    except psycopg.Error:
        return False
    return bool(row and row[0])


def current_term(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT term FROM sequencer_term").fetchone()
    return int(row[0]) if row else 0


def woken(conn: psycopg.Connection) -> bool:
    """Whether a wake-up (NOTIFY on WAKE_CHANNEL) arrived on the listening session, without
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
