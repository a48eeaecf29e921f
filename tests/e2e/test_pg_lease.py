"""The sequencer's lease on PostgreSQL (store/postgres/lease.py) on a real server: one session
holds it; a standby takes it, with a newer term, as soon as the leader's session ends
(`pg_terminate_backend` here, as a kill -9 or a cut connection would); and the old leader,
reconnected with its old term, cannot sign. The lease is a transaction's table lock: its
transaction holds no transaction id and no snapshot, so it holds back no vacuum."""

from __future__ import annotations

import time
from collections.abc import Iterator

import psycopg
import pytest

from capability_anchor.store.postgres import lease
from tests.kit.pgkit import PgServer
from tests.kit.pglog import migrated_database

TAKEOVER_DEADLINE_S = 10  # issue #24: another replica takes the lease within 10 s


@pytest.fixture
def db(postgres: PgServer) -> Iterator[tuple[PgServer, str]]:
    yield postgres, migrated_database(postgres, "lease")


def test_one_session_holds_the_lease_and_each_take_is_a_new_term(
    db: tuple[PgServer, str],
) -> None:
    server, name = db
    with server.connect(name) as first, server.connect(name) as second:
        term = lease.try_take(first)
        assert term == 1
        assert lease.try_take(second) is None
        assert lease.held(first) and not lease.held(second)
        with server.connect(name) as admin:
            found = admin.execute(
                "SELECT backend_xid, backend_xmin FROM pg_stat_activity WHERE pid = %s",
                (first.info.backend_pid,),
            ).fetchone()
        assert found == (None, None)  # nothing that holds back vacuum
        first.execute("ROLLBACK")
        assert lease.try_take(second) == term + 1
        assert lease.current_term(first) == term + 1


def test_a_standby_takes_over_when_the_leaders_session_ends(db: tuple[PgServer, str]) -> None:
    server, name = db
    leader, standby, talk = server.connect(name), server.connect(name), server.connect(name)
    try:
        old_term = lease.try_take(leader)
        assert old_term is not None and lease.try_take(standby) is None
        with server.connect(name) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (leader.info.backend_pid,))
        assert not lease.held(leader)
        deadline = time.monotonic() + TAKEOVER_DEADLINE_S
        new_term = None
        while new_term is None and time.monotonic() < deadline:
            new_term = lease.try_take(standby)
            time.sleep(0.01)
        assert new_term == old_term + 1
        with server.connect(name) as again, pytest.raises(psycopg.Error) as caught:
            again.execute(
                "INSERT INTO heads (day, tree_size, sealed, root, iat, kid, doc, term)"
                " VALUES ('2026-12-02', 0, 0, %s, 1, 'k', 'd', %s)",
                (b"\x01" * 32, old_term),
            )
        assert str(caught.value).startswith(f"fenced: term {old_term} ")
    finally:
        leader.close()
        standby.close()
        talk.close()
