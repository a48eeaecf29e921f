"""The SQLite store: the only module that touches SQLite (through sqlite-utils).

Contract (what is durable when a call returns):
- Writes happen only inside `write()`, which takes SQLite's write lock first
  (`BEGIN IMMEDIATE`) so the next leaf index is read under the lock, and commits once.
  When `write()` returns, everything written in it is on disk (WAL, `synchronous=FULL`):
  an acknowledged append survives power loss. If the process dies inside `write()`, none
  of it happened.
- Append-only is enforced by the database, not by this code: triggers abort every UPDATE
  and DELETE of entries, heads, tiles, stamps and keys; any insert of an entry or a head into
  a sealed day; an entry whose index is not the next one of its day; a head whose root
  differs from another head of the same day and size; and any insert that would replace a
  stored row with different content (`INSERT OR REPLACE` deletes the old row without firing
  DELETE triggers on a connection without `recursive_triggers`, so it gets its own guard).
- Several processes may open one store: writers queue on the lock (busy timeout), readers
  never block in WAL mode.

Tiles are stored when they become full (width 256, with their root, the hash one tile level
up) and, at every published head's size, the partial tiles of that size. Any tree size up
to a published head can therefore be proven from stored tiles alone; the right edge of an
unpublished tree is rebuilt from the last entries and the roots of the last full tiles.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlite_utils

from .errors import (
    CapabilityAnchorError,
    Conflict,
    StoreBusy,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreIOError,
    StoreReadOnly,
)
from .files import fsync_dir
from .merkle import TILE_HEIGHT, partial_counts

DB_NAME = "log.sqlite3"
SCHEMA_VERSION = 2
# Set by migration 2 in a log upgraded from schema 1 (a new log's meta is still empty when
# its migrations run), in the migration's own transaction: its settings are not signed yet,
# and the next open by the key-file holder signs them (logtrust.check_settings; README).
SETTINGS_UNSIGNED = "settings_unsigned"
BUSY_TIMEOUT_MS = 30_000
CACHE_KIB = 16 * 1024
CHECKPOINT_INTERVAL_S = 0.02
READER_CACHE_KIB = 4 * 1024

_IMMUTABLE = ("entries", "heads", "tiles", "stamps", "keys", "servers")

# Migration n brings user_version from n-1 to n. Never edit a shipped migration: add one.
_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
    CREATE TABLE keys (kid TEXT PRIMARY KEY, jwk TEXT NOT NULL, added INTEGER NOT NULL) STRICT;
    CREATE TABLE entries (
        day TEXT NOT NULL,
        leaf_index INTEGER NOT NULL CHECK (leaf_index >= 0),
        leaf_hash BLOB NOT NULL CHECK (length(leaf_hash) = 32),
        claims BLOB NOT NULL,
        accepted_at INTEGER NOT NULL,
        PRIMARY KEY (day, leaf_index)
    ) STRICT;
    CREATE UNIQUE INDEX entries_by_hash ON entries (leaf_hash, day);
    CREATE TABLE heads (
        day TEXT NOT NULL,
        tree_size INTEGER NOT NULL CHECK (tree_size >= 0),
        sealed INTEGER NOT NULL CHECK (sealed IN (0, 1)),
        root BLOB NOT NULL CHECK (length(root) = 32),
        iat INTEGER NOT NULL,
        kid TEXT NOT NULL,
        doc BLOB NOT NULL,
        PRIMARY KEY (day, tree_size, sealed)
    ) STRICT;
    CREATE TABLE tiles (
        day TEXT NOT NULL,
        level INTEGER NOT NULL CHECK (level >= 0),
        idx INTEGER NOT NULL CHECK (idx >= 0),
        width INTEGER NOT NULL CHECK (width BETWEEN 1 AND 256),
        hashes BLOB NOT NULL CHECK (length(hashes) = 32 * width),
        root BLOB CHECK (root IS NULL OR length(root) = 32),
        PRIMARY KEY (day, level, idx, width)
    ) STRICT;
    CREATE TABLE servers (
        key TEXT NOT NULL,
        day TEXT NOT NULL,
        leaf_index INTEGER NOT NULL,
        PRIMARY KEY (key, day, leaf_index)
    ) STRICT, WITHOUT ROWID;
    CREATE TABLE stamps (
        day TEXT NOT NULL,
        tsa TEXT NOT NULL,
        token BLOB NOT NULL,
        gen_time TEXT NOT NULL,
        added INTEGER NOT NULL,
        PRIMARY KEY (day, tsa)
    ) STRICT;
    CREATE TRIGGER entries_next_index BEFORE INSERT ON entries
    WHEN NEW.leaf_index != COALESCE(
        (SELECT max(leaf_index) FROM entries WHERE day = NEW.day), -1) + 1
    BEGIN SELECT RAISE(ABORT, 'append-only: leaf_index is not the next index of its day'); END;
    CREATE TRIGGER entries_not_sealed BEFORE INSERT ON entries
    WHEN EXISTS (SELECT 1 FROM heads WHERE day = NEW.day AND sealed = 1)
    BEGIN SELECT RAISE(ABORT, 'append-only: the day is sealed'); END;
    CREATE TRIGGER heads_not_sealed BEFORE INSERT ON heads
    WHEN EXISTS (SELECT 1 FROM heads WHERE day = NEW.day AND sealed = 1)
    BEGIN SELECT RAISE(ABORT, 'append-only: the day is sealed'); END;
    CREATE TRIGGER entries_no_replace BEFORE INSERT ON entries
    WHEN EXISTS (SELECT 1 FROM entries WHERE leaf_hash = NEW.leaf_hash AND day = NEW.day)
    BEGIN SELECT RAISE(ABORT, 'append-only: this leaf is already stored in this day'); END;
    CREATE TRIGGER heads_no_replace BEFORE INSERT ON heads
    WHEN EXISTS (SELECT 1 FROM heads WHERE day = NEW.day AND tree_size = NEW.tree_size
                 AND sealed = NEW.sealed AND doc != NEW.doc)
    BEGIN SELECT RAISE(ABORT, 'append-only: a different head of this size is stored'); END;
    CREATE TRIGGER tiles_no_replace BEFORE INSERT ON tiles
    WHEN EXISTS (SELECT 1 FROM tiles WHERE day = NEW.day AND level = NEW.level
                 AND idx = NEW.idx AND width = NEW.width
                 AND (hashes != NEW.hashes OR root IS NOT NEW.root))
    BEGIN SELECT RAISE(ABORT, 'append-only: a different tile is stored under this name'); END;
    CREATE TRIGGER stamps_no_replace BEFORE INSERT ON stamps
    WHEN EXISTS (SELECT 1 FROM stamps WHERE day = NEW.day AND tsa = NEW.tsa)
    BEGIN SELECT RAISE(ABORT, 'append-only: this TSA already stamped this day'); END;
    CREATE TRIGGER keys_no_replace BEFORE INSERT ON keys
    WHEN EXISTS (SELECT 1 FROM keys WHERE kid = NEW.kid AND jwk != NEW.jwk)
    BEGIN SELECT RAISE(ABORT, 'append-only: a different key is stored under this kid'); END;
    CREATE TRIGGER heads_same_root BEFORE INSERT ON heads
    WHEN EXISTS (SELECT 1 FROM heads
                 WHERE day = NEW.day AND tree_size = NEW.tree_size AND root != NEW.root)
    BEGIN SELECT RAISE(ABORT, 'append-only: another head of this size has another root'); END;
    """
    + "".join(
        f"""
    CREATE TRIGGER {t}_no_update BEFORE UPDATE ON {t}
    BEGIN SELECT RAISE(ABORT, 'append-only: {t} cannot be updated'); END;
    CREATE TRIGGER {t}_no_delete BEFORE DELETE ON {t}
    BEGIN SELECT RAISE(ABORT, 'append-only: {t} cannot be deleted'); END;
    """
        for t in _IMMUTABLE
    ),
    # 2: key rotation records and signed settings statements (trust.py), append-only.
    """
    CREATE TABLE key_records (
        id INTEGER PRIMARY KEY,
        signer TEXT NOT NULL,
        kid TEXT NOT NULL,
        jws TEXT NOT NULL UNIQUE,
        added INTEGER NOT NULL
    ) STRICT;
    CREATE TABLE settings (
        id INTEGER PRIMARY KEY,
        kid TEXT NOT NULL,
        jws TEXT NOT NULL,
        added INTEGER NOT NULL
    ) STRICT;
    INSERT INTO meta (key, value) SELECT 'settings_unsigned', 'upgrade'
    WHERE EXISTS (SELECT 1 FROM meta WHERE key = 'iss');
    """
    + "".join(
        f"""
    CREATE TRIGGER {t}_no_replace BEFORE INSERT ON {t}
    WHEN EXISTS (SELECT 1 FROM {t} WHERE id = NEW.id)
    BEGIN SELECT RAISE(ABORT, 'append-only: a {t} row is stored under this id'); END;
    CREATE TRIGGER {t}_no_update BEFORE UPDATE ON {t}
    BEGIN SELECT RAISE(ABORT, 'append-only: {t} cannot be updated'); END;
    CREATE TRIGGER {t}_no_delete BEFORE DELETE ON {t}
    BEGIN SELECT RAISE(ABORT, 'append-only: {t} cannot be deleted'); END;
    """
        for t in ("key_records", "settings")
    ),
)


@dataclass(frozen=True, slots=True)
class HeadRow:
    day: str
    tree_size: int
    sealed: bool
    root: bytes
    iat: int
    kid: str
    doc: bytes


@dataclass(frozen=True, slots=True)
class EntryRow:
    day: str
    leaf_index: int
    leaf_hash: bytes
    claims: bytes


@dataclass(frozen=True, slots=True)
class TileRow:
    day: str
    level: int
    index: int
    width: int
    hashes: bytes
    root: bytes | None


@dataclass(frozen=True, slots=True)
class StampRow:
    day: str
    tsa: str
    token: bytes
    gen_time: str


_HEAD_COLUMNS = "day, tree_size, sealed, root, iat, kid, doc"


def _head(row: Sequence[object]) -> HeadRow:
    day, size, sealed, root, iat, kid, doc = row
    return HeadRow(str(day), int(size), bool(sealed), bytes(root), int(iat), str(kid), bytes(doc))  # type: ignore[call-overload]


class Store:
    """One SQLite database in a data dir.

    Connections (the write discipline): exactly one connection per process writes, and only
    inside `write()`, which holds `_write_lock` for the whole transaction. Every other read,
    on any thread, goes to that thread's own reader connection (`query_only`), so no SQLite
    connection is ever used by two threads at once, and no reader ever sees a write
    transaction's uncommitted rows (a proof or a head computed from those could outlive a
    rollback). Inside `write()` the writing thread reads through the writer connection: the
    transaction's own rows are what a head it signs must cover.
    """

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self._writer = conn
        self.db = sqlite_utils.Database(conn)
        self._write_lock = threading.Lock()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._closed = False
        # A read-only opening (the audit) has one connection, for reads on its one thread.
        self._only: sqlite3.Connection | None = None
        self._checkpointer: tuple[threading.Event, threading.Thread] | None = None

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
                conn = sqlite3.connect(
                    self.path,
                    timeout=BUSY_TIMEOUT_MS / 1000,
                    isolation_level=None,
                    # Closed by `close()`, which may run on another thread.
                    check_same_thread=False,
                )
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA query_only = ON")
                conn.execute(f"PRAGMA cache_size = -{READER_CACHE_KIB}")
            except sqlite3.Error as exc:
                raise store_error(exc, f"cannot open a reader of the log at {self.path}") from None
            self._readers.append(conn)
            return conn

    # --- opening ---------------------------------------------------------------------------

    @classmethod
    def exists(cls, data_dir: Path) -> bool:
        return (data_dir / DB_NAME).exists()

    @classmethod
    def create(cls, data_dir: Path, fill: Callable[[Store], None]) -> None:
        """Create the database atomically: it is built and filled (`fill` runs inside the
        first write transaction) under a temporary name, closed, and only then linked to
        its real name. A crash at any point leaves either no log or a complete one, never
        a database without its meta."""
        path = data_dir / DB_NAME
        if path.exists():
            raise Conflict(f"a log already exists at {path}; refusing to overwrite it")
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = data_dir / f".{DB_NAME}.init"
        for leftover in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
            leftover.unlink(missing_ok=True)  # from a crashed init: it never became the log
        # Created empty and 0600 before SQLite opens it: SQLite gives the -wal and -shm it
        # makes later the database file's mode, so all three stay private to the owner.
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600))
        store = cls._connect(tmp, create=True)
        try:
            with store.write():
                fill(store)
            # Fold the WAL into the main file so the one file we link is the whole database.
            store._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            store.close()
        try:
            os.link(tmp, path)  # fails rather than replace a log created meanwhile
        except FileExistsError:
            raise Conflict(f"a log already exists at {path}; refusing to overwrite it") from None
        finally:
            tmp.unlink(missing_ok=True)
        fsync_dir(data_dir)

    @classmethod
    def open(cls, data_dir: Path) -> Store:
        path = data_dir / DB_NAME
        if not path.exists():
            raise StoreError(f"no log at {path} (run `capability-anchor init` first)")
        return cls._connect(path, create=False)

    @classmethod
    def _connect(cls, path: Path, *, create: bool) -> Store:
        conn: sqlite3.Connection | None = None
        try:
            # isolation_level=None: no implicit transactions; write() issues BEGIN IMMEDIATE.
            # check_same_thread=False: the HTTP service's worker threads share one writer
            # behind the Log's lock.
            conn = sqlite3.connect(
                path,
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
            # Look before touching: a file that is not ours is refused before any pragma
            # below could write to it (journal_mode=WAL rewrites the header).
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            cls._check_version(path, version, create=create)
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            # FULL: the WAL is fsynced at every commit, so an acknowledged append survives
            # power loss, not only a process crash.
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
            # REPLACE conflict resolution then fires the DELETE triggers too.
            conn.execute("PRAGMA recursive_triggers = ON")
            # The dedupe index is keyed by random hashes: every batch touches pages all over
            # it, so a page cache larger than the 2 MB default saves re-reading them.
            conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            store = cls(path, conn)
            store._migrate(version)
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
            raise store_error(exc, f"cannot open the log at {path}") from None
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        return store

    @staticmethod
    def _check_version(path: Path, version: int, *, create: bool) -> None:
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{path} has schema version {version}; this program knows up to "
                f"{SCHEMA_VERSION} (upgrade capability-anchor)"
            )
        if version == 0 and not create:
            raise StoreError(f"{path} is not a capability-anchor log (schema version 0)")

    def _migrate(self, version: int) -> None:
        if version == SCHEMA_VERSION:
            return
        with self.write():
            for n in range(version, SCHEMA_VERSION):
                for statement in _split_sql(_MIGRATIONS[n]):
                    self._exec(statement)
            self._exec(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def start_checkpointer(self) -> None:
        """Copy the WAL back into the database from a thread of its own.

        Every commit dirties pages all over the dedupe index; SQLite's automatic checkpoint
        would then copy them back on the appending thread, doubling each commit's I/O. A
        passive checkpoint on another connection does that work beside the writer (sqlite3
        releases the GIL) and never blocks readers or writers. Durability is unchanged: a
        commit is durable once its WAL frames are fsynced, before any checkpoint.
        """
        if self._checkpointer is not None:
            return
        stop = threading.Event()
        conn = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
        conn.execute("PRAGMA synchronous = FULL")

        def run() -> None:
            try:
                while not stop.wait(CHECKPOINT_INTERVAL_S):
                    with contextlib.suppress(sqlite3.OperationalError):
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            finally:
                conn.close()

        thread = threading.Thread(target=run, name="capability-anchor-wal", daemon=True)
        thread.start()
        self._checkpointer = (stop, thread)
        # The writer's own automatic checkpoints become a rarely needed safety net.
        self._writer.execute("PRAGMA wal_autocheckpoint = 100000")

    def close(self) -> None:
        if self._checkpointer is not None:
            stop, thread = self._checkpointer
            stop.set()
            thread.join()
            self._checkpointer = None
        with self._readers_lock:
            self._closed = True
            readers, self._readers = self._readers, []
        for conn in readers:
            conn.close()
        self._writer.close()

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
        with self._write_lock:
            local.writing = True
            try:
                self._rollback()  # a transaction left open by a failure never absorbs this one
                try:
                    self._writer.execute("BEGIN IMMEDIATE")
                except sqlite3.Error as exc:
                    raise store_error(exc, "cannot take the log's write lock") from None
                try:
                    yield
                    if not self._writer.in_transaction:
                        raise StoreError("SQLite rolled the write transaction back")
                    self._writer.execute("COMMIT")
                except sqlite3.Error as exc:
                    self._rollback()
                    raise store_error(exc, "the commit failed") from None
                except BaseException:
                    self._rollback()
                    raise
            finally:
                local.writing = False

    def _rollback(self) -> None:
        if self._writer.in_transaction:
            # SQLite may already have rolled back (disk full, I/O error): that is not an error
            # of its own, and the error that got us here is the one to report.
            with contextlib.suppress(sqlite3.Error):
                self._writer.execute("ROLLBACK")

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
            raise store_error(exc, "cannot start a read") from None
        local.reading = True
        try:
            yield
        finally:
            local.reading = False
            with contextlib.suppress(sqlite3.Error):
                conn.execute("COMMIT")

    def _exec(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        conn = self._checked_conn()
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise store_error(exc, "a statement failed") from None

    def _one(self, sql: str, params: Sequence[object] = ()) -> Any:
        rows = self._exec(sql, params)
        return rows[0] if rows else None

    def _iter(self, sql: str, params: Sequence[object] = ()) -> Iterator[Any]:
        """Rows one at a time (for results too large to fetch at once)."""
        conn = self._checked_conn()
        try:
            yield from conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise store_error(exc, "a read failed") from None

    def _execmany(self, sql: str, rows: Iterable[Sequence[object]]) -> None:
        conn = self._checked_conn()
        try:
            conn.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise store_error(exc, "a write failed") from None

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

    # --- meta and keys ---------------------------------------------------------------------

    def set_meta(self, key: str, value: str) -> None:
        self._exec("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def meta(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self._exec("SELECT key, value FROM meta")}

    def add_key(self, kid: str, jwk_json: str, added: int) -> None:
        self._exec(
            "INSERT OR IGNORE INTO keys (kid, jwk, added) VALUES (?, ?, ?)", (kid, jwk_json, added)
        )

    def signing_keys(self) -> list[tuple[str, str]]:
        return [(str(k), str(j)) for k, j in self._exec("SELECT kid, jwk FROM keys ORDER BY kid")]

    # --- entries ---------------------------------------------------------------------------

    def day_size(self, day: str) -> int:
        row = self._one("SELECT max(leaf_index) FROM entries WHERE day = ?", (day,))
        return 0 if row[0] is None else int(row[0]) + 1

    def existing(self, day: str, leaf_hashes: Sequence[bytes]) -> dict[bytes, int]:
        """Leaf indices of those hashes already stored in `day` (dedupe)."""
        found: dict[bytes, int] = {}
        for start in range(0, len(leaf_hashes), 500):
            chunk = leaf_hashes[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for h, i in self._exec(
                "SELECT leaf_hash, leaf_index FROM entries "
                f"WHERE day = ? AND leaf_hash IN ({marks})",
                (day, *chunk),
            ):
                found[bytes(h)] = int(i)
        return found

    def insert_entries(
        self, day: str, first_index: int, rows: Sequence[tuple[bytes, bytes]], accepted_at: int
    ) -> None:
        self._execmany(
            "INSERT INTO entries (day, leaf_index, leaf_hash, claims, accepted_at) "
            "VALUES (?, ?, ?, ?, ?)",
            ((day, first_index + n, h, claims, accepted_at) for n, (h, claims) in enumerate(rows)),
        )

    def insert_servers(self, day: str, rows: Iterable[tuple[str, int]]) -> None:
        """Index server records by `sub:<id>` and `url:<canonical url>` for `/record`."""
        self._execmany(
            "INSERT OR IGNORE INTO servers (key, day, leaf_index) VALUES (?, ?, ?)",
            ((key, day, index) for key, index in rows),
        )

    def iter_servers(self, day: str) -> Iterator[tuple[int, str]]:
        """(leaf_index, key) of a day's server index, in index order (for the audit)."""
        for index, key in self._iter(
            "SELECT leaf_index, key FROM servers WHERE day = ? ORDER BY leaf_index, key", (day,)
        ):
            yield int(index), str(key)

    def server_entries(self, key: str, limit: int = 50) -> list[tuple[str, int]]:
        """(day, leaf_index) of a server's entries, newest first."""
        return [
            (str(d), int(i))
            for d, i in self._exec(
                "SELECT day, leaf_index FROM servers WHERE key = ? "
                "ORDER BY day DESC, leaf_index DESC LIMIT ?",
                (key, limit),
            )
        ]

    def leaf_hashes(self, day: str, start: int, end: int) -> list[bytes]:
        return [
            bytes(h)
            for (h,) in self._exec(
                "SELECT leaf_hash FROM entries WHERE day = ? AND leaf_index >= ? "
                "AND leaf_index < ? ORDER BY leaf_index",
                (day, start, end),
            )
        ]

    def entries(self, day: str, start: int, limit: int) -> list[EntryRow]:
        return [
            EntryRow(day, int(i), bytes(h), bytes(c))
            for i, h, c in self._exec(
                "SELECT leaf_index, leaf_hash, claims FROM entries WHERE day = ? "
                "AND leaf_index >= ? ORDER BY leaf_index LIMIT ?",
                (day, start, limit),
            )
        ]

    def entry(self, day: str, leaf_index: int) -> EntryRow | None:
        rows = self.entries(day, leaf_index, 1)
        return rows[0] if rows and rows[0].leaf_index == leaf_index else None

    def find_leaf(self, leaf_hash: bytes) -> list[tuple[str, int]]:
        """Every (day, leaf_index) holding this leaf hash, newest day first."""
        return [
            (str(d), int(i))
            for d, i in self._exec(
                "SELECT day, leaf_index FROM entries WHERE leaf_hash = ? ORDER BY day DESC",
                (leaf_hash,),
            )
        ]

    def entry_days(self) -> list[str]:
        return [str(d) for (d,) in self._exec("SELECT DISTINCT day FROM entries ORDER BY day")]

    def iter_entries(self, day: str, chunk: int = 10_000) -> Iterator[EntryRow]:
        start = 0
        while True:
            # Paged by the primary key: each page is a fresh query, so a long audit does not
            # hold one read transaction open for minutes.
            rows = self._exec(
                "SELECT leaf_index, leaf_hash, claims FROM entries WHERE day = ? "
                "AND leaf_index >= ? ORDER BY leaf_index LIMIT ?",
                (day, start, chunk),
            )
            for i, h, c in rows:
                yield EntryRow(day, int(i), bytes(h), bytes(c))
            if len(rows) < chunk:
                return
            start = int(rows[-1][0]) + 1

    # --- tiles -----------------------------------------------------------------------------

    def insert_tiles(
        self, day: str, rows: Iterable[tuple[int, int, int, bytes, bytes | None]]
    ) -> None:
        """Insert tiles (level, index, width, hashes, root); an identical one already stored is
        left alone (tiles are deterministic from the entries)."""
        self._execmany(
            "INSERT INTO tiles (day, level, idx, width, hashes, root) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            ((day, level, idx, width, hashes, root) for level, idx, width, hashes, root in rows),
        )

    def tile(self, day: str, level: int, index: int, min_width: int) -> bytes | None:
        """The narrowest stored version of a tile that holds at least `min_width` hashes."""
        row = self._one(
            "SELECT hashes FROM tiles WHERE day = ? AND level = ? AND idx = ? AND width >= ? "
            "ORDER BY width LIMIT 1",
            (day, level, index, min_width),
        )
        return None if row is None else bytes(row[0])

    def full_tile_roots(self, day: str, level: int, first: int, count: int) -> list[bytes]:
        return [
            bytes(r)
            for (r,) in self._exec(
                "SELECT root FROM tiles WHERE day = ? AND level = ? AND width = 256 "
                "AND idx >= ? AND idx < ? ORDER BY idx",
                (day, level, first, first + count),
            )
        ]

    def edge_partials(self, day: str, size: int) -> list[bytes]:
        """The partial tile of each level at tree `size`, rebuilt from stored data."""
        partials: list[bytes] = []
        for level, count in enumerate(partial_counts(size)):
            if count == 0:
                partials.append(b"")
                continue
            at_level = size >> (TILE_HEIGHT * level)
            first = at_level - count  # index of the first hash of the partial tile
            if level == 0:
                hashes = self.leaf_hashes(day, first, at_level)
            else:
                hashes = self.full_tile_roots(day, level - 1, first, count)
            if len(hashes) != count:
                raise StoreError(
                    f"day {day}: level {level} of the tree at size {size} needs {count} "
                    f"hashes, the store has {len(hashes)} (missing entries or tiles)"
                )
            partials.append(b"".join(hashes))
        return partials

    def iter_tiles(self, day: str) -> Iterator[TileRow]:
        for level, idx, width, hashes, root in self._iter(
            "SELECT level, idx, width, hashes, root FROM tiles WHERE day = ? "
            "ORDER BY level, idx, width",
            (day,),
        ):
            yield TileRow(
                day,
                int(level),
                int(idx),
                int(width),
                bytes(hashes),
                None if root is None else bytes(root),
            )

    # --- heads -----------------------------------------------------------------------------

    def insert_head(self, head: HeadRow) -> None:
        self._exec(
            f"INSERT INTO heads ({_HEAD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (head.day, head.tree_size, int(head.sealed), head.root, head.iat, head.kid, head.doc),
        )

    def _heads(
        self, where: str, params: Sequence[object], order: str, limit: int | None = None
    ) -> list[HeadRow]:
        sql = f"SELECT {_HEAD_COLUMNS} FROM heads WHERE {where} ORDER BY {order}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [_head(r) for r in self._exec(sql, params)]

    def heads(self, day: str) -> list[HeadRow]:
        return self._heads("day = ?", (day,), "tree_size, sealed")

    def all_heads(self) -> list[HeadRow]:
        return self._heads("1", (), "day, tree_size, sealed")

    def head(self, day: str, tree_size: int, sealed: bool) -> HeadRow | None:
        rows = self._heads(
            "day = ? AND tree_size = ? AND sealed = ?", (day, tree_size, int(sealed)), "day"
        )
        return rows[0] if rows else None

    def sealed_head(self, day: str) -> HeadRow | None:
        rows = self._heads("day = ? AND sealed = 1", (day,), "day")
        return rows[0] if rows else None

    def newest_head(self, day: str) -> HeadRow | None:
        """The sealed head of the day, else its largest unsealed head."""
        rows = self._heads("day = ?", (day,), "sealed DESC, tree_size DESC", 1)
        return rows[0] if rows else None

    def newest_unsealed(self, day: str) -> HeadRow | None:
        rows = self._heads("day = ? AND sealed = 0", (day,), "tree_size DESC", 1)
        return rows[0] if rows else None

    def sealed_heads(self, before: str | None = None, limit: int | None = None) -> list[HeadRow]:
        """Sealed heads, newest day first, optionally only days before `before`."""
        if before is None:
            return self._heads("sealed = 1", (), "day DESC", limit)
        return self._heads("sealed = 1 AND day < ?", (before,), "day DESC", limit)

    def last_sealed_day(self) -> str | None:
        row = self._one("SELECT max(day) FROM heads WHERE sealed = 1")
        return None if row[0] is None else str(row[0])

    def newest_published(self) -> HeadRow | None:
        rows = self._heads("1", (), "day DESC, sealed DESC, tree_size DESC", 1)
        return rows[0] if rows else None

    def newest_covering(self, day: str, leaf_index: int) -> HeadRow | None:
        """The newest head of `day` that covers `leaf_index`, if any."""
        rows = self._heads(
            "day = ? AND tree_size > ?", (day, leaf_index), "sealed DESC, tree_size DESC", 1
        )
        return rows[0] if rows else None

    # --- stamps ----------------------------------------------------------------------------

    def insert_stamp(self, stamp: StampRow, added: int) -> None:
        self._exec(
            "INSERT INTO stamps (day, tsa, token, gen_time, added) VALUES (?, ?, ?, ?, ?)",
            (stamp.day, stamp.tsa, stamp.token, stamp.gen_time, added),
        )

    def stamps(self, day: str) -> list[StampRow]:
        """Stamps of a day in the order they were stored: the first is "the earliest stored"
        (SPEC §6), which no later stamp can displace, whatever its genTime."""
        return [
            StampRow(str(d), str(t), bytes(tok), str(g))
            for d, t, tok, g in self._exec(
                "SELECT day, tsa, token, gen_time FROM stamps WHERE day = ? ORDER BY rowid",
                (day,),
            )
        ]

    # --- raw access, for tests that play the attacker ---------------------------------------

    def execute_raw(self, sql: str, params: Sequence[object] = ()) -> list[tuple[object, ...]]:
        """Run SQL as given, on the writer connection in autocommit. Only tests use this, to
        show the triggers firing and to tamper with a copy the way an attacker with file access
        would."""
        with self._write_lock:
            try:
                return [tuple(r) for r in self._writer.execute(sql, params).fetchall()]
            except sqlite3.Error as exc:
                raise store_error(exc, "raw SQL failed") from None

    # --- key trust: rotation records and signed settings (trust.py, logtrust.py) -------------

    def clear_meta(self, key: str) -> None:
        self._exec("DELETE FROM meta WHERE key = ?", (key,))

    def add_key_record(self, signer: str, kid: str, token: str, added: int) -> None:
        self._exec(
            "INSERT INTO key_records (signer, kid, jws, added) VALUES (?, ?, ?, ?)",
            (signer, kid, token, added),
        )

    def key_records(self) -> list[tuple[int, str, str, str]]:
        """(id, signer kid, endorsed kid, compact JWS) of every rotation record, in order."""
        return [
            (int(i), str(s), str(k), str(j))
            for i, s, k, j in self._exec("SELECT id, signer, kid, jws FROM key_records ORDER BY id")
        ]

    def add_settings(self, kid: str, token: str, added: int) -> None:
        self._exec("INSERT INTO settings (kid, jws, added) VALUES (?, ?, ?)", (kid, token, added))

    def settings_statements(self) -> list[tuple[int, str, str]]:
        """(id, signer kid, compact JWS) of every settings statement, oldest first."""
        return [
            (int(i), str(k), str(j))
            for i, k, j in self._exec("SELECT id, kid, jws FROM settings ORDER BY id")
        ]

    def added_times(self) -> dict[str, dict[int, int]]:
        """`added` of every settings statement and rotation record, by table and id."""
        return {
            table: {int(i): int(a) for i, a in self._exec(f"SELECT id, added FROM {table}")}
            for table in ("settings", "key_records")
        }

    # --- the audit: read-only opening, one snapshot, SQLite's structures ----------------------
    # (engineer "audit": everything below serves `capability_anchor.auditdb`; nothing here
    # writes, and nothing else calls it.)

    @classmethod
    def open_readonly(cls, data_dir: Path, scratch: Path) -> Store:
        """Open the log for reading only, never creating or changing a file in `data_dir`.

        - a `-shm` exists (a process has the log open, or a copy kept it): `mode=ro` shares
          its lock table, so the snapshot is one the writers respect;
        - no `-shm` and no WAL frames (no process has the log open): `immutable=1`, which
          reads the main file alone and needs no lock file;
        - WAL frames but no `-shm` (a copy without it, in a folder we cannot write):
          `immutable=1` would silently skip the frames, so the database and its WAL are
          copied into `scratch` (a private temporary folder) and read there.
        """
        path = data_dir / DB_NAME
        if not path.exists():
            raise StoreError(f"no log at {path} (run `capability-anchor init` first)")
        wal = path.with_name(DB_NAME + "-wal")
        shm = path.with_name(DB_NAME + "-shm")
        wal_size = wal.stat().st_size if wal.exists() else 0
        immutable: tuple[int, int, int] | None = None
        if shm.exists():
            uri = f"{path.resolve().as_uri()}?mode=ro"
        elif wal_size == 0:
            uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
            st = path.stat()
            immutable = (st.st_ino, st.st_size, st.st_mtime_ns)
        else:
            import shutil

            copy = scratch / DB_NAME
            shutil.copyfile(path, copy)
            shutil.copyfile(wal, copy.with_name(DB_NAME + "-wal"))
            uri = f"{copy.resolve().as_uri()}?mode=ro"
        conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(
                uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None
            )
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{path} has schema version {version}; this program knows up to "
                    f"{SCHEMA_VERSION} (upgrade capability-anchor)"
                )
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            if conn is not None:
                conn.close()
            raise _read_error(path, exc) from None
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        store = cls(path, conn)
        store._only = conn
        store._immutable = immutable
        # SQLite hands back a TEXT value's bytes as stored; one that is not UTF-8 (a flipped
        # bit) would raise in the middle of any read. It is read with its bad bytes escaped
        # (so it equals nothing it should) and counted for the audit.
        bad = store._invalid_text = []

        def text(raw: bytes) -> str:
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError:
                bad.append(raw[:80])
                return raw.decode("utf-8", "backslashreplace")

        conn.text_factory = text
        return store

    def _raw(self, sql: str, params: Sequence[object] = ()) -> sqlite3.Cursor:
        """A statement on the read-only connection with SQLite's own errors: the audit reads
        damage as findings, so it wants them as SQLite reports them (`_read_error`)."""
        return self._conn.execute(sql, params)

    _invalid_text: list[bytes]
    _immutable: tuple[int, int, int] | None = None

    def check_unchanged(self) -> None:
        """After reading a file opened as immutable (nothing had the log open): a process
        that opened it meanwhile may have checkpointed into it under our reads, and then
        nothing read can be trusted to be one moment of the log."""
        if self._immutable is None:
            return
        st = self.path.stat()
        if (st.st_ino, st.st_size, st.st_mtime_ns) != self._immutable:
            raise StoreError(
                f"{self.path} changed while it was read as a file nothing had open (a process "
                "opened the log during the audit): run the audit again"
            )

    def invalid_text(self) -> list[bytes]:
        """TEXT values read so far that were not UTF-8 (only on a read-only opening)."""
        return list(getattr(self, "_invalid_text", ()))

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction around everything inside (a WAL snapshot: concurrent commits
        are invisible to it), with every SQLite error raised inside as a StoreError
        (StoreCorrupt when SQLite says the file is damaged)."""
        try:
            self._conn.execute("BEGIN")
            # A deferred BEGIN takes its snapshot at the first read: take it now.
            self._conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            raise _read_error(self.path, exc) from None
        try:
            yield
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            # UnicodeDecodeError: Python cannot even decode SQLite's message (it quotes a
            # damaged name from the schema).
            raise _read_error(self.path, exc) from None
        finally:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")

    def user_version(self) -> int:
        return int(self._raw("PRAGMA user_version").fetchone()[0])

    def integrity_problems(self) -> list[str]:
        """`PRAGMA integrity_check`: every b-tree, every index against its table, free pages,
        NOT NULL and CHECK constraints. Empty when SQLite finds nothing wrong."""
        try:
            rows = [str(r[0]) for r in self._raw("PRAGMA integrity_check(1000)")]
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            # Some damage (a zeroed page) stops the whole check at once: then each table is
            # checked with its indexes on its own, so the report still names where it is.
            if not isinstance(_read_error(self.path, exc), StoreCorrupt):
                raise
            rows = []
            tables = self._raw("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
            for (name,) in tables:
                try:
                    found = [
                        str(r[0]) for r in self._raw(f"PRAGMA integrity_check({_quoted(name)})")
                    ]
                except (sqlite3.DatabaseError, UnicodeDecodeError) as inner:
                    found = [str(inner)]
                if found != ["ok"]:
                    rows += [f"table {name} or one of its indexes: {line}" for line in found]
            return rows or [f"stopped, and no table checked alone names the damage: {exc}"]
        if rows == ["ok"]:
            return []
        # One problem a line; the first line of such a report names the database only.
        lines = [line for row in rows for line in row.splitlines()]
        return [line for line in lines if line != "*** in database main ***"]

    def page_owners(self, pages: Iterable[int]) -> dict[int, str]:
        """Which table or index each page belongs to (`dbstat`), for naming damage that
        integrity_check reports by page; empty where that cannot be read."""
        owners: dict[int, str] = {}
        for page in pages:
            try:
                row = self._raw("SELECT name FROM dbstat WHERE pageno = ?", (page,)).fetchone()
            except (sqlite3.Error, UnicodeDecodeError):
                return owners  # no dbstat, or the damage stops it too
            if row is not None:
                owners[page] = str(row[0])
        return owners

    def schema(self) -> list[tuple[str, str, str, str | None]]:
        """(type, name, tbl_name, sql) of every schema object, by name."""
        return [
            (str(t), str(n), str(tb), None if s is None else str(s))
            for t, n, tb, s in self._raw(
                "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name"
            )
        ]

    @staticmethod
    def expected_schema(version: int) -> list[tuple[str, str, str, str | None]]:
        """What `schema()` must return at schema `version`: the migrations up to it, applied
        to an empty in-memory database (a migration added later is covered by itself)."""
        if not 0 <= version <= SCHEMA_VERSION:
            raise StoreError(f"no schema version {version}")
        conn = sqlite3.connect(":memory:", isolation_level=None)
        try:
            for n in range(version):
                for statement in _split_sql(_MIGRATIONS[n]):
                    conn.execute(statement)
            store = Store(Path(":memory:"), conn)
            store._only = conn
            return store.schema()
        finally:
            conn.close()

    def index_mismatches(self) -> list[str]:
        """Every index of a rowid table re-derived from its table: each row (read by a table
        scan, NOT INDEXED) must be found through the index (INDEXED BY) with the same
        columns and rowid, and the index must hold no more entries than the table has rows.
        A WITHOUT ROWID table is its primary key's b-tree: every row a scan finds must also
        be found by a seek on that key (what `/record` lookups do)."""
        problems: list[str] = []
        for name, table in self._raw(
            "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' ORDER BY name"
        ).fetchall():
            columns = [str(r[2]) for r in self._raw(f"PRAGMA index_info({_quoted(name)})")]
            if not columns or any(c == "None" for c in columns):
                continue  # an expression index: none in the schema, flagged there if added
            t, i = _quoted(table), _quoted(name)
            same = " AND ".join(f"i.{_quoted(c)} IS t.{_quoted(c)}" for c in columns)
            missing_sql = (
                f"SELECT count(*) FROM {t} AS t NOT INDEXED WHERE NOT EXISTS "
                f"(SELECT 1 FROM {t} AS i INDEXED BY {i} WHERE {same} AND i.rowid = t.rowid)"
            )
            # count(*) would be answered from whichever b-tree is smallest, whatever INDEXED
            # BY says; counting a column read from the index makes SQLite walk this one.
            entries_sql = (
                f"SELECT count(i.{_quoted(columns[0])} IS NULL) FROM {t} AS i INDEXED BY {i}"
            )
            for query in (missing_sql, entries_sql):
                plan = " ".join(str(r[-1]) for r in self._raw(f"EXPLAIN QUERY PLAN {query}"))
                if f"INDEX {name}" not in plan:
                    raise StoreError(f"SQLite will not read index {name} for the audit: {plan}")
            (missing,) = self._raw(missing_sql).fetchone()
            (rows,) = self._raw(f"SELECT count(*) FROM {t} NOT INDEXED").fetchone()
            (entries,) = self._raw(entries_sql).fetchone()
            if missing:
                problems.append(
                    f"index {name}: {missing} row(s) of {table} are not found through it"
                )
            if entries != rows:
                problems.append(f"index {name} holds {entries} entries, {table} has {rows} rows")
        for (table,) in self._raw(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%WITHOUT ROWID%'"
        ).fetchall():
            info = self._raw(f"PRAGMA table_info({_quoted(table)})").fetchall()
            key = [
                str(r[1]) for r in sorted((r for r in info if int(r[5]) > 0), key=lambda r: r[5])
            ]
            t = _quoted(table)
            same = " AND ".join(f"s.{_quoted(c)} = t.{_quoted(c)}" for c in key)
            (missing,) = self._raw(
                f"SELECT count(*) FROM {t} AS t WHERE NOT EXISTS "
                f"(SELECT 1 FROM {t} AS s WHERE {same})"
            ).fetchone()
            if missing:
                problems.append(
                    f"table {table}: {missing} row(s) found by a scan are not found by key"
                )
        return problems

    def entries_accepted_off_day(self) -> list[tuple[str, int, int]]:
        """(day, leaf_index, accepted_at) of every entry whose accepted_at is not a time on
        its UTC day (`date(.., 'unixepoch')` is the day `log.utc_day` gives; NULL, so
        reported, for a time SQLite cannot date)."""
        return [
            (str(d), int(i), int(a))
            for d, i, a in self._raw(
                "SELECT day, leaf_index, accepted_at FROM entries "
                "WHERE date(accepted_at, 'unixepoch') IS NOT day ORDER BY day, leaf_index"
            )
        ]

    def stamp_rows(self) -> list[tuple[str, str, bytes, int]]:
        """(day, tsa, token, added) of every stamp, in the order they were stored."""
        return [
            (str(d), str(t), bytes(tok), int(a))
            for d, t, tok, a in self._raw(
                "SELECT day, tsa, token, added FROM stamps ORDER BY rowid"
            )
        ]


def store_error(exc: sqlite3.Error, context: str) -> CapabilityAnchorError:
    """The project's error for a SQLite one, by SQLite's own error name, so that disk full,
    read-only, damaged and busy each say what they are (and HTTP and the CLI can say so)."""
    if isinstance(exc, sqlite3.IntegrityError):
        return _integrity(exc)
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    kinds: tuple[tuple[tuple[str, ...], type[StoreError], str], ...] = (
        (("SQLITE_FULL",), StoreFull, "the disk is full"),
        (("SQLITE_READONLY",), StoreReadOnly, "the database is read-only"),
        (("SQLITE_CORRUPT", "SQLITE_NOTADB"), StoreCorrupt, "the database is damaged"),
        (("SQLITE_BUSY", "SQLITE_LOCKED"), StoreBusy, "another writer kept the database locked"),
        (("SQLITE_IOERR", "SQLITE_CANTOPEN", "SQLITE_PERM"), StoreIOError, "an I/O error"),
    )
    for prefixes, cls, what in kinds:
        if name.startswith(prefixes):
            return cls(f"{context}: {what}: {exc}")
    return StoreError(f"{context}: {exc}")


def _integrity(exc: sqlite3.IntegrityError) -> CapabilityAnchorError:
    message = str(exc)
    if "append-only" in message:
        return Conflict(message)
    return StoreError(f"the store refused a write: {message}")


def _quoted(name: object) -> str:
    return '"' + str(name).replace('"', '""') + '"'


def _read_error(path: Path, exc: sqlite3.Error | UnicodeDecodeError) -> StoreError:
    """A reading failure as the project's error: StoreCorrupt when SQLite says the file is
    not a database or is damaged (an audit finding), StoreError otherwise (I/O, locks)."""
    if isinstance(exc, UnicodeDecodeError):
        return StoreCorrupt(f"{path} is damaged: SQLite reports text that is not UTF-8")
    name = getattr(exc, "sqlite_errorname", "")
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or "malformed" in str(exc):
        return StoreCorrupt(f"{path} is damaged: {exc}")
    return StoreError(f"cannot read the log at {path}: {exc}")


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements (SQLite's own parser decides where one ends, so
    the `;` inside a trigger's BEGIN ... END does not)."""
    statements: list[str] = []
    current = ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip():
        raise StoreError(f"incomplete statement in a migration: {current.strip()[:60]}")
    return statements


__all__ = [
    "DB_NAME",
    "EntryRow",
    "HeadRow",
    "StampRow",
    "Store",
    "TileRow",
]
