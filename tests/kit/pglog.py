"""A log's database on the session's PostgreSQL (pgkit): migrated to the current schema, and
the service's role on it, as the engine's tests start from."""

from __future__ import annotations

from psycopg import sql

from capability_anchor import head as heads
from capability_anchor.keys import SigningKey
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


_HEAD_KEY = SigningKey.generate()
HEAD_KID = _HEAD_KEY.kid
"""The kid of the key `head_doc` signs with: a head row's `kid` column must name it."""


def head_doc(
    day: str,
    tree_size: int,
    root: bytes,
    *,
    sealed: bool = False,
    iat: int = 1,
    key: SigningKey = _HEAD_KEY,
) -> bytes:
    """A head document the schema takes for a row of these columns and kid `key.kid`
    (migration 2's `heads_signed_doc`): signed, JCS, as the log writes one."""
    claims = heads.make_claims(
        iss="https://log.example",
        day=day,
        tree_size=tree_size,
        root=root,
        sealed=sealed,
        prev=None,
        iat=iat,
    )
    return heads.sign(claims, key).document()
