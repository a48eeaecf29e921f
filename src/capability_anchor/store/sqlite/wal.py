"""The WAL's bound for a process that serves a log: a thread that truncates it past a soft
size, and the writer's hard limit (docs/explanation/store.md, "The WAL stays bounded"). The
copying itself is SQLite's automatic checkpoint, on the writer after its commits. Durability
is unchanged: a commit is durable once its WAL frames are fsynced, before any checkpoint."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from pathlib import Path

# The bound under steady writes: the thread truncates past WAL_TRUNCATE_BYTES, the
# writer itself near WAL_LIMIT_BYTES; either waits at most WAL_WAIT_MS for readers still on
# older frames. Read when a store starts its upkeep.
WAL_LIMIT_BYTES = 64 * 2**20
WAL_TRUNCATE_BYTES = 32 * 2**20
WAL_WAIT_MS = 250


class WalUpkeep:
    """The truncating thread on a connection of its own, and the writer's hard limit: after
    each commit, when one more commit as large as its largest yet would take the WAL past
    the limit (a long read held it), the writer truncates it itself before it writes on."""

    def __init__(
        self, db: Path, conn: sqlite3.Connection, interval_s: float, write_lock: threading.Lock
    ) -> None:
        self.wal = db.with_name(db.name + "-wal")
        self.limit, self.soft = WAL_LIMIT_BYTES, WAL_TRUNCATE_BYTES
        self.commit_max = 0  # the most one commit has added, in bytes
        # One checkpoint at a time in this process (taken after the write lock, never before).
        self._checkpoint_lock = threading.Lock()
        self._stop = threading.Event()
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute(f"PRAGMA busy_timeout = {WAL_WAIT_MS}")
        self._thread = threading.Thread(
            target=self._run,
            args=(conn, interval_s, write_lock),
            name="capability-anchor-wal",
            daemon=True,
        )
        self._thread.start()

    def _run(self, conn: sqlite3.Connection, interval_s: float, write_lock: threading.Lock) -> None:
        try:
            while not self._stop.wait(interval_s):
                with contextlib.suppress(sqlite3.OperationalError):
                    if self.size() >= self.soft:
                        # The writer's lock first (the order `write` takes them in): a writer
                        # of this process that keeps committing would otherwise win SQLite's
                        # write lock back every time.
                        with write_lock, self._checkpoint_lock:
                            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def size(self) -> int:
        """The WAL's size; 0 when it is absent or cannot be read (the bound is upkeep, never a
        reason for a write to fail)."""
        try:
            return self.wal.stat().st_size
        except OSError:
            return 0

    def after_commit(self, writer: sqlite3.Connection, before: int, busy_timeout_ms: int) -> None:
        """`before`: the WAL's size when the transaction began. Only the writing thread
        waits, at most `WAL_WAIT_MS` for readers; it is no error when it cannot truncate
        (the next commit tries again)."""
        after = self.size()
        self.commit_max = max(self.commit_max, after - before)
        # A transaction larger than the limit cannot be kept under it (the /record index's
        # runs can be one): it must not make every later commit wait for a truncation.
        if after + min(self.commit_max, self.limit // 4) < self.limit:
            return
        # After a checkpoint running now: SQLite answers a second one busy at once.
        with self._checkpoint_lock, contextlib.suppress(sqlite3.Error):
            writer.execute(f"PRAGMA busy_timeout = {WAL_WAIT_MS}")
            try:
                writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                writer.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
