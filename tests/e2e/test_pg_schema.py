"""The PostgreSQL schema (store/postgres/, issue #24 item 1) on a real server: migrations apply
once, also when connections race; every log table refuses UPDATE, DELETE and TRUNCATE,
even from its owner; the insert rules are SQLite's, with SQLite's messages; and the
service's role may read and insert, and nothing more."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator

import psycopg
import pytest

from capability_anchor.store.postgres import schema
from capability_anchor.store.postgres.schema import APPEND_ONLY_TABLES
from capability_anchor.store.sqlite.schema import MIGRATIONS as SQLITE_MIGRATIONS
from tests.kit.pgkit import PgServer
from tests.kit.pglog import HEAD_KID, head_doc, service_role

DAY = "2026-12-02"
ID_ONCE = ("key_records", "policies", "settings")
H = b"\x11" * 32

ROWS = {
    "entries": ("(day, leaf_index, leaf_hash, claims, accepted_at)", (DAY, 0, H, b"{}", 1)),
    "heads": (
        "(day, tree_size, sealed, root, iat, kid, doc, term)",
        (DAY, 1, 0, H, 1, HEAD_KID, head_doc(DAY, 1, H), 1),
    ),
    "tiles": ("(day, level, idx, width, hashes, root)", (DAY, 0, 0, 1, H, None)),
    "servers": ("(key, day, leaf_index)", ("abcdefghijkl", DAY, 0)),
    "keys": ("(kid, jwk, added)", ("k", "{}", 1)),
    "stamps": ("(day, tsa, token, gen_time, added)", (DAY, "tsa", b"t", "20261202", 1)),
    "history": ("(idx, leaf_hash, day, sealed, tree_size)", (0, H, DAY, 0, 1)),
    "history_tiles": ("(level, idx, width, hashes, root)", (0, 0, 1, H, None)),
    "checkpoints": ("(size, note, term)", (1, b"note", 1)),
    "cosignatures": (
        "(witness, key_id, size, timestamp, line, added)",
        ("w", b"abcd", 1, 1, "line", 1),
    ),
    "key_records": ("(signer, kid, jws, added)", ("s", "k", "jws", 1)),
    "policies": ("(policy, added)", (b"p", 1)),
    "settings": ("(kid, jws, added)", ("k", "jws", 1)),
}
assert set(ROWS) == set(APPEND_ONLY_TABLES)


def insert(conn: psycopg.Connection, table: str, columns: str, values: tuple[object, ...]) -> None:
    marks = ", ".join(["%s"] * len(values))
    conn.execute(f"INSERT INTO {table} {columns} VALUES ({marks})", values)  # type: ignore[arg-type]


@pytest.fixture
def db(postgres: PgServer) -> Iterator[tuple[PgServer, str]]:
    """A migrated database holding one row in each log table (a one-entry log)."""
    name = postgres.fresh_database("schema")
    with postgres.connect(name) as conn:
        schema.migrate(conn)
        assert conn.execute("SELECT sequencer_next_term()").fetchone() == (1,)
        for table, (columns, values) in ROWS.items():
            insert(conn, table, columns, values)
    yield postgres, name


def refused(conn: psycopg.Connection, statement: str) -> str:
    with pytest.raises(psycopg.Error) as caught:
        conn.execute(statement)  # type: ignore[arg-type]
    return str(caught.value).splitlines()[0]


def test_migrations_apply_once_and_are_recorded(postgres: PgServer) -> None:
    name = postgres.fresh_database()
    with postgres.connect(name) as conn:
        assert schema.version(conn) == 0
        assert schema.migrate(conn) == schema.SCHEMA_VERSION
        assert schema.migrate(conn) == schema.SCHEMA_VERSION
        rows = conn.execute("SELECT version FROM schema_migrations ORDER BY version").fetchall()
    assert rows == [(n,) for n in range(1, schema.SCHEMA_VERSION + 1)]


def test_four_connections_migrating_at_once_apply_each_migration_once(postgres: PgServer) -> None:
    name = postgres.fresh_database()
    results: list[object] = []
    barrier = threading.Barrier(4)

    def run() -> None:
        with postgres.connect(name) as conn:
            barrier.wait()
            try:
                results.append(schema.migrate(conn))
            except psycopg.Error as e:  # pragma: no cover - the failure this test is about
                results.append(e)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [schema.SCHEMA_VERSION] * 4
    with postgres.connect(name) as conn:
        count = conn.execute("SELECT count(*) FROM schema_migrations").fetchone()
    assert count == (schema.SCHEMA_VERSION,)


@pytest.mark.parametrize("table", APPEND_ONLY_TABLES)
def test_the_owner_cannot_update_delete_or_truncate_a_log_table(
    db: tuple[PgServer, str], table: str
) -> None:
    server, name = db
    with server.connect(name) as conn:
        column = ROWS[table][0].strip("()").split(",")[0]
        update = refused(conn, f"UPDATE {table} SET {column} = {column}")
        delete = refused(conn, f"DELETE FROM {table}")
        truncate = refused(conn, f"TRUNCATE {table} CASCADE")
        count = conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # type: ignore[arg-type]
    assert update == f"append-only: {table} cannot be updated"
    assert delete == f"append-only: {table} cannot be deleted"
    assert truncate.startswith("append-only: ") and truncate.endswith("cannot be truncated")
    assert count == (1,)


INSERTS = [
    ("entries", (DAY, 2, b"\x22" * 32, b"{}", 1), "leaf_index is not the next index of its day"),
    ("entries", (DAY, 1, H, b"{}", 1), "this leaf is already stored in this day"),
    ("heads", (DAY, 1, 0, H, 2, "k", b"other", 1), "a different head of this size is stored"),
    (
        "heads",
        (DAY, 1, 1, b"\x33" * 32, 2, "k", b"s", 1),
        "another head of this size has another root",
    ),
    ("tiles", (DAY, 0, 0, 1, b"\x44" * 32, None), "a different tile is stored under this name"),
    ("keys", ("k", '{"x":1}', 2), "a different key is stored under this kid"),
    ("stamps", (DAY, "tsa", b"u", "20261203", 2), "this TSA already stamped this day"),
    ("history", (2, b"\x55" * 32, DAY, 0, 1), "a history leaf out of publication order"),
    ("history", (1, b"\x55" * 32, DAY, 0, 7), "a history leaf must be a stored head"),
    ("checkpoints", (3, b"n", 1), "a checkpoint is only ever of the next size"),
    ("checkpoints", (2, b"n", 1), "a checkpoint is of a size the history has"),
    ("cosignatures", ("w", b"abcd", 1, 2, "line", 2), "this cosignature is already stored"),
    ("cosignatures", ("w", b"abcd", 9, 2, "l9", 2), "a cosignature is of a stored checkpoint"),
]


@pytest.mark.parametrize(("table", "values", "message"), INSERTS)
def test_an_insert_that_breaks_a_rule_is_refused_with_sqlites_message(
    db: tuple[PgServer, str], table: str, values: tuple[object, ...], message: str
) -> None:
    server, name = db
    with server.connect(name) as conn:
        with pytest.raises(psycopg.Error) as caught:
            insert(conn, table, ROWS[table][0], values)
        count = conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # type: ignore[arg-type]
    assert str(caught.value).splitlines()[0] == f"append-only: {message}"
    assert count == (1,)


@pytest.mark.parametrize("table", ID_ONCE)
def test_a_row_under_a_taken_id_is_refused(db: tuple[PgServer, str], table: str) -> None:
    server, name = db
    columns, values = ROWS[table]
    with server.connect(name) as conn, pytest.raises(psycopg.Error) as caught:
        insert(conn, table, "(id, " + columns[1:], (1, *values))
    assert (
        str(caught.value).splitlines()[0] == f"append-only: a {table} row is stored under this id"
    )


def test_an_append_to_a_sealed_day_is_refused(db: tuple[PgServer, str]) -> None:
    server, name = db
    with server.connect(name) as conn:
        sealed = head_doc(DAY, 1, H, sealed=True, iat=2)
        insert(conn, "heads", ROWS["heads"][0], (DAY, 1, 1, H, 2, HEAD_KID, sealed, 1))
        row = (DAY, 1, b"\x22" * 32, b"{}", 1)
        with pytest.raises(psycopg.Error) as caught:
            insert(conn, "entries", ROWS["entries"][0], row)
        head = refused(
            conn, f"INSERT INTO heads VALUES ('{DAY}', 2, 0, '\\x{H.hex()}', 3, 'k', 'd', 1)"
        )
    assert str(caught.value).splitlines()[0] == "append-only: the day is sealed"
    assert head == "append-only: the day is sealed"


def _sqlite_messages() -> set[str]:
    found: set[str] = set()
    for migration in SQLITE_MIGRATIONS:
        module = __import__(migration.__module__, fromlist=["SQL"])
        found |= set(re.findall(r"'append-only: ([^']+)'", getattr(module, "SQL", "")))
    return found


def test_every_rule_sqlite_enforces_postgresql_enforces_with_the_same_message(
    db: tuple[PgServer, str],
) -> None:
    server, name = db
    with server.connect(name) as conn:
        sources = conn.execute(
            "SELECT string_agg(prosrc, ' ') FROM pg_proc WHERE proname LIKE '%insert_rules'"
        ).fetchone()
    assert sources is not None
    postgres = set(re.findall(r"'append-only: ([^']+)'", sources[0]))
    postgres |= {f"{t} cannot be {op}" for t in APPEND_ONLY_TABLES for op in ("updated", "deleted")}
    # id_once_insert_rules names its table through TG_TABLE_NAME:
    postgres |= {f"a {t} row is stored under this id" for t in ID_ONCE}
    sqlite = _sqlite_messages()
    assert sqlite, "the SQLite migrations' messages were not found"
    assert sqlite - postgres == set()


def test_the_service_role_reads_and_inserts_and_nothing_more(db: tuple[PgServer, str]) -> None:
    server, name = db
    role = service_role(server, name)
    with server.connect(name, user=role) as svc:
        assert svc.execute("SELECT count(*) FROM entries").fetchone() == (1,)
        insert(svc, "entries", ROWS["entries"][0], (DAY, 1, b"\x22" * 32, b"{}", 2))
        insert(svc, "policies", ROWS["policies"][0], (b"p2", 2))  # an identity default
        svc.execute("INSERT INTO meta VALUES ('name', 'x')")
        svc.execute("UPDATE meta SET value = 'y' WHERE key = 'name'")
        problems = {
            s: refused(svc, s)
            for s in (
                "UPDATE entries SET accepted_at = 0",
                "DELETE FROM heads",
                "TRUNCATE servers",
                "DROP TRIGGER entries_insert_rules ON entries",
                "ALTER TABLE entries DISABLE TRIGGER ALL",
                "INSERT INTO schema_migrations (version) VALUES (99)",
                "CREATE TABLE extra (x integer)",
            )
        }
    for statement, message in problems.items():
        assert "permission denied" in message or "must be owner" in message, (statement, message)
