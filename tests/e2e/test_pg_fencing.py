"""The fencing term of the PostgreSQL schema (SPEC §13.4), on a real server: a head or
checkpoint is stored only under the current term; a leader that was paused while another
took the lease cannot sign afterwards; one that is mid-transaction when another takes the
lease finishes first, and only then is the new term taken; the service's role can take a
term but not set one."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from capability_anchor.store.postgres import lease
from tests.kit.pgkit import PgServer
from tests.kit.pglog import HEAD_KID, head_doc, migrated_database, service_role

DAY = "2026-12-02"


def head(conn: psycopg.Connection, size: int, term: int, root: bytes = b"\x01" * 32) -> None:
    conn.execute(
        "INSERT INTO heads (day, tree_size, sealed, root, iat, kid, doc, term)"
        " VALUES (%s, %s, 0, %s, 1, %s, %s, %s)",
        (DAY, size, root, HEAD_KID, head_doc(DAY, size, root), term),
    )


def take_term(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT sequencer_next_term()").fetchone()
    assert row is not None
    return int(row[0])


def heads(conn: psycopg.Connection) -> list[tuple[int, int]]:
    return [
        (int(s), int(t))
        for s, t in conn.execute("SELECT tree_size, term FROM heads ORDER BY tree_size")
    ]


def fenced_message(error: pytest.ExceptionInfo[psycopg.Error]) -> str:
    return str(error.value).splitlines()[0]


def wait_until_blocked(server: PgServer, pid: int) -> None:
    """Until backend `pid` waits for a lock (the server says so, not a sleep)."""
    deadline = time.monotonic() + 30
    with server.connect() as watcher:
        while time.monotonic() < deadline:
            row = watcher.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
            ).fetchone()
            if row == ("Lock",):
                return
            time.sleep(0.01)
    raise AssertionError(f"backend {pid} never waited for the term row's lock")


@pytest.fixture
def db(postgres: PgServer) -> Iterator[tuple[PgServer, str]]:
    yield postgres, migrated_database(postgres, "fence")


def test_no_head_is_stored_before_a_term_is_taken(db: tuple[PgServer, str]) -> None:
    server, name = db
    with server.connect(name) as conn:
        with pytest.raises(psycopg.Error) as caught:
            head(conn, 0, 1)
        assert heads(conn) == []
    assert fenced_message(caught) == "fenced: term 1 is not the sequencer's term"


def test_a_paused_leader_cannot_sign_once_another_took_the_lease(
    db: tuple[PgServer, str],
) -> None:
    server, name = db
    with server.connect(name) as old, server.connect(name) as new:
        old_term = take_term(old)
        head(old, 0, old_term)
        # The old leader stalls (SIGSTOP, a long GC pause); another replica takes the lease.
        new_term = take_term(new)
        assert new_term == old_term + 1
        head(new, 1, new_term)
        with pytest.raises(psycopg.Error) as caught:
            head(old, 2, old_term)  # it wakes up and signs what it had in hand
        with pytest.raises(psycopg.Error):
            old.execute(
                "INSERT INTO checkpoints (size, note, term) VALUES (1, 'n', %s)", (old_term,)
            )
        assert heads(new) == [(0, old_term), (1, new_term)]
        assert new.execute("SELECT count(*) FROM checkpoints").fetchone() == (0,)
    assert fenced_message(caught) == f"fenced: term {old_term} is not the sequencer's term"


def test_a_new_term_waits_for_the_leaders_transaction_in_flight(db: tuple[PgServer, str]) -> None:
    server, name = db
    taken: list[int] = []
    with server.connect(name) as leader, server.connect(name) as other:
        term = take_term(leader)
        with leader.transaction():
            head(leader, 0, term)  # holds the term row until its commit
            thread = threading.Thread(target=lambda: taken.append(take_term(other)))
            thread.start()
            wait_until_blocked(server, other.info.backend_pid)
            assert taken == []  # the new term is not taken while the head is uncommitted
        thread.join(timeout=30)
        assert taken == [term + 1]
        assert heads(leader) == [(0, term)]  # what the old leader committed stands
        with pytest.raises(psycopg.Error):
            head(leader, 1, term)


def test_the_same_size_with_another_root_is_refused_across_terms(
    db: tuple[PgServer, str],
) -> None:
    server, name = db
    with server.connect(name) as a, server.connect(name) as b:
        head(a, 0, take_term(a))
        term_b = take_term(b)
        head(b, 1, term_b, b"\x02" * 32)
        with pytest.raises(psycopg.Error) as caught:
            b.execute(
                "INSERT INTO heads (day, tree_size, sealed, root, iat, kid, doc, term)"
                " VALUES (%s, 1, 1, %s, 1, 'k', 'y', %s)",
                (DAY, b"\x03" * 32, term_b),
            )
    assert fenced_message(caught) == "append-only: another head of this size has another root"


def test_the_service_role_takes_a_term_but_cannot_set_one(db: tuple[PgServer, str]) -> None:
    server, name = db
    role = service_role(server, name)
    with server.connect(name, user=role) as svc:
        term = lease.try_take(svc)  # as the lease holder only (migration 2)
        assert term is not None
        svc.execute("COMMIT")  # the lease's transaction ends; the term stays
        head(svc, 0, term)
        for statement in (
            "UPDATE sequencer_term SET term = 99",
            "INSERT INTO sequencer_term VALUES (2, 0, 0)",
            "DELETE FROM sequencer_term",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                svc.execute(statement)  # type: ignore[arg-type]
        assert svc.execute("SELECT term, signed FROM sequencer_term").fetchone() == (term, 1)
