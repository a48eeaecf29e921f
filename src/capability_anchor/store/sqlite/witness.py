"""The witness store in SQLite (`store.witness.WitnessStore`): one connection under a lock,
WAL with `synchronous=FULL` (a cosignature is answered only once durable), `advance` under
`BEGIN IMMEDIATE`, concurrent calls sharing one transaction (docs/explanation/store.md)."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from capability_anchor.errors import Conflict, StoreError, UsageError
from capability_anchor.store.witness import (
    WITNESS_SCHEMA_VERSION,
    Cosigned,
    Step,
    WitnessedLog,
)

from .base import connect, durable, private, rollback, store_error
from .migrations import split_sql

WITNESS_DB_NAME = "witness.sqlite3"

# Version 1. Append-only: no UPDATE or DELETE on any table; a cosigned row never goes back
# in size, and never gives a size another root (the same size and root again is allowed:
# a re-cosigning of the same checkpoint).
_SCHEMA_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
CREATE TABLE logs (
    origin TEXT PRIMARY KEY,
    vkeys TEXT NOT NULL,
    added INTEGER NOT NULL
) STRICT;
CREATE TABLE cosigned (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    origin TEXT NOT NULL REFERENCES logs(origin),
    size INTEGER NOT NULL CHECK (size >= 0),
    root BLOB NOT NULL CHECK (length(root) = 32),
    checkpoint BLOB NOT NULL,
    cosignature TEXT NOT NULL,
    time INTEGER NOT NULL
);
CREATE INDEX cosigned_by_origin ON cosigned (origin, seq);
CREATE TRIGGER meta_no_update BEFORE UPDATE ON meta
BEGIN SELECT RAISE(ABORT, 'append-only: witness meta is never changed'); END;
CREATE TRIGGER meta_no_delete BEFORE DELETE ON meta
BEGIN SELECT RAISE(ABORT, 'append-only: witness meta is never deleted'); END;
CREATE TRIGGER logs_no_update BEFORE UPDATE ON logs
BEGIN SELECT RAISE(ABORT, 'append-only: a configured log is never changed'); END;
CREATE TRIGGER logs_no_delete BEFORE DELETE ON logs
BEGIN SELECT RAISE(ABORT, 'append-only: a configured log is never deleted'); END;
CREATE TRIGGER cosigned_no_update BEFORE UPDATE ON cosigned
BEGIN SELECT RAISE(ABORT, 'append-only: a cosigned checkpoint is never changed'); END;
CREATE TRIGGER cosigned_no_delete BEFORE DELETE ON cosigned
BEGIN SELECT RAISE(ABORT, 'append-only: a cosigned checkpoint is never deleted'); END;
CREATE TRIGGER cosigned_no_rollback BEFORE INSERT ON cosigned
WHEN NEW.size < COALESCE((SELECT size FROM cosigned WHERE origin = NEW.origin
                          ORDER BY seq DESC LIMIT 1), 0)
BEGIN SELECT RAISE(ABORT, 'append-only: a cosigned size never goes back'); END;
CREATE TRIGGER cosigned_one_root BEFORE INSERT ON cosigned
WHEN EXISTS (SELECT 1 FROM cosigned WHERE origin = NEW.origin AND size = NEW.size
             AND root != NEW.root)
BEGIN SELECT RAISE(ABORT, 'append-only: another root was cosigned at this size'); END;
"""

# Version 2: the monitoring endpoint names a log by the hex SHA-256 of its origin; this
# table maps it back with one index search (version 1 hashed every configured origin per
# request). One row per log, written with the log's row (`add_log`), never changed.
_SCHEMA_V2 = """
CREATE TABLE origin_hashes (
    hash TEXT PRIMARY KEY CHECK (length(hash) = 64),
    origin TEXT NOT NULL UNIQUE REFERENCES logs(origin)
) STRICT;
CREATE TRIGGER origin_hashes_no_update BEFORE UPDATE ON origin_hashes
BEGIN SELECT RAISE(ABORT, 'append-only: an origin hash is never changed'); END;
CREATE TRIGGER origin_hashes_no_delete BEFORE DELETE ON origin_hashes
BEGIN SELECT RAISE(ABORT, 'append-only: an origin hash is never deleted'); END;
"""

# Version 3: `witness update-log` replaces a log's key set (issue #21: a log's key rotation).
# The `logs` row stays as it was (append-only); each replacement is a row here, and a log's
# keys are those of its newest row, else its `logs` row. The history of its keys stays.
_SCHEMA_V3 = """
CREATE TABLE log_keys (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    origin TEXT NOT NULL REFERENCES logs(origin),
    vkeys TEXT NOT NULL CHECK (vkeys != ''),
    time INTEGER NOT NULL
);
CREATE INDEX log_keys_by_origin ON log_keys (origin, seq);
CREATE TRIGGER log_keys_no_update BEFORE UPDATE ON log_keys
BEGIN SELECT RAISE(ABORT, 'append-only: a key set is never changed'); END;
CREATE TRIGGER log_keys_no_delete BEFORE DELETE ON log_keys
BEGIN SELECT RAISE(ABORT, 'append-only: a key set is never deleted'); END;
"""

MIGRATIONS = {1: _SCHEMA_V1, 2: _SCHEMA_V2, 3: _SCHEMA_V3}
"""user_version N-1 -> N. A new version adds its step here; old ones are never edited."""


def origin_hash(origin: str) -> str:
    """A log's name on the monitoring endpoint (tlog-witness): hex SHA-256 of its origin."""
    return hashlib.sha256(origin.encode("utf-8")).hexdigest()


@dataclass
class _Pending:
    """One `advance` waiting for the group commit that holds it."""

    origin: str
    step: Step
    done: bool = False
    result: Cosigned | None = None
    error: BaseException | None = None


class SqliteWitnessStore:
    """`WitnessStore` on `<data dir>/witness.sqlite3`."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self._path = path
        self._lock = threading.Lock()
        self._queue_lock = threading.Lock()
        self._queue: list[_Pending] = []

    @classmethod
    def create(cls, data_dir: Path, name: str) -> SqliteWitnessStore:
        """A new witness database holding `name`; an existing one is a Conflict."""
        path = data_dir / WITNESS_DB_NAME
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            private(path)
        except FileExistsError:
            raise Conflict(
                f"a witness already exists at {path}; refusing to overwrite it"
            ) from None
        store = cls._connect(path)
        with store._txn("IMMEDIATE"):
            store._conn.execute("INSERT INTO meta VALUES ('name', ?)", (name,))
        return store

    @classmethod
    def open(cls, data_dir: Path) -> SqliteWitnessStore:
        path = data_dir / WITNESS_DB_NAME
        if not path.exists():
            raise StoreError(f"no witness at {data_dir} (run `witness init` first)")
        return cls._connect(path)

    @staticmethod
    def remove(data_dir: Path) -> None:
        for suffix in ("", "-wal", "-shm"):
            (data_dir / (WITNESS_DB_NAME + suffix)).unlink(missing_ok=True)

    @classmethod
    def _connect(cls, path: Path) -> SqliteWitnessStore:
        try:
            conn = connect(path)
            durable(conn)
        except sqlite3.Error as exc:
            raise store_error(exc, f"cannot open the witness store {path}") from None
        store = cls(conn, path)
        with store._txn("IMMEDIATE"):
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            if version > WITNESS_SCHEMA_VERSION:
                raise StoreError(
                    f"{path} has witness schema {version}; this version reads up to "
                    f"{WITNESS_SCHEMA_VERSION}"
                )
            for step in range(version + 1, WITNESS_SCHEMA_VERSION + 1):
                for statement in split_sql(MIGRATIONS[step]):
                    conn.execute(statement)
                if step == 2:  # the rows of version 1's logs (SQLite has no SHA-256)
                    origins = conn.execute("SELECT origin FROM logs").fetchall()
                    conn.executemany(
                        "INSERT INTO origin_hashes VALUES (?, ?)",
                        [(origin_hash(o), o) for (o,) in origins],
                    )
                conn.execute(f"PRAGMA user_version={step}")
        return store

    @contextmanager
    def _txn(self, mode: str = "DEFERRED") -> Iterator[None]:
        """One transaction under the store's lock; an error of SQLite's is the project's."""
        with self._lock:
            conn = self._conn
            try:
                conn.execute(f"BEGIN {mode}")
            except sqlite3.Error as exc:
                raise store_error(exc, "cannot start a witness transaction") from None
            try:
                yield
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise store_error(exc, "the witness store refused a write") from None
            finally:
                rollback(conn)

    # --- WitnessStore ---------------------------------------------------------------------

    def name(self) -> str:
        with self._txn():
            row = self._conn.execute("SELECT value FROM meta WHERE key = 'name'").fetchone()
        if row is None:
            raise StoreError(f"{self._path} has no witness name")
        return str(row[0])

    # A log's keys now: its newest `log_keys` row, else its `logs` row (read on every
    # request, so a running `witness serve` adopts `witness update-log` at once).
    _KEYS = (
        "COALESCE((SELECT k.vkeys FROM log_keys k WHERE k.origin = l.origin "
        "ORDER BY k.seq DESC LIMIT 1), l.vkeys)"
    )

    def log(self, origin: str) -> WitnessedLog | None:
        return self._log("logs l WHERE l.origin = ?", origin)

    def log_by_hash(self, hex_origin: str) -> WitnessedLog | None:
        return self._log(
            "origin_hashes h JOIN logs l ON l.origin = h.origin WHERE h.hash = ?", hex_origin
        )

    def _log(self, where: str, key: str) -> WitnessedLog | None:
        with self._txn():
            row = self._conn.execute(
                f"SELECT l.origin, {self._KEYS}, l.added FROM {where}", (key,)
            ).fetchone()
        return None if row is None else WitnessedLog(row[0], tuple(row[1].split("\n")), row[2])

    def _keys(self, origin: str) -> str | None:
        row = self._conn.execute(
            f"SELECT {self._KEYS} FROM logs l WHERE l.origin = ?", (origin,)
        ).fetchone()
        return None if row is None else str(row[0])

    def add_log(self, origin: str, vkeys: tuple[str, ...], added: int) -> None:
        joined = "\n".join(vkeys)
        with self._txn("IMMEDIATE"):
            keys = self._keys(origin)
            if keys is not None:
                if keys != joined:
                    raise Conflict(
                        f"log {origin} is already configured with other keys; to replace "
                        f"them (a key rotation), run `capability-anchor witness update-log "
                        f"--origin {origin} --vkey V [--vkey V ...]`"
                    )
                return
            self._conn.execute("INSERT INTO logs VALUES (?, ?, ?)", (origin, joined, added))
            self._conn.execute(
                "INSERT INTO origin_hashes VALUES (?, ?)", (origin_hash(origin), origin)
            )

    def update_log(self, origin: str, vkeys: tuple[str, ...], when: int) -> tuple[str, ...]:
        if not vkeys:
            raise UsageError("a log's key set cannot be empty")
        with self._txn("IMMEDIATE"):
            keys = self._keys(origin)
            if keys is None:
                raise UsageError(
                    f"the witness does not know the log {origin}: add it with "
                    "`capability-anchor witness add-log` first"
                )
            joined = "\n".join(vkeys)
            if keys != joined:
                self._conn.execute(
                    "INSERT INTO log_keys (origin, vkeys, time) VALUES (?, ?, ?)",
                    (origin, joined, when),
                )
        return tuple(keys.split("\n"))

    def _latest(self, origin: str) -> Cosigned | None:
        row = self._conn.execute(
            "SELECT origin, size, root, checkpoint, cosignature, time FROM cosigned "
            "WHERE origin = ? ORDER BY seq DESC LIMIT 1",
            (origin,),
        ).fetchone()
        return None if row is None else Cosigned(*row)

    def latest(self, origin: str) -> Cosigned | None:
        with self._txn():
            return self._latest(origin)

    def advance(self, origin: str, step: Step) -> Cosigned:
        """Group commit: a caller queues its step, and whoever holds the write lock next runs
        every queued step in one `BEGIN IMMEDIATE` transaction, in queue order, each seeing
        the rows of the steps before it. A commit costs one fsync, so concurrent requests
        share it; each is answered only once the commit holding its row is durable."""
        pending = _Pending(origin, step)
        with self._queue_lock:
            self._queue.append(pending)
        with self._lock:
            if not pending.done:
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                self._run(batch)
        if pending.error is not None:
            raise pending.error
        if pending.result is None:  # pragma: no cover (every path sets one)
            raise StoreError("the witness store lost a queued write")
        return pending.result

    def _run(self, batch: list[_Pending]) -> None:
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            for pending in batch:
                conn.execute("SAVEPOINT step")
                try:
                    new = pending.step(self._latest(pending.origin))
                    conn.execute(
                        "INSERT INTO cosigned (origin, size, root, checkpoint, cosignature, "
                        "time) VALUES (?, ?, ?, ?, ?, ?)",
                        (new.origin, new.size, new.root, new.checkpoint, new.cosignature, new.time),
                    )
                    pending.result = new
                except Exception as exc:  # this step's refusal only: the others go on
                    conn.execute("ROLLBACK TO step")
                    if isinstance(exc, sqlite3.Error):
                        exc = store_error(exc, "the witness store refused a write")
                    pending.error = exc
                conn.execute("RELEASE step")
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            rollback(conn)
            error = store_error(exc, "the witness store could not commit")
            for pending in batch:
                pending.result, pending.error = None, pending.error or error
        except BaseException:
            rollback(conn)
            raise
        finally:
            for pending in batch:
                pending.done = True

    def close(self) -> None:
        with self._lock:
            self._conn.close()
