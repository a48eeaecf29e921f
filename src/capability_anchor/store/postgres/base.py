"""The PostgreSQL engine's pool and transactions (the write discipline): one transaction per
`write()` with `synchronous_commit` on, the write lock (`writelock`) and the clock first,
`OutcomeUnknown` for a COMMIT whose connection broke, and a pool that outlives a database
outage (docs/explanation/store.md, "Module notes")."""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
import psycopg_pool

from capability_anchor.errors import (
    ClockDisagrees,
    OutcomeUnknown,
    StoreCorrupt,
    StoreError,
    StoreIOError,
)
from capability_anchor.metrics.service import observe
from capability_anchor.store.sql import Dialect, Names, Rows, SqlBase

from .errors import outcome_lost, store_error
from .writelock import take_write_lock, wait_for_holder

CLOCK_TOLERANCE_S = 300.0
"""A process whose clock is off the database server's by more than this writes and signs
nothing (the service's own clock guard's tolerance, `log.clockguard.TOLERANCE_S`)."""
CONNECT_TIMEOUT_S = 5.0
POOL_MAX = 8
FRESH_S = 2.0
# Every `GET /proof` read the day's newest head, a round trip that waited on a server busy
# with the writers' COPY: a reader may keep it this long (`Store.head_reuse_s`).
HEAD_REUSE_S = 0.2
_cursor_names = itertools.count(1)
DIALECT = Dialect(
    collate=' COLLATE "C"',  # free text in UTF-8 byte order, as SQLite compares it
    unlimited=None,
    stamp_order="id",
    off_day="to_char(to_timestamp(accepted_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD') "
    "IS DISTINCT FROM day",
)


def connect(conninfo: str, what: str, **params: Any) -> psycopg.Connection[Any]:
    """A connection of its own (autocommit, the store's connect timeout, libpq's `params`),
    outside the pool; psycopg's errors become the project's, saying `what` could not be done."""
    try:
        return psycopg.connect(
            conninfo, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT_S), **params
        )
    except psycopg.Error as exc:
        raise store_error(exc, what) from None


def check_clock(skew: float, what: str) -> None:
    """ClockDisagrees when this machine's clock is `skew` seconds off the database server's,
    more than CLOCK_TOLERANCE_S: WHAT ("writes", "signs") waits until they agree."""
    if abs(skew) > CLOCK_TOLERANCE_S:
        raise ClockDisagrees(
            f"this machine's clock is {skew:+.0f} s off the database server's clock (more "
            f"than {CLOCK_TOLERANCE_S:.0f} s): this replica {what} nothing until they agree; "
            "correct its time (NTP)"
        )


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
        self._types: dict[str, dict[str, str]] = {}
        self._closed = False
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
            held = 0.0
            try:
                with conn.transaction():
                    server_now = take_write_lock(conn, self._where)
                    held = time.monotonic()
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
                if held:  # the lock is let go with the COMMIT or ROLLBACK, just returned
                    observe().lock_hold.observe(time.monotonic() - held)
                local.conn = None
                local.term = None  # the fencing term this transaction signed under (lease.py)

    def wait_for_writers(self) -> None:
        if getattr(self._local, "conn", None) is None:  # never inside a transaction
            with self._statement() as conn:
                wait_for_holder(conn)

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
                with _snapshot(conn):
                    yield
            except psycopg.Error as exc:
                raise store_error(exc, "a read of the log failed") from None
            finally:
                local.conn = None

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
        # A read of its own on a connection the server had dropped is sent once more: the
        # pool holds live ones by then, and a read is safe to send again.
        resend = query.lstrip("( ").startswith("SELECT") and getattr(local, "conn", None) is None
        while True:
            try:
                with self._statement() as conn:
                    cur = conn.execute(_spelled(query), params)
                    return cur.fetchall() if cur.description is not None else []
            except StoreIOError:
                if not (resend and local.lost):
                    raise
                resend = False

    def _iter(self, query: str, params: Sequence[object] = ()) -> Iterator[Any]:
        """Rows one at a time, from a server-side cursor (for results too large to fetch at
        once). Inside `read()` or `write()` it reads their snapshot; outside, the generator
        holds a connection and a read-only snapshot of its own until it is exhausted or
        closed, so other calls on the thread meanwhile go to other connections."""
        conn = getattr(self._local, "conn", None)
        with contextlib.ExitStack() as own:
            if conn is None:
                conn = own.enter_context(self._connection())
                own.enter_context(_snapshot(conn))
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
        """New rows by binary COPY (the tables' triggers run as for an INSERT); rows that
        may be stored already by the same COPY under a savepoint, then, only if one was, one
        INSERT of `unnest` arrays ON CONFLICT DO NOTHING; never `executemany` (its Flush
        disarms the stall timeout: docs/explanation/store.md, `base.py`)."""
        into = f"{table} ({', '.join(cols)})"
        if not ignore:
            with self._statement() as conn:
                _copy(conn, into, types, rows)
            return
        values = list(rows)
        if not values:
            return
        types = self._column_types(table, cols)
        # Rows are seldom stored already (a rerun, a repair): a COPY first, under a savepoint,
        # since ON CONFLICT's speculative insertion costs 2.5x as much per row, and an INSERT
        # of arrays has the server build and unnest them (decisions/37-lockhold.md). Inside
        # `write()` the savepoint is let go with the COMMIT: a round trip fewer under the lock.
        inside = getattr(self._local, "conn", None) is not None
        with self._statement() as conn:
            try:
                with contextlib.nullcontext() if inside else conn.transaction():
                    if inside:
                        conn.execute("SAVEPOINT stored_maybe")
                    _copy(conn, into, types, values)
                return
            except psycopg.errors.UniqueViolation:
                if inside:
                    conn.execute("ROLLBACK TO SAVEPOINT stored_maybe")
        # One statement of one array per column, whatever the rows: psycopg parses a short
        # query once (a VALUES list of thousands of placeholders cost 20 ms a batch to parse).
        arrays = ", ".join(f"%s::{t}[]" for t in types)
        columns = [list(column) for column in zip(*values, strict=True)]
        insert = f"INSERT INTO {into} SELECT * FROM unnest({arrays}) ON CONFLICT DO NOTHING"
        self._exec(insert, columns)

    def _column_types(self, table: str, cols: Names) -> list[str]:
        """The SQL types of `table`'s columns `cols` (read from the catalog once)."""
        known = self._types.get(table)
        if known is None:
            known = self._types[table] = {
                str(name): str(spelled)
                for name, spelled in self._exec(
                    "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                    "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
                    (table,),
                )
            }
        return [known[c] for c in cols]

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


@contextmanager
def _snapshot(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """A read-only REPEATABLE READ transaction on `conn` around the block."""
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    try:
        yield
    finally:
        if not conn.closed:  # a broken connection: the pool's check replaces it
            with contextlib.suppress(psycopg.Error):
                conn.execute("COMMIT")


def _copy(conn: psycopg.Connection[Any], into: str, types: Names, rows: Rows) -> None:
    """`rows` into `into` (a table and its columns) by one binary COPY of the column `types`."""
    with (
        conn.cursor() as cur,
        cur.copy(f"COPY {into} FROM STDIN (FORMAT BINARY)".encode()) as copy,
    ):
        copy.set_types(list(types))
        for row in rows:
            copy.write_row(row)


def _spelled(query: str) -> bytes:
    """The shared SQL's `?` placeholders as psycopg's `%s` (no SQL of the store has a `?`
    of its own)."""
    return query.replace("?", "%s").encode()


def _not_text(exc: UnicodeDecodeError) -> StoreCorrupt:
    """A text column whose bytes are not UTF-8: PostgreSQL refuses such text when it is
    written, so a damaged page (or a write past the server) made them."""
    return StoreCorrupt(f"a row of the log is not valid UTF-8 text ({exc.reason}): damaged data")
