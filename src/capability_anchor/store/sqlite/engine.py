"""The SQLite engine as `store.open` reaches it (`sqlite://` and every plain data dir): one
database file in the data dir (`DB_NAME`, with its -wal and -shm while it is open), created
atomically, opened (and migrated) or opened read-only."""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit

from capability_anchor.errors import Conflict, StoreCorrupt, StoreError, UsageError
from capability_anchor.files import fsync_dir
from capability_anchor.store import damage
from capability_anchor.store.engines import Engine, Where
from capability_anchor.store.interface import Scrub, Store
from capability_anchor.store.rows import SCHEMA_VERSION

from . import SqliteStore
from .base import CACHE_KIB, DB_NAME, PAGE_SIZE, connect, durable, private, read_error, store_error
from .schema import migrate

_SIDE = ("-wal", "-shm")
# The background scrub: `PRAGMA quick_check` of the whole database now and then, on a fresh
# read-only connection, at most 1% of a core, so damage no request reads is found anyway and
# kept as the damage mark (docs/explanation/store.md, "Module notes").
SCRUB_EVERY_S = 1.0
DUTY = 0.01


class Scrubber:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._next = 0.0  # the first one at once
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def due(self) -> bool:
        return time.monotonic() >= self._next

    def run_once(self) -> str | None:
        """One quick_check (in a thread): the finding if the database is damaged (it is then
        marked), else None. An interrupted or busy check finds nothing."""
        started = time.monotonic()
        finding = None
        uri = f"{(self.data_dir / DB_NAME).resolve().as_uri()}?mode=ro"
        try:
            conn = connect(uri, uri=True)
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
            self._next = time.monotonic() + max(SCRUB_EVERY_S, elapsed / DUTY)
        if finding is not None:
            damage.mark(self.data_dir, finding)
        return finding

    def interrupt(self) -> None:
        """Stop a scrub in progress (from another thread), for a prompt shutdown."""
        with self._lock:
            if self._conn is not None:
                self._conn.interrupt()


def _dir(where: Where) -> Path:
    if not isinstance(where, Path):
        raise UsageError(f"the SQLite engine is given a data dir, not {where!r}")
    return where


def _log(where: Where, missing: str = "run `capability-anchor init` first") -> Path:
    """The log's database; StoreError when there is none."""
    path = _dir(where) / DB_NAME
    if not path.exists():
        raise StoreError(f"no log at {path} ({missing})")
    return path


def _known(path: Path, version: int) -> None:
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path} has schema version {version}; this program knows up to "
            f"{SCHEMA_VERSION} (upgrade capability-anchor)"
        )


class SqliteEngine(Engine):
    scheme = "sqlite"

    def location(self, where: Where) -> Where:
        if isinstance(where, Path):
            return where
        parts = urlsplit(where)
        path = unquote(parts.path)
        if parts.scheme.lower() != "sqlite" or parts.netloc or not path.startswith("/"):
            raise UsageError(
                f"{where}: a SQLite store is named sqlite:///ABSOLUTE/DATA/DIR (or by the "
                "data dir's path)"
            )
        if parts.query or parts.fragment:
            raise UsageError(f"{where}: a sqlite:// URL takes no query or fragment")
        return Path(path)

    def exists(self, where: Where) -> bool:
        return (_dir(where) / DB_NAME).exists()

    def create(self, where: Where, fill: Callable[[Store], None]) -> None:
        """Create the database atomically: it is built and filled (`fill` runs inside the
        first write transaction) under a temporary name, closed, and only then linked to
        its real name. A crash at any point leaves either no log or a complete one, never
        a database without its meta."""
        data_dir = _dir(where)
        path = data_dir / DB_NAME
        if path.exists():
            raise Conflict(f"a log already exists at {path}; refusing to overwrite it")
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = data_dir / f".{DB_NAME}.init"
        for leftover in (tmp, *(tmp.with_name(tmp.name + side) for side in _SIDE)):
            leftover.unlink(missing_ok=True)  # from a crashed init: it never became the log
        private(tmp)
        store = _connect(tmp, create=True)
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

    def open(self, where: Where, *, upkeep: bool) -> Store:
        path = _log(where)
        store = _connect(path, create=False)
        if upkeep:
            try:
                store._start_checkpointer()
            except BaseException:
                store.close()
                raise
        return store

    def open_readonly(self, where: Where) -> Store:
        """Open the log for reading only, never creating or changing a file in the data dir.

        - a `-shm` exists (a process has the log open, or a copy kept it): `mode=ro` shares
          its lock table, so the snapshot is one the writers respect;
        - no `-shm` and no WAL frames (no process has the log open): `immutable=1`, which
          reads the main file alone and needs no lock file;
        - WAL frames but no `-shm` (a copy without it, in a folder we cannot write):
          `immutable=1` would silently skip the frames, so the database and its WAL are
          copied into a private temporary folder of its own, read there and removed at
          `close`.
        """
        path = _log(where)
        wal = path.with_name(DB_NAME + "-wal")
        wal_size = wal.stat().st_size if wal.exists() else 0
        immutable: tuple[int, int, int] | None = None
        scratch: Path | None = None
        if path.with_name(DB_NAME + "-shm").exists():
            uri = f"{path.resolve().as_uri()}?mode=ro"
        elif wal_size == 0:
            uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
            st = path.stat()
            immutable = (st.st_ino, st.st_size, st.st_mtime_ns)
        else:
            scratch = Path(tempfile.mkdtemp(prefix="capability-anchor-audit-"))
            copy = scratch / DB_NAME
            try:
                shutil.copyfile(path, copy)
                shutil.copyfile(wal, copy.with_name(DB_NAME + "-wal"))
            except BaseException:
                _discard(None, scratch)
                raise
            uri = f"{copy.resolve().as_uri()}?mode=ro"
        conn: sqlite3.Connection | None = None
        try:
            conn = connect(uri, uri=True)
            _known(path, int(conn.execute("PRAGMA user_version").fetchone()[0]))
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            _discard(conn, scratch)
            raise read_error(path, exc) from None
        except BaseException:
            _discard(conn, scratch)
            raise
        store = SqliteStore(path, conn)
        store._scratch = scratch
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

    def copy_to(self, where: Where, dest: Path) -> None:
        """The online backup API in one step (`pages=-1`): one read transaction, so `dest` is
        the database at one commit while writers go on (WAL: a reader blocks no writer).
        Copied in several steps instead, a backup restarts whenever a writer commits
        meanwhile, and under a steady write load it would never finish. The source is opened
        with no pragma that writes and is never migrated."""
        path = _log(where, "nothing to back up")
        private(dest)
        src = dst = None
        try:
            src = connect(path)
            version = int(src.execute("PRAGMA user_version").fetchone()[0])
            if not 1 <= version <= SCHEMA_VERSION:
                raise StoreError(
                    f"{path} has schema version {version}; this program copies 1..{SCHEMA_VERSION}"
                )
            dst = sqlite3.connect(dest, isolation_level=None)
            src.backup(dst, pages=-1)
            # One file: whatever WAL the copy got is folded in, and it is not kept in WAL.
            dst.execute("PRAGMA journal_mode = DELETE")
        except sqlite3.Error as exc:
            raise store_error(exc, f"cannot copy the log at {path}") from None
        finally:
            for conn in (dst, src):
                if conn is not None:
                    conn.close()
        fd = os.open(dest, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def copy_name(self, where: Where) -> str:
        return DB_NAME

    def own_files(self, where: Where) -> list[str]:
        return [DB_NAME, *(DB_NAME + side for side in _SIDE)]

    def is_runtime(self, name: str) -> bool:
        # -wal, -shm, and a rollback -journal SQLite may leave: none is the database.
        return name.startswith(f"{DB_NAME}-")

    def describe(self, where: Where) -> str:
        return str(_dir(where) / DB_NAME)

    def scrubber(self, where: Where) -> Scrub | None:
        return Scrubber(_dir(where))


def _connect(path: Path, *, create: bool) -> SqliteStore:
    conn: sqlite3.Connection | None = None
    try:
        conn = connect(path)  # the service's threads share it, behind the Log's lock
        # Look before touching: a file that is not ours is refused before any pragma
        # below could write to it (journal_mode=WAL rewrites the header).
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        _known(path, version)
        if version == 0 and not create:
            raise StoreError(f"{path} is not a capability-anchor log (schema version 0)")
        if create:
            # Before the first table (and WAL) fixes it: rows of ~400 bytes fill 8 KiB
            # pages better than 4 KiB ones (docs/explanation/store.md, where the bytes go).
            conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        durable(conn)
        # REPLACE conflict resolution then fires the DELETE triggers too.
        conn.execute("PRAGMA recursive_triggers = ON")
        # The dedupe index is keyed by random hashes: every batch touches pages all over
        # it, so a page cache larger than the 2 MB default saves re-reading them.
        conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        store = SqliteStore(path, conn)
        if version != SCHEMA_VERSION:
            with store.write():
                migrate(store._writer, version, store._exec)
                store._exec(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except sqlite3.Error as exc:
        if conn is not None:
            conn.close()
        error = store_error(exc, f"cannot open the log at {path}")
        if isinstance(error, StoreCorrupt) and not create:
            damage.mark(path.parent, f"opening the log: {exc}")
        raise error from None
    except BaseException:
        if conn is not None:
            conn.close()
        raise
    return store


def _discard(conn: sqlite3.Connection | None, scratch: Path | None) -> None:
    if conn is not None:
        conn.close()
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)
