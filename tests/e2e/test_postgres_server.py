"""The session's PostgreSQL (tests/kit/pgkit.py) is a real server that the PostgreSQL tests
can lean on: version 15 or newer, a database of each test's own, committed rows that survive
a crash restart, and sessions that `pg_terminate_backend` really ends."""

from __future__ import annotations

import psycopg
import pytest

from tests.kit.pgkit import PgServer


def test_the_server_is_postgresql_15_or_newer_on_a_socket_only(postgres: PgServer) -> None:
    with postgres.connect() as conn:
        version = conn.execute("SHOW server_version_num").fetchone()
        listen = conn.execute("SHOW listen_addresses").fetchone()
        fsync = conn.execute("SHOW fsync").fetchone()
    assert version is not None and int(version[0]) >= 150000
    assert listen == ("",)  # no TCP: nothing else on the machine can reach it, nor collide
    assert fsync == ("on",)


def test_each_fresh_database_is_empty_and_its_own(postgres: PgServer) -> None:
    first, second = postgres.fresh_database(), postgres.fresh_database()
    assert first != second
    with postgres.connect(first) as conn:
        conn.execute("CREATE TABLE t (x integer)")
        conn.execute("INSERT INTO t VALUES (1)")
    with postgres.connect(second) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE tablename = 't'").fetchone()
    assert tables == (0,)


def test_a_committed_row_survives_an_immediate_restart(postgres: PgServer) -> None:
    name = postgres.fresh_database()
    with postgres.connect(name) as conn:
        conn.execute("CREATE TABLE t (x integer)")
        conn.execute("INSERT INTO t VALUES (42)")
        idle = postgres.connect(name)
    postgres.restart_immediate()
    with pytest.raises(psycopg.OperationalError):
        idle.execute("SELECT 1")  # the crash ended every session
    idle.close()
    with postgres.connect(name) as conn:
        assert conn.execute("SELECT x FROM t").fetchall() == [(42,)]


def test_terminate_backends_ends_the_other_sessions(postgres: PgServer) -> None:
    name = postgres.fresh_database()
    victim = postgres.connect(name)
    assert postgres.terminate_backends(name) == 1
    with pytest.raises(psycopg.OperationalError):
        victim.execute("SELECT 1")
    victim.close()


def test_the_url_form_names_the_same_database(postgres: PgServer) -> None:
    name = postgres.fresh_database()
    with psycopg.connect(postgres.url(name)) as conn:
        row = conn.execute("SELECT current_database()").fetchone()
    assert row == (name,)
