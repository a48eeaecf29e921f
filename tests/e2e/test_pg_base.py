"""The PostgreSQL engine's write discipline (store/postgres/base.py) on the session's real
server, as the service's role: a write is atomic and durable across a crash of the server;
writers of two stores (two processes' pools) queue on the store's write lock and each reads
what the other committed; a read is one snapshot; the schema's refusals and the role's
missing grants are the project's `Conflict`, fencing is `LeaseLost`, and a server that is
down or cut the connection is `StoreIOError`, after which the same store works again
without being reopened. Nothing of a refused or failed write is stored."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from capability_anchor.errors import Conflict, LeaseLost, StoreError, StoreIOError
from capability_anchor.store.postgres.lease import PostgresLeader
from tests.kit.pgkit import PgServer
from tests.kit.pglog import migrated_database, service_role

H = b"\x11" * 32
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1")
DAY = "2026-11-01"


class Db:
    def __init__(self, server: PgServer, name: str, role: str) -> None:
        self.server, self.name, self.role = server, name, role
        self.stores: list[PostgresLeader] = []

    def store(self) -> PostgresLeader:
        store = PostgresLeader(self.server.conninfo(self.name, self.role), f"db {self.name}")
        self.stores.append(store)
        return store

    def owner_count(self, table: str) -> int:
        with self.server.connect(self.name) as conn:
            row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        assert row is not None
        return int(row[0])


@pytest.fixture
def db(postgres: PgServer) -> Iterator[Db]:
    name = migrated_database(postgres, "base")
    result = Db(postgres, name, service_role(postgres, name))
    try:
        yield result
    finally:
        for store in result.stores:
            store.close()


def put_entry(store: PostgresLeader, index: int, claims: bytes = b"{}") -> None:
    store._exec(
        "INSERT INTO entries (day, leaf_index, leaf_hash, claims, accepted_at)"
        " VALUES (%s, %s, %s, %s, %s)",
        (DAY, index, index.to_bytes(32, "big"), claims, 1_793_500_000),
    )


def next_index(store: PostgresLeader) -> int:
    row = store._one("SELECT max(leaf_index) FROM entries WHERE day = %s", (DAY,))
    return 0 if row[0] is None else int(row[0]) + 1


def test_a_committed_write_survives_a_crash_of_the_server(db: Db) -> None:
    store = db.store()
    with store.write():
        put_entry(store, 0)
        put_entry(store, 1)
    db.server.restart_immediate()
    # The same store, not reopened: its pooled connections died with the server.
    deadline = time.monotonic() + 30
    while True:
        try:
            assert next_index(store) == 2
            break
        except StoreIOError:
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_a_write_that_raises_stores_nothing_and_its_error_propagates(db: Db) -> None:
    store = db.store()
    with pytest.raises(ZeroDivisionError), store.write():
        put_entry(store, 0)
        raise ZeroDivisionError
    assert db.owner_count("entries") == 0
    with pytest.raises(StoreError, match="already open"), store.write(), store.write():
        pass


def test_writers_of_two_stores_queue_on_the_write_lock_and_read_each_others_commits(
    db: Db,
) -> None:
    """Two pools stand for two replicas: 4 threads each append 25 batches of 3 at the next
    index read under the lock; every index is taken once, none is skipped."""
    stores = [db.store(), db.store()]
    errors: list[BaseException] = []

    def writer(store: PostgresLeader) -> None:
        try:
            for _ in range(25):
                with store.write():
                    first = next_index(store)
                    for n in range(3):
                        put_entry(store, first + n)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(s,)) for s in stores for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with db.server.connect(db.name) as conn:
        indexes = [i for (i,) in conn.execute("SELECT leaf_index FROM entries ORDER BY 1")]
    assert indexes == list(range(4 * 25 * 3))


def test_a_read_is_one_snapshot_and_never_sees_an_uncommitted_write(db: Db) -> None:
    reader, writer = db.store(), db.store()
    with reader.read():
        assert next_index(reader) == 0
        with writer.write():
            put_entry(writer, 0)
            assert next_index(reader) == 0  # not yet committed
        assert next_index(reader) == 0  # committed, but after the snapshot
    assert next_index(reader) == 1


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE entries SET claims = '\\x00'",
        "DELETE FROM entries",
        "TRUNCATE entries",
    ],
)
def test_the_service_role_cannot_change_a_stored_row(db: Db, statement: str) -> None:
    store = db.store()
    with store.write():
        put_entry(store, 0)
    with pytest.raises(Conflict, match="append-only"), store.write():
        put_entry(store, 1)
        store._exec(statement)
    assert db.owner_count("entries") == 1  # and the entry of the refused write is not stored


def test_the_schemas_refusal_is_a_conflict(db: Db) -> None:
    store = db.store()
    with pytest.raises(Conflict, match="append-only"), store.write():
        put_entry(store, 1)  # not the next index of its day (0 is)
    assert db.owner_count("entries") == 0


def test_a_head_of_a_fenced_term_is_lease_lost(db: Db) -> None:
    store = db.store()
    with db.server.connect(db.name) as owner:  # the owner's alone (migration 2)
        assert owner.execute("SELECT sequencer_next_term()").fetchone() == (1,)
        assert owner.execute("SELECT sequencer_next_term()").fetchone() == (2,)
    with pytest.raises(LeaseLost, match="fenced"), store.write():
        store._exec(
            "INSERT INTO heads (day, tree_size, sealed, root, iat, kid, doc, term)"
            " VALUES (%s, 0, 0, %s, 1793500000, 'k', '\\x7b7d', 1)",
            (DAY, H),
        )
    assert db.owner_count("heads") == 0


def test_a_cut_connection_is_an_io_error_and_the_store_goes_on(db: Db) -> None:
    store = db.store()
    with pytest.raises(StoreIOError), store.write():
        put_entry(store, 0)
        assert db.server.terminate_backends(db.name) >= 1
        put_entry(store, 1)
    assert db.owner_count("entries") == 0
    with store.write():
        put_entry(store, 0)
    assert next_index(store) == 1


def test_a_store_opened_while_the_server_is_down_answers_io_errors_then_works(
    db: Db,
) -> None:
    db.server.pg_ctl("-m", "immediate", "stop")
    try:
        store = db.store()
        started = time.monotonic()
        with pytest.raises(StoreIOError, match="cannot reach"):
            next_index(store)
        assert time.monotonic() - started < 30  # bounded by the pool's timeout, not hung
    finally:
        db.server.start()
    deadline = time.monotonic() + 30
    while True:
        try:
            assert next_index(store) == 0
            break
        except StoreIOError:
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_one_store_holds_the_signing_lease_and_a_lost_session_is_a_newer_term(db: Db) -> None:
    leader, standby = db.store(), db.store()
    first = leader._term()
    assert leader._term() == first  # held: the same term, not a new one per head
    with pytest.raises(LeaseLost, match="another replica holds"):
        standby._term()
    # The leader's lease session cut (as a kill -9 of its host would end it): the standby
    # takes it with a newer term, and the old leader, asking again, is refused.
    assert db.server.terminate_backends(db.name) >= 1
    taken = standby._term()
    assert taken > first
    with pytest.raises(LeaseLost):
        leader._term()
    standby.close()  # a clean close frees the lease at once
    assert leader._term() > taken


_HOLDER = """
import sys
from capability_anchor.errors import LeaseLost
from capability_anchor.store.postgres.lease import PostgresLeader
store = PostgresLeader(sys.argv[1], "holder")
term = store._term()
print(term, flush=True)
for line in sys.stdin:  # after SIGCONT: one line asks it to sign once more
    try:
        print("term", store._term(), flush=True)
    except LeaseLost as exc:
        print("lost", exc, flush=True)
    try:
        with store.write():
            store._exec(
                "INSERT INTO heads (day, tree_size, sealed, root, iat, kid, doc, term)"
                " VALUES (%s, 0, 0, %s, 1793500000, 'k', '\\\\x7b7d', %s)",
                ("2026-11-01", b"\\x22" * 32, term),
            )
        print("signed", flush=True)
    except LeaseLost as exc:
        print("fenced", exc, flush=True)
"""


def test_attack_a_paused_leader_loses_the_lease_and_cannot_sign_when_it_resumes(db: Db) -> None:
    """SIGSTOP of the process holding the lease: its heartbeat stops, the server ends its
    session idle in its transaction (lease.STALL_MS), a standby takes a newer term; resumed, the old
    leader is refused the lease and its head, carrying its old term, is not stored."""
    with subprocess.Popen(
        [sys.executable, "-c", _HOLDER, db.server.conninfo(db.name, db.role)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        _paused_leader(db, holder)


def _paused_leader(db: Db, holder: subprocess.Popen[str]) -> None:
    import signal

    try:
        assert holder.stdout is not None and holder.stdin is not None
        first = int(holder.stdout.readline())
        standby = db.store()
        with pytest.raises(LeaseLost):
            standby._term()
        holder.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + 30
        while True:
            try:
                taken = standby._term()
                break
            except LeaseLost:
                assert time.monotonic() < deadline, "the paused leader kept the lease"
                time.sleep(0.2)
        assert taken > first
        holder.send_signal(signal.SIGCONT)
        holder.stdin.write("sign\n")
        holder.stdin.flush()
        assert holder.stdout.readline().startswith("lost")
        assert holder.stdout.readline().startswith("fenced")
        assert db.owner_count("heads") == 0
    finally:
        holder.kill()
        holder.wait()


_SKEWED = """
import sys
from capability_anchor.errors import ClockDisagrees
from capability_anchor.store.postgres.lease import PostgresLeader
store = PostgresLeader(sys.argv[1], "skewed")
try:
    print("term", store._term())
except ClockDisagrees as exc:
    print("refused", exc)
store.close()
"""


def test_attack_a_replica_whose_clock_is_off_never_takes_the_lease(db: Db) -> None:
    """A replica 10 minutes ahead of the database server (libfaketime, beyond
    base.CLOCK_TOLERANCE_S) is refused before it takes the lease, so it never blocks a
    replica whose clock is right; that one then leads."""
    from tests.kit.systools import ensure_tool

    lib = ensure_tool(LIBFAKETIME, "faketime", "libfaketime", timeout=600)
    env = {
        **os.environ,
        "LD_PRELOAD": str(lib),
        "FAKETIME": "+600",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }
    out = subprocess.run(
        [sys.executable, "-c", _SKEWED, db.server.conninfo(db.name, db.role)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=60,
    ).stdout
    assert out.startswith("refused"), out
    assert "off the database server's" in out
    assert db.store()._term() == 1  # the lease was never taken: the first term


def test_a_read_on_a_connection_the_server_cut_is_sent_again_on_a_live_one(db: Db) -> None:
    # The connection was used a moment ago, so the pool hands it out untested; the read
    # fails on it, the pool's idle connections are tested and replaced, and the read is sent
    # again: the caller sees its answer, not an error.
    store = db.store()
    warm_pool(store, 4)
    assert db.server.terminate_backends(db.name) >= 4
    assert next_index(store) == 0  # not sent again on another dead one


def warm_pool(store: PostgresLeader, count: int) -> None:
    """`count` connections in the pool, each used just now (so none is tested when taken)."""
    together = threading.Barrier(count)

    def hold() -> None:
        with store.read():
            next_index(store)
            together.wait(10)

    threads = [threading.Thread(target=hold) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)


def test_a_write_on_a_connection_the_server_cut_stores_nothing_and_the_next_works(
    db: Db,
) -> None:
    store = db.store()
    warm_pool(store, 4)
    assert db.server.terminate_backends(db.name) >= 4
    with pytest.raises(StoreIOError), store.write():  # a write is never sent twice
        put_entry(store, 0)
    assert db.owner_count("entries") == 0
    with store.write():  # at once: the failure had the pool replace its dead connections
        put_entry(store, 0)
    assert next_index(store) == 1
