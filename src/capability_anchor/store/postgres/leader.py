"""The sequencer's lease as the store holds it (`lease.py`): taken at the first signed insert,
kept alive by a heartbeat, and the standbys' wake-ups heard on its session."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import psycopg

from capability_anchor.errors import ClockDisagrees, LeaseLost, StoreError

from . import lease
from .base import PostgresBase, connect
from .errors import store_error


class PostgresLeader(PostgresBase):
    def _signing_term(self) -> int:
        """The fencing term to write into a head or checkpoint: this store's lease's, taken
        now if it holds none (or its session ended: a restart, a cut connection, and then a
        newer term). `LeaseLost` when another replica holds the lease; `ClockDisagrees`
        when this machine's clock is off the database server's by more than
        `lease.CLOCK_TOLERANCE_S` (a lease it held is let go, for a replica whose clock is
        right). Holding the lease is not what keeps a stale leader from signing: the term
        check in the insert's own transaction is (lease.py)."""
        with self._lease_lock:
            if self._lease is not None:
                conn, term = self._lease
                if lease.held(conn):
                    try:
                        self._check_clock(conn)
                    except ClockDisagrees:
                        conn.close()  # the lease is free for a replica whose clock is right
                        self._lease = None
                        raise
                    return term
                conn.close()
                self._lease = None
            conn = self._lease_session()
            try:
                self._check_clock(conn)  # before taking it: a replica off the clock never leads
                taken = lease.try_take(conn)
                if taken is None:
                    raise LeaseLost(
                        f"another replica holds the sequencer lease of the log at {self._where}"
                    )
                conn.execute(f"LISTEN {lease.WAKE_CHANNEL}".encode())
            except psycopg.Error as exc:
                conn.close()
                raise store_error(exc, "cannot take the sequencer lease") from None
            except BaseException:
                conn.close()
                raise
            self._lease = (conn, taken)
            if self._beat is None:
                self._beat = threading.Thread(
                    target=self._heartbeat, name="capability-anchor-lease", daemon=True
                )
                self._beat.start()
            return taken

    def _lease_session(self) -> psycopg.Connection[Any]:
        """A connection of its own for the lease. A paused holder (SIGSTOP, a frozen VM)
        keeps its session open but stops its heartbeat: the server ends the idle session,
        and the lease is free."""
        return connect(
            self._conninfo,
            "cannot take the sequencer lease",
            options=f"-c idle_session_timeout={lease.IDLE_TIMEOUT_MS}",
        )

    def _check_clock(self, conn: psycopg.Connection[Any]) -> None:
        skew = time.time() - lease.server_clock(conn)
        if abs(skew) > lease.CLOCK_TOLERANCE_S:
            raise ClockDisagrees(
                f"this machine's clock is {skew:+.0f} s off the database server's (more than "
                f"{lease.CLOCK_TOLERANCE_S:.0f} s): this replica signs nothing until they "
                "agree; correct its time (NTP)"
            )

    def _heartbeat(self) -> None:
        """Keep the lease's session busy while this process runs, and notice at once when
        it ended (the next signature then asks for the lease again)."""
        while not self._beat_stop.wait(lease.HEARTBEAT_S / 10):
            with self._lease_lock:
                if self._lease is None:
                    continue
                conn = self._lease[0]
                if lease.woken(conn):
                    self._wanted.set()
                if time.monotonic() >= self._next_beat:
                    self._next_beat = time.monotonic() + lease.HEARTBEAT_S
                    if not lease.held(conn):
                        conn.close()
                        self._lease = None

    def wake_signer(self) -> None:
        with contextlib.suppress(StoreError):
            self._exec(f"NOTIFY {lease.WAKE_CHANNEL}")

    def signature_wanted(self) -> bool:
        wanted = self._wanted.is_set()
        self._wanted.clear()
        return wanted


__all__ = ["PostgresLeader"]
