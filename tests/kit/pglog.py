"""A log's database on the session's PostgreSQL (pgkit): migrated to the current schema, and
the service's role on it, as the engine's tests start from."""

from __future__ import annotations

from psycopg import sql

from capability_anchor.store.postgres import schema

from .pgkit import PgServer


def migrated_database(server: PgServer, prefix: str) -> str:
    """A fresh database brought to the current schema; its name."""
    name = server.fresh_database(prefix)
    with server.connect(name) as conn:
        schema.migrate(conn)
    return name


def service_role(server: PgServer, dbname: str) -> str:
    """A new login role with the service's grants on `dbname`; its name."""
    role = f"svc_{dbname}"
    with server.connect(dbname) as owner:
        owner.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        schema.grant_service_role(owner, role)
    return role
