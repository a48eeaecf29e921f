"""SQLite's errors as the project's: the one place that reads SQLite's error names."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from capability_anchor.errors import (
    CapabilityAnchorError,
    Conflict,
    StoreBusy,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreIOError,
    StoreReadOnly,
)


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
