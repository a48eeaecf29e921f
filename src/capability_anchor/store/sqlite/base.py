"""The SQLite engine's connections and transactions (the write discipline): `BEGIN IMMEDIATE`,
one COMMIT, WAL with `synchronous=FULL`; one writer connection per process, a reader per
thread (docs/explanation/store.md, "Module notes")."""

from __future__ import annotations

import contextlib
import mmap
import os
import shutil
import sqlite3
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from capability_anchor import errors as e
from capability_anchor.errors import CapabilityAnchorError, StoreCorrupt, StoreError
from capability_anchor.store import damage
from capability_anchor.store.interface import Store
from capability_anchor.store.sql import Dialect, Kinds, Names, Rows, classified, refused

from . import wal

DB_NAME = "log.sqlite3"  # the database, in the data dir (its -wal and -shm beside it)
BUSY_TIMEOUT_MS = 30_000
CACHE_KIB = 16 * 1024
CHECKPOINT_INTERVAL_S = 0.02
READER_CACHE_KIB = 4 * 1024
# Readers map the database (up to SQLite's default ceiling, SQLITE_MAX_MMAP_SIZE): a page is
# read from the OS page cache without a copy, so reads stay flat however large the log grows
# past the 4 MiB cache (decisions/37-record.md).
READER_MMAP_BYTES = 0x7FFF0000
PAGE_SIZE = 8192  # of a log created now; one made before keeps its own (VACUUM changes it)
# The WAL-index header (sqlite.org/walformat.html, 2.1): two 48-byte copies at the start of the
# -shm file, in the machine's byte order; version 3007000, isInit 1 once written.
_WAL_HEADER = 48
_WAL_HEADERS = 2 * _WAL_HEADER


def _wal_valid(header: bytes) -> bool:
    return int.from_bytes(header[:4], sys.byteorder) == 3007000 and header[12] == 1


DIALECT = Dialect(
    collate="",  # TEXT compares as bytes
    unlimited=-1,
    stamp_order="rowid",
    off_day="date(accepted_at, 'unixepoch') IS NOT day",  # NULL for a time it cannot date
)

_KINDS: Kinds = (
    (("SQLITE_FULL",), e.StoreFull, "the disk is full"),
    (("SQLITE_READONLY",), e.StoreReadOnly, "the database is read-only"),
    (("SQLITE_CORRUPT", "SQLITE_NOTADB"), StoreCorrupt, "the database is damaged"),
    (("SQLITE_BUSY", "SQLITE_LOCKED"), e.StoreBusy, "another writer kept the database locked"),
    (("SQLITE_IOERR", "SQLITE_CANTOPEN", "SQLITE_PERM"), e.StoreIOError, "an I/O error"),
)


def store_error(exc: sqlite3.Error, context: str) -> CapabilityAnchorError:
    """The project's error for a SQLite one, by SQLite's own error name, so that disk full,
    read-only, damaged and busy each say what they are (and HTTP and the CLI can say so)."""
    if isinstance(exc, sqlite3.IntegrityError):
        return refused(str(exc))
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    found = classified(name, _KINDS, context, str(exc))
    return found if found is not None else StoreError(f"{context}: {exc}")


def read_error(path: Path, exc: sqlite3.Error | UnicodeDecodeError) -> StoreError:
    """A reading failure as the project's error: StoreCorrupt when SQLite says the file is
    not a database or is damaged (an audit finding), StoreError otherwise (I/O, locks)."""
    if isinstance(exc, UnicodeDecodeError):
        return StoreCorrupt(f"{path} is damaged: SQLite reports text that is not UTF-8")
    name = getattr(exc, "sqlite_errorname", "")
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or "malformed" in str(exc):
        return StoreCorrupt(f"{path} is damaged: {exc}")
    return StoreError(f"cannot read the log at {path}: {exc}")


def connect(target: Path | str, *, uri: bool = False) -> sqlite3.Connection:
    """A connection as every store here opens one: no implicit transactions (each BEGIN is
    written), shared by threads behind the caller's lock, a lock waited for up to
    `BUSY_TIMEOUT_MS` (Python sets SQLite's busy timeout from `timeout`)."""
    timeout = BUSY_TIMEOUT_MS / 1000
    return sqlite3.connect(
        target, uri=uri, timeout=timeout, isolation_level=None, check_same_thread=False
    )


def durable(conn: sqlite3.Connection) -> None:
    """WAL, fsynced at every commit (FULL: an acknowledged write survives power loss, not only
    a process crash), with foreign keys enforced."""
    for pragma in ("journal_mode = WAL", "synchronous = FULL", "foreign_keys = ON"):
        conn.execute(f"PRAGMA {pragma}")


def private(path: Path) -> None:
    """Create `path` empty and 0600 before SQLite opens it: SQLite gives the -wal and -shm it
    makes later the database file's mode, so all three stay private to the owner."""
    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600))


def rollback(conn: sqlite3.Connection) -> None:
    """End what is open. SQLite may already have rolled back (disk full, I/O error): that is not
    an error of its own, and the error that got us here is the one to report."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


class SqliteBase(Store):
    """One SQLite database in a data dir.

    Connections (the write discipline): exactly one connection per process writes, and only
    inside `write()`, which holds `_write_lock` for the whole transaction. Every other read,
    on any thread, goes to that thread's own reader connection (`query_only`), so no SQLite
    connection is ever used by two threads at once, and no reader ever sees a write
    transaction's uncommitted rows (a proof or a head computed from those could outlive a
    rollback). Inside `write()` the writing thread reads through the writer connection: the
    transaction's own rows are what a head it signs must cover.
    """

    _dialect = DIALECT

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self._writer = conn
        self._write_lock = threading.Lock()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._closed = False
        self._shm: mmap.mmap | None = None  # the WAL-index headers (`change_mark`)
        # A read-only opening (the audit) has one connection, for reads on its one thread.
        self._only: sqlite3.Connection | None = None
        self._wal: wal.WalUpkeep | None = None  # upkeep only
        # Set by a read-only opening (engine.open_readonly): the file's identity when it was opened
        # as immutable, and the TEXT values read that were not UTF-8.
        self._immutable: tuple[int, int, int] | None = None
        self._invalid_text: list[bytes] = []
        # A private copy a read-only opening had to read (engine.open_readonly), removed at close.
        self._scratch: Path | None = None

    def describe(self) -> str:
        return str(self.path)

    def _failed(self, exc: sqlite3.Error, context: str) -> CapabilityAnchorError:
        """The project's error for `exc`; damage found in a log's database is also kept as
        the data dir's damage mark (`damage.py`), so that every process stops writing."""
        error = store_error(exc, context)
        if isinstance(error, StoreCorrupt) and self._only is None and self.path.name == DB_NAME:
            damage.mark(self.path.parent, f"{context}: {exc}")
        return error

    @property
    def _conn(self) -> sqlite3.Connection:
        """The connection this thread may use now: the writer inside `write()`, else its own
        reader."""
        if self._only is not None:
            return self._only
        local = self._local
        if getattr(local, "writing", False):
            return self._writer
        conn: sqlite3.Connection | None = getattr(local, "reader", None)
        if conn is None:
            conn = self._open_reader()
            local.reader = conn
        return conn

    def _open_reader(self) -> sqlite3.Connection:
        with self._readers_lock:
            if self._closed:
                raise StoreError(f"the log at {self.path} is closed")
            try:
                conn = connect(self.path)  # closed by `close()`, maybe on another thread
                conn.execute("PRAGMA query_only = ON")
                conn.execute(f"PRAGMA cache_size = -{READER_CACHE_KIB}")
                conn.execute(f"PRAGMA mmap_size = {READER_MMAP_BYTES}")
            except sqlite3.Error as exc:
                raise self._failed(exc, f"cannot open a reader of the log at {self.path}") from None
            self._readers.append(conn)
            return conn

    def _start_checkpointer(self) -> None:
        """Keep the WAL bounded from a thread of its own (`wal.py` says how and why); the
        writer's automatic checkpoint copies it back."""
        if self._wal is None:
            conn = connect(self.path)
            self._wal = wal.WalUpkeep(self.path, conn, CHECKPOINT_INTERVAL_S, self._write_lock)

    def close(self) -> None:
        if self._wal is not None:
            self._wal.stop()
            self._wal = None
        with self._readers_lock:
            self._closed = True
            readers, self._readers = self._readers, []
            if self._shm is not None:
                self._shm.close()
                self._shm = None
        for conn in readers:
            conn.close()
        self._writer.close()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    # --- transactions ----------------------------------------------------------------------

    @contextmanager
    def write(self) -> Iterator[None]:
        """One durable, atomic write transaction under SQLite's write lock.

        Durability point: when this returns, everything written inside is committed and
        fsynced. If anything inside raises, or the commit fails, the transaction is rolled
        back and the original error propagates (a failing ROLLBACK never hides it): nothing
        of it is stored. Another process holding the lock is waited for up to the busy
        timeout, then `StoreBusy`.
        """
        local = self._local
        if getattr(local, "writing", False):
            raise StoreError("a write transaction is already open on this thread")
        if self.path.name == DB_NAME:
            # Before the lock: a log some process found damaged is written to by no one.
            damage.refuse_if_damaged(self.path.parent)
        with self._write_lock:
            local.writing = True
            try:
                # A transaction left open by a failure never absorbs this one.
                rollback(self._writer)
                try:
                    self._writer.execute("BEGIN IMMEDIATE")
                except sqlite3.Error as exc:
                    raise self._failed(exc, "cannot take the log's write lock") from None
                # Under SQLite's write lock no one else can add frames or truncate.
                wal_before = 0 if self._wal is None else self._wal.size()
                try:
                    yield
                    if not self._writer.in_transaction:
                        raise StoreError("SQLite rolled the write transaction back")
                    self._writer.execute("COMMIT")
                    if self._wal is not None:
                        self._wal.after_commit(self._writer, wal_before, BUSY_TIMEOUT_MS)
                except sqlite3.Error as exc:
                    rollback(self._writer)
                    raise self._failed(exc, "the commit failed") from None
                except BaseException:
                    rollback(self._writer)
                    raise
            finally:
                local.writing = False

    @contextmanager
    def read(self) -> Iterator[None]:
        """One consistent snapshot for several reads on this thread (WAL readers never block
        writers). Inside `write()` or another `read()` it adds nothing: those are already
        one snapshot."""
        local = self._local
        if getattr(local, "writing", False) or getattr(local, "reading", False):
            yield
            return
        conn = self._conn
        try:
            conn.execute("BEGIN")
        except sqlite3.Error as exc:
            raise self._failed(exc, "cannot start a read") from None
        local.reading = True
        try:
            yield
        finally:
            local.reading = False
            with contextlib.suppress(sqlite3.Error):
                conn.execute("COMMIT")

    def change_mark(self) -> object | None:
        """The WAL-index header, both copies, as SQLite's shared memory (the `-shm` file) holds
        it: every commit, by any process, rewrites it, and reading it takes no statement, lock
        or read transaction (decisions/37-reads4.md). None inside a transaction on this thread
        (its reads may be of an older snapshot than the header), in a read-only opening, and
        while the header is being written or is not the one documented: the reader checks."""
        local = self._local
        if self._only is not None or getattr(local, "writing", False):
            return None
        if getattr(local, "reading", False):
            return None
        shm = self._shm if self._shm is not None else self._map_shm()
        if shm is None:
            return None
        header = shm[:_WAL_HEADERS]
        if header[:_WAL_HEADER] != header[_WAL_HEADER:] or not _wal_valid(header):
            return None
        return header

    def _map_shm(self) -> mmap.mmap | None:
        """The `-shm` file's headers mapped read-only, once this thread's reader has read in WAL
        mode (so SQLite holds the file open: it is neither removed nor reset, and the database
        cannot leave WAL mode, while the store is open)."""
        try:
            self._conn.execute("PRAGMA data_version").fetchone()
            (mode,) = self._conn.execute("PRAGMA journal_mode").fetchone()
        except sqlite3.Error as exc:
            raise self._failed(exc, "a statement failed") from None
        if str(mode).lower() != "wal":
            return None
        with self._readers_lock:
            if self._shm is None and not self._closed:
                try:
                    with open(f"{self.path}-shm", "rb") as f:
                        self._shm = mmap.mmap(f.fileno(), _WAL_HEADERS, access=mmap.ACCESS_READ)
                except (OSError, ValueError):
                    return None  # no WAL-index (a read-only or odd opening): no mark
            return self._shm

    def _exec(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        conn = self._checked_conn()
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self._failed(exc, "a statement failed") from None

    def _iter(self, sql: str, params: Sequence[object] = ()) -> Iterator[Any]:
        """Rows one at a time (for results too large to fetch at once)."""
        conn = self._checked_conn()
        try:
            yield from conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise self._failed(exc, "a read failed") from None

    def _insert(
        self, table: str, cols: Names, rows: Rows, *, ignore: bool = False, types: Names = ()
    ) -> None:
        """`executemany`: the append path is the hot one, and sqlite-utils' `insert_all`
        builds each chunk's SQL and converts values in Python first
        (`tools/bench_store_insert.py` measures both)."""
        sql = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
        conn = self._checked_conn()
        try:
            conn.executemany(sql + (" ON CONFLICT DO NOTHING" if ignore else ""), rows)
        except sqlite3.Error as exc:
            raise self._failed(exc, "a write failed") from None

    def _checked_conn(self) -> sqlite3.Connection:
        conn = self._conn
        if (
            conn is self._writer
            and not conn.in_transaction
            and getattr(self._local, "writing", False)
        ):
            # SQLite ended the transaction on its own (disk full, I/O error): a statement run
            # now would commit by itself, outside the batch it belongs to.
            raise StoreError("SQLite rolled the write transaction back")
        return conn
