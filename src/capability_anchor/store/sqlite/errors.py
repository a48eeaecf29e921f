"""SQLite's errors as the project's: the one place that reads SQLite's error names."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from capability_anchor import errors as e
from capability_anchor.errors import CapabilityAnchorError, StoreCorrupt, StoreError
from capability_anchor.store.sql import Kinds, classified, refused

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


def quoted(name: object) -> str:
    return '"' + str(name).replace('"', '""') + '"'


def read_error(path: Path, exc: sqlite3.Error | UnicodeDecodeError) -> StoreError:
    """A reading failure as the project's error: StoreCorrupt when SQLite says the file is
    not a database or is damaged (an audit finding), StoreError otherwise (I/O, locks)."""
    if isinstance(exc, UnicodeDecodeError):
        return StoreCorrupt(f"{path} is damaged: SQLite reports text that is not UTF-8")
    name = getattr(exc, "sqlite_errorname", "")
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or "malformed" in str(exc):
        return StoreCorrupt(f"{path} is damaged: {exc}")
    return StoreError(f"cannot read the log at {path}: {exc}")
