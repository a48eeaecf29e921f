"""The background scrub: `PRAGMA quick_check` of the whole database now and then, on a fresh
read-only connection, at most 1% of a core, so damage no request reads is found anyway and
kept as the damage mark (docs/explanation/store.md, "Module notes")."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from capability_anchor.errors import StoreCorrupt
from capability_anchor.store import damage

from .base import BUSY_TIMEOUT_MS, DB_NAME
from .errors import store_error

SCRUB_EVERY_S = 1.0
DUTY = 0.01


class Scrubber:
    def __init__(self, data_dir: Path, every: float = SCRUB_EVERY_S) -> None:
        self.data_dir = data_dir
        self.every = every
        self._next = 0.0  # the first one at once
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self.scrubs = 0

    def due(self) -> bool:
        return time.monotonic() >= self._next

    def run_once(self) -> str | None:
        """One quick_check (in a thread): the finding if the database is damaged (it is then
        marked), else None. An interrupted or busy check finds nothing."""
        started = time.monotonic()
        finding = None
        uri = f"{(self.data_dir / DB_NAME).resolve().as_uri()}?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
        except sqlite3.Error:
            return None  # the store's own opening names what is wrong with the file
        with self._lock:
            self._conn = conn
        try:
            rows = [str(r[0]) for r in conn.execute("PRAGMA quick_check(20)").fetchall()]
            if rows != ["ok"]:
                finding = "the background scrub (PRAGMA quick_check) found: " + "; ".join(rows)
        except sqlite3.Error as exc:
            if isinstance(store_error(exc, "the scrub"), StoreCorrupt):
                finding = f"the background scrub (PRAGMA quick_check) found: {exc}"
        finally:
            with self._lock:
                self._conn = None
            conn.close()
            elapsed = time.monotonic() - started
            self._next = time.monotonic() + max(self.every, elapsed / DUTY)
            self.scrubs += 1
        if finding is not None:
            damage.mark(self.data_dir, finding)
        return finding

    def interrupt(self) -> None:
        """Stop a scrub in progress (from another thread), for a prompt shutdown."""
        with self._lock:
            if self._conn is not None:
                self._conn.interrupt()


__all__ = ["SCRUB_EVERY_S", "Scrubber"]
