"""The PostgreSQL engine as `store.open` reaches it: any `postgresql://` URL libpq takes.
`init` migrates as the database's owner; the service connects as a role with the grants of
`schema.grant_service_role` (docs/how-to/postgresql.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg

from capability_anchor.errors import Conflict, StoreError, UsageError
from capability_anchor.store.engines import Engine, Where
from capability_anchor.store.interface import Store

from . import PostgresStore, schema
from .base import connect
from .errors import store_error


def _url(where: Where) -> str:
    if isinstance(where, Path) or urlsplit(where).scheme.lower() != "postgresql":
        raise UsageError(f"the PostgreSQL engine is given a postgresql:// URL, not {where!r}")
    return where


def redacted(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


class PostgresEngine(Engine):
    scheme = "postgresql"

    def location(self, where: Where) -> Where:
        url = _url(where)
        parts = urlsplit(url)
        if not parts.path.strip("/"):
            raise UsageError(f"{redacted(url)}: name the log's database (postgresql://.../DBNAME)")
        try:
            psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            raise UsageError(
                f"{redacted(url)} is not a PostgreSQL URL libpq takes: {exc}"
            ) from None
        return url

    def _connect(self, url: str) -> psycopg.Connection:
        return connect(url, f"cannot connect to {redacted(url)}")

    def _has_log(self, conn: psycopg.Connection) -> bool:
        if schema.version(conn) == 0:
            return False
        row = conn.execute("SELECT EXISTS (SELECT 1 FROM meta)").fetchone()
        return bool(row and row[0])

    def exists(self, where: Where) -> bool:
        url = _url(where)
        with self._connect(url) as conn:
            try:
                return self._has_log(conn)
            except psycopg.Error as exc:
                raise store_error(exc, f"cannot read {redacted(url)}") from None

    def create(self, where: Where, fill: Callable[[Store], None]) -> None:
        """Migrate, then write the first rows in one transaction under the write lock, where
        a log made meanwhile by another `init` is found: either no log or a whole one."""
        url = _url(where)
        with self._connect(url) as conn:
            try:
                schema.migrate(conn)
            except psycopg.Error as exc:
                raise store_error(exc, f"cannot migrate {redacted(url)} (as its owner?)") from None
        store = PostgresStore(url, redacted(url))
        try:
            with store.write():
                if store.meta():
                    raise Conflict(
                        f"a log already exists at {redacted(url)}; refusing to overwrite it"
                    )
                fill(store)
        finally:
            store.close()

    def open(self, where: Where, *, upkeep: bool) -> Store:
        url = _url(where)
        self._ready(url, readonly=False)
        return PostgresStore(url, redacted(url))

    def open_readonly(self, where: Where) -> Store:
        url = _url(where)
        self._ready(url, readonly=True)
        return PostgresStore(url, redacted(url), readonly=True)

    def _ready(self, url: str, *, readonly: bool) -> None:
        """A log of a schema this code knows: migrated here if behind (the owner only)."""
        with self._connect(url) as conn:
            try:
                found = schema.version(conn)
                if found > schema.SCHEMA_VERSION:
                    raise StoreError(
                        f"{redacted(url)} has PostgreSQL schema {found}; this program knows up "
                        f"to {schema.SCHEMA_VERSION} (upgrade capability-anchor)"
                    )
                if found == 0 or not self._has_log(conn):
                    raise StoreError(
                        f"no log at {redacted(url)} (run `capability-anchor init --store URL` "
                        "as the database's owner first)"
                    )
                if found < schema.SCHEMA_VERSION and not readonly:
                    schema.migrate(conn)
            except psycopg.errors.InsufficientPrivilege:
                raise StoreError(
                    f"{redacted(url)} has schema {found} of {schema.SCHEMA_VERSION}: run any "
                    "command that opens the log once with the database owner's URL to migrate"
                ) from None
            except psycopg.Error as exc:
                raise store_error(exc, f"cannot open {redacted(url)}") from None

    def grant_service(self, where: Where, role: str, *, check_only: bool = False) -> str:
        url = _url(where)
        with self._connect(url) as conn:
            try:
                found = conn.execute(
                    "SELECT rolcanlogin, rolsuper FROM pg_roles WHERE rolname = %s", (role,)
                ).fetchone()
                if found is None or not found[0]:
                    raise UsageError(
                        f"no login role {role!r} at {redacted(url)}: create it first "
                        f"(CREATE ROLE {role} LOGIN), then run init again"
                    )
                if found[1]:
                    raise UsageError(f"{role!r} is a superuser: the service's role must not be")
                if not check_only:
                    schema.grant_service_role(conn, role)
            except psycopg.Error as exc:
                raise store_error(exc, f"cannot grant {role!r} at {redacted(url)}") from None
        parts = urlsplit(url)
        host = parts.netloc.rsplit("@", 1)[-1]
        return urlunsplit(parts._replace(netloc=f"{quote(role, safe='')}@{host}"))

    def _no_files(self, what: str) -> UsageError:
        return UsageError(
            f"a PostgreSQL log keeps no {what} in a data dir: back it up and copy it with "
            "PostgreSQL's own tools (pg_dump, base backups) or `capability-anchor export`"
        )

    def copy_to(self, where: Where, dest: Path) -> None:
        raise self._no_files("database file")

    def copy_name(self, where: Where) -> str:
        raise self._no_files("database file")

    def describe(self, where: Where) -> str:
        return redacted(_url(where))


__all__ = ["PostgresEngine", "redacted"]
