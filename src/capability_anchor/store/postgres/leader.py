"""The sequencer's lease as the store holds it (`lease.py`): taken at the first signed insert,
kept alive by a heartbeat, and the standbys' wake-ups heard on its session."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from typing import Any

import psycopg

from capability_anchor.errors import ClockDisagrees, LeaseLost, StoreError

from . import lease
from .base import PostgresBase, connect
from .errors import store_error
from .lease import check_clock


class PostgresLeader(PostgresBase):
    def _signing_term(self) -> int:
        """The fencing term to write into a head or checkpoint: this store's lease's, taken
        now if it holds none (or its session ended: a restart, a cut connection, and then a
        newer term). `LeaseLost` when another replica holds the lease; `ClockDisagrees`
        when this machine's clock is off the database server's by more than
        `CLOCK_TOLERANCE_S` (a lease it held is let go, for a replica whose clock is
        right). Holding the lease is not what keeps a stale leader from signing: the term
        check in the insert's own transaction is (lease.py).

        Inside a write transaction the term is taken once: its first fenced insert locked
        the `sequencer_term` row, so no other term can begin before it commits, and taking
        one from the lease session then (its session ended while this one wrote) would wait
        for this very transaction, for good."""
        local = self._local
        if getattr(local, "term", None) is not None:
            return int(local.term)
        term = self._lease_term()
        if getattr(local, "conn", None) is not None:
            local.term = term
        return term

    def _term(self) -> int:
        return self._signing_term()

    def _lease_term(self) -> int:
        """The lease's term, the lease taken first if this store holds none."""
        with self._lease_lock:
            if self._lease is not None and self._listen is not None:
                hold, term = self._lease
                if lease.held(hold):
                    try:
                        self._check_clock(self._listen)
                    except (ClockDisagrees, psycopg.Error):
                        self._let_go()  # the lease is free for a replica whose clock is right
                        raise
                    return term
            self._let_go()
            hold = self._lease_session()
            try:
                talk = connect(self._conninfo, "cannot take the sequencer lease")
            except BaseException:
                hold.close()
                raise
            try:
                self._check_clock(talk)  # before taking it: a replica off the clock never leads
                taken = lease.try_take(hold)
                if taken is None:
                    raise LeaseLost(
                        f"another replica holds the sequencer lease of the log at {self._where}"
                    )
                talk.execute(f"LISTEN {lease.WAKE_CHANNEL}".encode())
            except psycopg.Error as exc:
                hold.close()
                talk.close()
                raise store_error(exc, "cannot take the sequencer lease") from None
            except BaseException:
                hold.close()
                talk.close()
                raise
            self._lease, self._listen = (hold, taken), talk
            if self._beat is None:
                self._beat = threading.Thread(
                    target=self._heartbeat, name="capability-anchor-lease", daemon=True
                )
                self._beat.start()
            return taken

    def _let_go(self) -> None:
        """Close the lease's sessions (with the lock held): the lease is free at once."""
        if self._lease is not None:
            self._lease[0].close()
            self._lease = None
        if self._listen is not None:
            self._listen.close()
            self._listen = None

    def _lease_session(self) -> psycopg.Connection[Any]:
        """A connection of its own for the lease's transaction, named for the operator who
        asks who holds it (`lease.holder`, the `/metrics` gauge). A paused holder (SIGSTOP,
        a frozen VM) keeps its session open but stops its heartbeat: the server ends the
        session idle in its transaction, and the lease is free. Its waits are bounded too
        (`lock_timeout`): the new term waits for the `sequencer_term` row, which a fenced
        insert holds until its transaction ends; StoreBusy past STALL_MS."""
        return connect(
            self._conninfo,
            "cannot take the sequencer lease",
            options=(
                f"-c idle_in_transaction_session_timeout={lease.STALL_MS}"
                f" -c lock_timeout={lease.STALL_MS}"
            ),
            name=f"capability-anchor lease {socket.gethostname()} pid {os.getpid()}"[:63],
        )

    def _check_clock(self, conn: psycopg.Connection[Any]) -> None:
        check_clock(time.time() - lease.server_clock(conn), "signs")

    def _heartbeat(self) -> None:
        """Keep the lease's transaction busy while this process runs, and notice at once
        when its session ended (the next signature then asks for the lease again)."""
        while not self._beat_stop.wait(lease.HEARTBEAT_S / 10):
            with self._lease_lock:
                if self._lease is None or self._listen is None:
                    continue
                if lease.woken(self._listen):
                    self._wanted.set()
                if time.monotonic() >= self._next_beat:
                    self._next_beat = time.monotonic() + lease.HEARTBEAT_S
                    if not lease.held(self._lease[0]):
                        self._let_go()

    def lease_holder(self) -> str | None:
        """Who holds the lease (its session's application_name), "" while nobody does."""
        try:
            rows = self._exec(lease.HOLDER)
        except StoreError:
            return None
        return str(rows[0][0]) if rows else ""

    def wake_signer(self) -> None:
        with contextlib.suppress(StoreError):
            self._exec(f"NOTIFY {lease.WAKE_CHANNEL}")

    def signature_wanted(self) -> bool:
        wanted = self._wanted.is_set()
        self._wanted.clear()
        return wanted


__all__ = ["PostgresLeader"]
