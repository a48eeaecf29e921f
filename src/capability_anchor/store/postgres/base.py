"""The PostgreSQL engine's pool, transactions and write lock (the write discipline): one
transaction per `write()` with `synchronous_commit` on, the `write_lock` table's lock and
the clock checked first, `OutcomeUnknown` for a COMMIT whose connection broke, and a pool
that outlives a database outage (docs/explanation/store.md, "Module notes")."""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
import psycopg_pool

from capability_anchor.errors import (
    OutcomeUnknown,
    StoreCorrupt,
    StoreError,
    StoreIOError,
)
from capability_anchor.store.sql import Dialect, Names, Rows, SqlBase

from .errors import outcome_lost, store_error
from .lease import check_clock, take_write_lock

CONNECT_TIMEOUT_S = 5.0
POOL_MAX = 8
FRESH_S = 2.0
# Every `GET /proof` read the day's newest head, a round trip that waited on a server busy
# with the writers' COPY: a reader may keep it this long (`Store.head_reuse_s`).
HEAD_REUSE_S = 0.2
_INSERT_CHUNK = 1000  # rows per INSERT: 7000 parameters at most, of PostgreSQL's 65535
_cursor_names = itertools.count(1)
DIALECT = Dialect(
    collate=' COLLATE "C"',  # free text in UTF-8 byte order, as SQLite compares it
    unlimited=None,
    stamp_order="id",
    off_day="to_char(to_timestamp(accepted_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD') "
    "IS DISTINCT FROM day",
)
_logger = logging.getLogger("capability_anchor.store")


def connect(
    conninfo: str, what: str, *, options: str | None = None, name: str | None = None
) -> psycopg.Connection[Any]:
    """A connection of its own (autocommit, the store's connect timeout), outside the pool,
    its `application_name` NAME if given; psycopg's errors become the project's, saying
    `what` could not be done."""
    extra: dict[str, Any] = {} if options is None else {"options": options}
    if name is not None:
        extra["application_name"] = name
    try:
        return psycopg.connect(
            conninfo, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT_S), **extra
        )
    except psycopg.Error as exc:
        raise store_error(exc, what) from None


class PostgresBase(SqlBase):
    """One log's database on a PostgreSQL server, reached through a pool.

    Inside `write()` (and `read()`) the calling thread has one connection of its own, held
    for the whole transaction; every other call takes a connection for one statement. No
    connection is used by two threads at once, and no reader outside `write()` sees its
    uncommitted rows.
    """

    _dialect = DIALECT

    def __init__(
        self, conninfo: str, where: str, *, max_size: int = POOL_MAX, readonly: bool = False
    ) -> None:
        self._where = where
        self._conninfo = conninfo
        self._local = threading.local()
        self._closed = False
        # The sequencer lease's own session (lease.py), taken at the first signed insert.
        self._lease_lock = threading.Lock()
        self._lease: tuple[psycopg.Connection[Any], int] | None = None
        self._listen: psycopg.Connection[Any] | None = None  # the wake-ups' session
        self._beat_stop = threading.Event()
        self._wanted = threading.Event()
        self._next_beat = 0.0
        self._beat: threading.Thread | None = None
        self._used: weakref.WeakKeyDictionary[psycopg.Connection[Any], float]
        self._used = weakref.WeakKeyDictionary()
        options: dict[str, object] = {
            "autocommit": True,
            "connect_timeout": max(1, int(CONNECT_TIMEOUT_S)),
        }
        if readonly:
            # The audit's opening: the server itself refuses any write on its connections.
            options["options"] = "-c default_transaction_read_only=on"
        self._pool = psycopg_pool.ConnectionPool(
            conninfo,
            min_size=1,
            max_size=max_size,
            kwargs=options,
            check=self._check_taken,
            timeout=CONNECT_TIMEOUT_S,
            name="capability-anchor",
            open=False,
        )
        # Open without waiting for the first connection: a store opened while the server is
        # down answers StoreIOError per call and works once the server is back.
        self._pool.open(wait=False)

    def describe(self) -> str:
        return self._where

    @property
    def head_reuse_s(self) -> float:
        return HEAD_REUSE_S

    def close(self) -> None:
        self._closed = True
        self._beat_stop.set()
        if self._beat is not None:
            self._beat.join()
        with self._lease_lock:
            if self._lease is not None:
                self._lease[0].close()  # ends the session: the lease is free at once
                self._lease = None
            if self._listen is not None:
                self._listen.close()
                self._listen = None
        self._pool.close()

    # --- transactions ----------------------------------------------------------------------

    @contextmanager
    def write(self) -> Iterator[None]:
        """`Store.write`, in the server's fsynced WAL when it returns; a commit whose answer
        was lost with the connection is `OutcomeUnknown` (the caller reads back what it
        wrote), and `ClockDisagrees` comes before anything is written."""
        local = self._local
        if getattr(local, "conn", None) is not None:
            raise StoreError("a transaction is already open on this thread")
        with self._connection() as conn:
            local.conn = conn
            committing = False
            try:
                with conn.transaction():
                    server_now = take_write_lock(conn, self._where)
                    check_clock(time.time() - server_now, "writes")
                    yield
                    committing = True
            except psycopg.Error as exc:
                if committing and outcome_lost(exc):
                    raise OutcomeUnknown(
                        f"the connection to the log at {self._where} was lost during a COMMIT"
                    ) from None
                raise store_error(exc, "a write to the log failed") from None
            finally:
                local.conn = None
                local.term = None  # the fencing term this transaction signed under (leader.py)

    @contextmanager
    def read(self) -> Iterator[None]:
        """One consistent snapshot for several reads on this thread (REPEATABLE READ, read
        only: it never blocks writers). Inside `write()` or another `read()` it adds
        nothing: those are one snapshot already."""
        local = self._local
        if getattr(local, "conn", None) is not None:
            yield
            return
        with self._connection() as conn:
            local.conn = conn
            try:
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                yield
            except psycopg.Error as exc:
                raise store_error(exc, "a read of the log failed") from None
            finally:
                local.conn = None
                if not conn.closed:
                    # A broken connection: the pool's check replaces it.
                    with contextlib.suppress(psycopg.Error):
                        conn.execute("COMMIT")

    def _check_taken(self, conn: psycopg.Connection[Any]) -> None:
        """The pool's test of a connection it hands out: only of one idle for a while."""
        used = self._used.get(conn)
        if used is None or time.monotonic() - used > FRESH_S:
            psycopg_pool.ConnectionPool.check_connection(conn)

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        if self._closed:
            raise StoreError(f"the log at {self._where} is closed")
        lost = False
        try:
            with self._pool.connection() as conn:
                try:
                    yield conn
                finally:
                    lost = conn.broken or conn.closed
                    if not lost:
                        self._used[conn] = time.monotonic()
        except psycopg_pool.PoolTimeout as exc:
            raise store_error(exc, f"cannot reach the log at {self._where}") from None
        except psycopg.Error as exc:
            # Raised while the pool took or gave back the connection, outside any statement.
            raise store_error(exc, f"cannot reach the log at {self._where}") from None
        finally:
            if lost:
                # The server dropped it, so likely every idle one too (a restart): test them
                # now rather than fail one statement on each.
                self._local.lost = True
                with contextlib.suppress(psycopg.Error, psycopg_pool.PoolClosed):
                    self._pool.check()

    # --- statements --------------------------------------------------------------------------

    def _exec(self, query: str, params: Sequence[object] = ()) -> list[Any]:
        local = self._local
        local.lost = False
        try:
            return self._exec_once(query, params)
        except StoreIOError:
            read = query.lstrip("( ").startswith("SELECT")
            if not (local.lost and read and getattr(local, "conn", None) is None):
                raise
        # A read of its own on a connection the server had dropped: the pool now holds
        # live ones, and a read is safe to send again.
        return self._exec_once(query, params)

    def _exec_once(self, query: str, params: Sequence[object]) -> list[Any]:
        with self._statement() as conn:
            cur = conn.execute(_spelled(query), params)
            return cur.fetchall() if cur.description is not None else []

    def _iter(self, query: str, params: Sequence[object] = ()) -> Iterator[Any]:
        """Rows one at a time, from a server-side cursor (for results too large to fetch at
        once). Inside `read()` or `write()` it reads their snapshot; outside, the generator
        holds a connection and a read-only snapshot of its own until it is exhausted or
        closed, so other calls on the thread meanwhile go to other connections."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            yield from self._cursor(conn, query, params)
            return
        with self._connection() as own:
            try:
                own.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                yield from self._cursor(own, query, params)
            finally:
                if not own.closed:
                    with contextlib.suppress(psycopg.Error):
                        own.execute("COMMIT")

    @staticmethod
    def _cursor(
        conn: psycopg.Connection[Any], query: str, params: Sequence[object]
    ) -> Iterator[Any]:
        try:
            with conn.cursor(name=f"capability_anchor_{next(_cursor_names)}") as cur:
                cur.execute(_spelled(query), params)
                yield from cur
        except UnicodeDecodeError as exc:
            raise _not_text(exc) from None
        except psycopg.Error as exc:
            raise store_error(exc, "a read of the log failed") from None

    def _insert(
        self, table: str, cols: Names, rows: Rows, *, ignore: bool = False, types: Names = ()
    ) -> None:
        """New rows by COPY (binary): several times faster than one INSERT of arrays, and
        the table's row and statement triggers run as for an INSERT. Rows that may be
        stored already by one INSERT per chunk, not `executemany`: psycopg pipelines that
        and ends it with a Flush after its Sync, which disarms the server's
        idle_in_transaction_session_timeout until the next statement, so a writer stalled
        right after it held the write lock for good (#35 item 5)."""
        into = f"{table} ({', '.join(cols)})"
        if not ignore:
            with (
                self._statement() as conn,
                conn.cursor() as cur,
                cur.copy(f"COPY {into} FROM STDIN (FORMAT BINARY)".encode()) as copy,
            ):
                copy.set_types(list(types))
                for row in rows:
                    copy.write_row(row)
            return
        values = list(rows)
        marks = f"({', '.join(['%s'] * len(cols))})"
        for at in range(0, len(values), _INSERT_CHUNK):
            chunk = values[at : at + _INSERT_CHUNK]
            self._exec(
                f"INSERT INTO {into} VALUES {', '.join([marks] * len(chunk))} "
                "ON CONFLICT DO NOTHING",
                [v for row in chunk for v in row],
            )

    @contextmanager
    def _statement(self) -> Iterator[psycopg.Connection[Any]]:
        """The thread's transaction's connection, else one from the pool for one statement;
        psycopg's errors become the project's."""
        conn = getattr(self._local, "conn", None)
        try:
            if conn is not None:
                yield conn
                return
            with self._connection() as pooled:
                yield pooled
        except UnicodeDecodeError as exc:
            raise _not_text(exc) from None
        except psycopg.Error as exc:
            raise store_error(exc, "a statement failed") from None


__all__ = ["CONNECT_TIMEOUT_S", "HEAD_REUSE_S", "PostgresBase"]


def _spelled(query: str) -> bytes:
    """The shared SQL's `?` placeholders as psycopg's `%s` (no SQL of the store has a `?`
    of its own)."""
    return query.replace("?", "%s").encode()


def _not_text(exc: UnicodeDecodeError) -> StoreCorrupt:
    """A text column whose bytes are not UTF-8: PostgreSQL refuses such text when it is
    written, so a damaged page (or a write past the server) made them."""
    return StoreCorrupt(f"a row of the log is not valid UTF-8 text ({exc.reason}): damaged data")
