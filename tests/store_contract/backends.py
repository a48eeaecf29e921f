"""Each registered engine's test hooks: where a fresh store of it goes, and how an attacker
with access to the stored data would change it (`tamper`) or try to (`attempt`). Only this
module knows an engine's internals; the contract tests use the hooks by name."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from capability_anchor.errors import CapabilityAnchorError
from capability_anchor.store import Store
from capability_anchor.store.open import Where
from tests.kit.pgkit import PgServer

# What `attempt` tries, by name: change or remove a stored row of each kind.
ATTEMPTS = (
    "update entry",
    "delete entry",
    "update head",
    "delete head",
    "update tile",
    "delete checkpoint",
    "delete cosignature",
)
# What `tamper` does, by name, to a closed store.
TAMPERS = ("drop a trigger", "change an index behind its table", "zero a page")


@dataclass(frozen=True)
class Backend:
    scheme: str
    where: Callable[[Path, pytest.FixtureRequest], Where]
    """A new, empty place for a store: under a test's own folder, or a database of its own
    (the request gives the session's fixtures, such as its PostgreSQL server)."""
    attempt: Callable[[Store, str], None]
    """Try the named change (`ATTEMPTS`) through the engine, bypassing the contract."""
    tamper: Callable[[Where, str], None]
    """Change the closed store's data as an attacker would (`TAMPERS`)."""


# --- SQLite ----------------------------------------------------------------------------------

_SQLITE_ATTEMPTS = {
    "update entry": "UPDATE entries SET claims = x'00' WHERE leaf_index = 0",
    "delete entry": "DELETE FROM entries WHERE leaf_index = 0",
    "update head": "UPDATE heads SET iat = iat + 1",
    "delete head": "DELETE FROM heads",
    "update tile": "UPDATE tiles SET root = NULL",
    "delete checkpoint": "DELETE FROM checkpoints",
    "delete cosignature": "DELETE FROM cosignatures",
}


def _sqlite_attempt(store: Store, what: str) -> None:
    raw = getattr(store, "execute_raw")  # noqa: B009 - the SQLite store's test hook
    raw(_SQLITE_ATTEMPTS[what])


def _sqlite_db(where: Where) -> Path:
    from capability_anchor.store.sqlite import DB_NAME

    assert isinstance(where, Path)
    return where / DB_NAME


def _sqlite_tamper(where: Where, what: str) -> None:
    db = _sqlite_db(where)
    if what == "zero a page":
        with sqlite3.connect(db) as conn:
            page = conn.execute("PRAGMA page_size").fetchone()[0]
            (root,) = conn.execute(
                "SELECT rootpage FROM sqlite_master WHERE name = 'entries'"
            ).fetchone()
        conn.close()
        with db.open("r+b") as f:
            f.seek((root - 1) * page)
            f.write(bytes(page))
        return
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        if what == "drop a trigger":
            conn.execute("DROP TRIGGER entries_no_update")
        elif what == "change an index behind its table":
            # The dedupe index made to disagree with its table: the schema writable, the
            # index's entries rewritten under it (what a bit flip in its pages would do).
            conn.execute("PRAGMA writable_schema = ON")
            conn.execute(
                "UPDATE sqlite_master SET sql = replace(sql, 'leaf_hash', 'claims') "
                "WHERE name = 'entries_by_hash'"
            )
        else:
            raise AssertionError(what)
    finally:
        conn.close()


def _sqlite_where(tmp: Path, request: pytest.FixtureRequest) -> Where:
    return tmp / "data"


# --- PostgreSQL ------------------------------------------------------------------------------

# The session's server of each database handed out, for the tampers (which stop and start it).
_PG_SERVERS: dict[str, PgServer] = {}


def _pg_where(tmp: Path, request: pytest.FixtureRequest) -> Where:
    server: PgServer = request.getfixturevalue("postgres")
    name = server.fresh_database("contract")
    # The owner's URL: `create` migrates as it (the service role's grants are tested in
    # tests/e2e/test_pg_base.py); the triggers refuse what the owner may otherwise do.
    url = server.url(name)
    _PG_SERVERS[url] = server
    return url


def _pg_attempt(store: Store, what: str) -> None:
    sql = _SQLITE_ATTEMPTS[what]  # the same statements: PostgreSQL takes them as they are
    with store.write():
        getattr(store, "_exec")(sql.replace("x'00'", "'\\x00'"))  # noqa: B009 - test hook


def _pg_tamper(where: Where, what: str) -> None:
    assert isinstance(where, str)
    server = _PG_SERVERS[where]
    dbname = where.split("/", 3)[3].split("?", 1)[0]
    with server.connect(dbname) as conn:
        if what == "drop a trigger":
            conn.execute("DROP TRIGGER entries_no_update ON entries")
            return
        if what == "change an index behind its table":
            # The dedupe index made to index something else under its own name.
            conn.execute("DROP INDEX entries_by_hash")
            conn.execute("CREATE UNIQUE INDEX entries_by_hash ON entries (day, claims)")
            return
        assert what == "zero a page", what
        (path,) = conn.execute("SELECT pg_relation_filepath('entries_pkey')").fetchone() or ("",)
    # The primary key's first leaf page (block 0 is its metapage), with the server stopped
    # cleanly so that nothing of it is still only in shared buffers.
    server.pg_ctl("-m", "fast", "stop")
    try:
        with (server.datadir / path).open("r+b") as f:
            f.seek(8192)
            f.write(bytes(8192))
    finally:
        server.start()


BACKENDS: dict[str, Backend] = {
    "sqlite": Backend("sqlite", _sqlite_where, _sqlite_attempt, _sqlite_tamper),
    "postgresql": Backend("postgresql", _pg_where, _pg_attempt, _pg_tamper),
}

__all__ = ["ATTEMPTS", "BACKENDS", "TAMPERS", "Backend", "CapabilityAnchorError"]
