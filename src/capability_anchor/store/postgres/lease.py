"""The log's two locks on PostgreSQL (SPEC §13.4, §14.3): the write lock (`write_lock`'s
EXCLUSIVE lock, first in every write) and the sequencer's lease (`sequencer_lease`'s, held
by a session of its own, with the fencing term that makes a signature safe), and the clock
checked with them (docs/explanation/store.md, "Module notes")."""

from __future__ import annotations

import logging
import time
from typing import Any

import psycopg

from capability_anchor.errors import ClockDisagrees, StoreBusy
from capability_anchor.metrics.service import observe

STALL_S = 5.0
"""How long a write transaction may stall (between statements, or inside a COPY) before
its session is ended and the write lock is free again."""
LOCK_WAIT_S = 10.0
"""How long a writer waits for the write lock before it is answered StoreBusy (503)."""
_LOCK_TRY_S = STALL_S / 2  # a waiter looks for a stalled holder this often
CLOCK_TOLERANCE_S = 300.0
"""A process whose clock is off the database server's by more than this writes and signs
nothing (the service's own clock guard's tolerance, `log.clockguard.TOLERANCE_S`)."""
# One round trip: the transaction's settings, the lock (under a savepoint, so that a lock
# wait that timed out can be retried in the same transaction), and the server's clock.
_TAKE_WRITE_LOCK = (
    "SET LOCAL synchronous_commit = on; "
    f"SET LOCAL idle_in_transaction_session_timeout = {int(STALL_S * 1000)}; "
    f"SET LOCAL lock_timeout = {int(_LOCK_TRY_S * 1000)}; "
    "SAVEPOINT write_lock; LOCK TABLE write_lock IN EXCLUSIVE MODE; RELEASE write_lock; "
    f"SET LOCAL lock_timeout = {int(LOCK_WAIT_S * 1000)}; "
    "SELECT extract(epoch FROM clock_timestamp())::float8"
)
_STALLED_COPY_S = 2.0
# The holder of the write lock (this session waits no more: its try timed out), if it waits
# on its client: for _STALLED_COPY_S inside a statement (the rows of a COPY, or a client
# that reads no more of a result: the server waits with no timeout), or for STALL_S between
# statements (what the transaction's idle_in_transaction_session_timeout ends, but the
# server re-arms that only when it answers ReadyForQuery: a message after that, a Flush,
# disarms it). The activity is read afresh (a transaction keeps its first reading), against
# the clock (now() is when this transaction began).
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


def check_clock(skew: float, what: str) -> None:
    """ClockDisagrees when this machine's clock is `skew` seconds off the database server's,
    more than CLOCK_TOLERANCE_S: WHAT ("writes", "signs") waits until they agree."""
    if abs(skew) > CLOCK_TOLERANCE_S:
        raise ClockDisagrees(
            f"this machine's clock is {skew:+.0f} s off the database server's clock (more "
            f"than {CLOCK_TOLERANCE_S:.0f} s): this replica {what} nothing until they agree; "
            "correct its time (NTP)"
        )


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


def _end_stalled(conn: psycopg.Connection[Any]) -> None:
    """End the sessions that hold the lock `conn` waits for and stalled on their client,
    inside a COPY or between statements (`conn` is inside its transaction, at the
    savepoint `write_lock`)."""
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
