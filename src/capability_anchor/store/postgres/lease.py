"""The sequencer's lease and fencing term on PostgreSQL (SPEC §13.4, §14.3): the
`sequencer_lease` table's EXCLUSIVE lock, held by an open transaction of a session of its
own, taken at the first signed insert and kept alive by a heartbeat, the term taken with it,
and the standbys' wake-ups heard on a second session (docs/explanation/store.md)."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from typing import Any

import psycopg

from capability_anchor.errors import ClockDisagrees, LeaseLost, StoreError

from .base import PostgresBase, check_clock, connect
from .errors import store_error

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

# The lease's granted lock: its holder's session is `l.pid`.
_LEASE = (
    " FROM pg_locks l WHERE l.locktype = 'relation' AND l.relation = 'sequencer_lease'::regclass"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND l.mode = 'ExclusiveLock' AND l.granted"
)
_HELD = f"SELECT EXISTS (SELECT 1{_LEASE} AND l.pid = pg_backend_pid())"
# The `application_name` of the session holding the lease (`PostgresLeader.lease_holder`).
HOLDER = (
    "SELECT COALESCE(NULLIF((SELECT a.application_name FROM pg_stat_activity a"
    f" WHERE a.pid = l.pid), ''), 'pid ' || l.pid){_LEASE}"
)


def _locked(hold: psycopg.Connection) -> bool:
    """Begin a transaction on `hold` and lock the lease's table in it, if nobody holds it."""
    hold.execute("BEGIN")
    try:
        hold.execute("LOCK TABLE sequencer_lease IN EXCLUSIVE MODE NOWAIT")
    except psycopg.errors.LockNotAvailable:
        hold.execute("ROLLBACK")
        return False
    return True


def try_take(hold: psycopg.Connection) -> int | None:
    """Take the lease in a transaction of `hold`'s if nobody holds it: the new term (taken
    and committed while the lock is held), else None. `hold` is in autocommit mode; its
    transaction stays open while the lease is held."""
    if not _locked(hold):
        return None
    # A term only as the lock's holder (the function checks, migrations/v3.py), committed at
    # once: an update left open in the lease's transaction would hold every fenced insert.
    term = hold.execute("SELECT sequencer_take_term()").fetchone()
    hold.execute("COMMIT")
    assert term is not None  # the function always returns the row it updated
    # The lease's transaction proper. Whoever took the lock between the two took a newer
    # term: then ours is already fenced, and the lease is theirs.
    if not _locked(hold):
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


class PostgresLeader(PostgresBase):
    def __init__(self, conninfo: str, where: str, **options: Any) -> None:
        super().__init__(conninfo, where, **options)
        self._lease_lock = threading.Lock()
        self._lease: tuple[psycopg.Connection[Any], int] | None = None  # (session, term)
        self._listen: psycopg.Connection[Any] | None = None  # the wake-ups' session
        self._beat_stop = threading.Event()
        self._wanted = threading.Event()
        self._next_beat = 0.0
        self._beat: threading.Thread | None = None

    def close(self) -> None:
        self._beat_stop.set()
        if self._beat is not None:
            self._beat.join()
        with self._lease_lock:
            self._let_go()
        super().close()

    def _term(self) -> int:
        """The fencing term a head or checkpoint is written under: the lease's, taken now if
        this store holds none. `LeaseLost` when another replica holds it; `ClockDisagrees`
        when this machine's clock is off the server's (the lease is let go). The term check
        in the insert's own transaction is what keeps a stale leader from signing."""
        local = self._local
        if getattr(local, "term", None) is not None:
            return int(local.term)
        term = self._lease_term()
        # Once per write transaction: its first fenced insert locked the `sequencer_term`
        # row, so taking a term from the lease session now would wait for it, for good.
        if getattr(local, "conn", None) is not None:
            local.term = term
        return term

    def _lease_term(self) -> int:
        """The lease's term, the lease taken first if this store holds none."""
        with self._lease_lock:
            if self._lease is not None and self._listen is not None:
                hold, term = self._lease
                if held(hold):
                    try:
                        self._check_clock(self._listen)
                    except (ClockDisagrees, psycopg.Error):
                        self._let_go()  # the lease is free for a replica whose clock is right
                        raise
                    return term
            self._let_go()
            # A session named for the operator who asks who holds it (`lease_holder`), whose
            # waits are bounded: a paused holder's session ends idle in its transaction.
            hold = connect(
                self._conninfo,
                "cannot take the sequencer lease",
                options=(
                    f"-c idle_in_transaction_session_timeout={STALL_MS} -c lock_timeout={STALL_MS}"
                ),
                application_name=(
                    f"capability-anchor lease {socket.gethostname()} pid {os.getpid()}"[:63]
                ),
            )
            try:
                talk = connect(self._conninfo, "cannot take the sequencer lease")
            except BaseException:
                hold.close()
                raise
            try:
                self._check_clock(talk)  # before taking it: a replica off the clock never leads
                taken = try_take(hold)
                if taken is None:
                    raise LeaseLost(
                        f"another replica holds the sequencer lease of the log at {self._where}"
                    )
                talk.execute(f"LISTEN {WAKE_CHANNEL}".encode())
            except BaseException as exc:
                hold.close()
                talk.close()
                if isinstance(exc, psycopg.Error):
                    raise store_error(exc, "cannot take the sequencer lease") from None
                raise
            self._lease, self._listen = (hold, taken), talk
            if self._beat is None:
                self._beat = threading.Thread(
                    target=self._heartbeat, name="capability-anchor-lease", daemon=True
                )
                self._beat.start()
            return taken

    def _let_go(self) -> None:
        """Close the lease's sessions (with `_lease_lock` held): the lease is free at once."""
        if self._lease is not None:
            self._lease[0].close()
            self._lease = None
        if self._listen is not None:
            self._listen.close()
            self._listen = None

    def _check_clock(self, conn: psycopg.Connection[Any]) -> None:
        row = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
        assert row is not None
        check_clock(time.time() - float(row[0]), "signs")

    def _heartbeat(self) -> None:
        """Keep the lease's transaction busy while this process runs, and notice at once
        when its session ended (the next signature then asks for the lease again)."""
        while not self._beat_stop.wait(HEARTBEAT_S / 10):
            with self._lease_lock:
                if self._lease is None or self._listen is None:
                    continue
                # A wake-up (NOTIFY on WAKE_CHANNEL) on the listening session, not waited
                # for; a session that ended is the heartbeat's to find.
                with contextlib.suppress(psycopg.Error):
                    if list(self._listen.notifies(timeout=0)):
                        self._wanted.set()
                if time.monotonic() >= self._next_beat:
                    self._next_beat = time.monotonic() + HEARTBEAT_S
                    if not held(self._lease[0]):
                        self._let_go()

    def lease_holder(self) -> str | None:
        """Who holds the lease (its session's application_name), "" while nobody does."""
        try:
            rows = self._exec(HOLDER)
        except StoreError:
            return None
        return str(rows[0][0]) if rows else ""

    def wake_signer(self) -> None:
        with contextlib.suppress(StoreError):
            self._exec(f"NOTIFY {WAKE_CHANNEL}")

    def signature_wanted(self) -> bool:
        wanted = self._wanted.is_set()
        self._wanted.clear()
        return wanted


__all__ = ["PostgresLeader"]
