"""Only the log holds the log's locks, a wrong clock takes no writes, and every answer tells
the truth about storage (SPEC §14.3, issue #35 items 5 to 7), with real `serve` processes on
the session's real PostgreSQL: a replica paused (SIGSTOP) while it writes holds the other for
less than 10 s; a role that may only connect tries every lock the service takes, and writes
and signatures go on; a replica whose clock is 400 s or a day off the database's stores
nothing; and through crashes of the database (`pg_ctl restart -m immediate`) no stored batch
is answered as if it were not. Helpers: tests/e2e/test_pg_replicas.py."""

from __future__ import annotations

import itertools
import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families
from psycopg import sql

from capability_anchor.errors import OutcomeUnknown, StoreBusy, StoreIOError
from capability_anchor.store import HeadRow
from capability_anchor.store.postgres import PostgresStore
from capability_anchor.store.postgres.lease import PostgresLeader
from capability_anchor.store.postgres.writelock import STALL_S
from tests.e2e.test_clock import LIBFAKETIME, FakeTime
from tests.e2e.test_pg_replicas import (
    ISS,
    SERVE_ARGS,
    Writer,
    audit_ok,
    check_acknowledged,
    check_tree,
    lead,
    new_log,
    replica,
    rows,
    run,
    wait_for,
    writing,
)
from tests.kit.obskit import observation
from tests.kit.pgkit import PgServer
from tests.kit.pglog import HEAD_KID, head_doc, migrated_database, service_role
from tests.kit.serverkit import free_port, serve_argv, serving
from tests.kit.systools import ensure_tool

DAY = "2026-11-01"
PAUSES = 3
PAUSE_S = 30.0
WINDOW_S = 10.0  # SPEC §14.3: a stalled session holds the others for at most 10 s
PAUSED = "capability-anchor paused replica"  # the application_name of its sessions
# The keys of the advisory locks the log took before migration 3 (the write lock, the lease)
# and the one its migrations take.
OLD_KEYS = (0x63612D77, 0x63612D73, 0x63612D6D)
LOCK_MODES = (
    "ACCESS SHARE",
    "ROW SHARE",
    "ROW EXCLUSIVE",
    "SHARE UPDATE EXCLUSIVE",
    "SHARE",
    "SHARE ROW EXCLUSIVE",
    "EXCLUSIVE",
    "ACCESS EXCLUSIVE",
)


def largest_gap(times: list[float], start: float, end: float) -> float:
    """The longest time within [start, end] with no success in `times`."""
    marks = [start, *sorted(t for t in times if start < t < end), end]
    return max(b - a for a, b in itertools.pairwise(marks))


def metric_samples(server: Any, name: str) -> list[tuple[dict[str, str], float]]:
    with server.client() as client:
        text = client.get("/metrics").text
    return [
        (s.labels, s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    ]


def holds_write_lock(admin: psycopg.Connection, name: str) -> bool:
    """Whether a session named `name` (`application_name`) holds the log's write lock."""
    row = admin.execute(
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
        " WHERE l.locktype = 'relation' AND l.relation = 'write_lock'::regclass"
        " AND l.granted AND a.application_name = %s",
        (name,),
    ).fetchone()
    return bool(row and row[0])


def pause_inside_a_write(server: Any, admin: psycopg.Connection, name: str) -> float:
    """SIGSTOP `server` (its process group, whose sessions are named `name`) at a moment it
    holds the write lock, as the database still sees it once whatever the process sent
    before it stopped (a COMMIT) is done; when it stopped."""
    while True:
        wait_for(lambda: holds_write_lock(admin, name), 30.0, f"{name} in a write")
        os.killpg(server.pid, signal.SIGSTOP)
        began = time.monotonic()
        try:
            time.sleep(0.2)
            if holds_write_lock(admin, name):
                return began
        except BaseException:
            os.killpg(server.pid, signal.SIGCONT)
            raise
        os.killpg(server.pid, signal.SIGCONT)  # it had just committed: the next write


def test_attack_a_replica_paused_inside_its_write_transaction_holds_the_other_under_10_s(
    postgres: PgServer, tmp_path: Path
) -> None:
    db, (a_dir, b_dir) = new_log(postgres, tmp_path)
    # A's sessions are named (libpq's PGAPPNAME), so the test sees when A holds the lock.
    with replica(a_dir, env={"PGAPPNAME": PAUSED}) as a, postgres.connect(db) as admin:
        lead(a)  # the paused one holds the lease too
        with replica(b_dir) as b:
            # Writers on A keep it inside write transactions most of the time; a request to
            # A waits out its pauses (30 s each), so their timeout is longer.
            a_writers = tuple(
                Writer(a, f"a{n}", prove=n == 0, timeout=3 * PAUSE_S) for n in range(4)
            )
            b_writers = (Writer(b, "b1", prove=False), Writer(b, "b2"), Writer(b, "b3"))
            pauses: list[tuple[float, float]] = []
            with writing(*a_writers, *b_writers):
                for _ in range(PAUSES):
                    # A random point of A's writes, inside one of its write transactions:
                    # every pause holds B (the lock waits asserted below need one).
                    time.sleep(random.uniform(1.0, 3.0))
                    began = pause_inside_a_write(a, admin, PAUSED)
                    try:
                        time.sleep(max(0.0, began + PAUSE_S - time.monotonic()))
                    finally:
                        os.killpg(a.pid, signal.SIGCONT)
                    pauses.append((began, time.monotonic()))
                time.sleep(3.0)
            gaps = [largest_gap([t for w in b_writers for t in w.ok_times], *p) for p in pauses]
            print("B's longest time without a write in each pause:", [f"{g:.2f}" for g in gaps])
            print("503s on B:", [w.unavailable for w in b_writers])
            assert max(gaps) < WINDOW_S, gaps
            assert a.alive() and b.alive()
            check_acknowledged(postgres, db, b_writers)
            for w in a_writers:  # a request A answered after the pause may have timed out
                w.failures = [f for f in w.failures if not f.startswith("transport:")]
            check_acknowledged(postgres, db, a_writers)
            check_tree(postgres, db)
            # What an operator alerts on: B waited for the lock (seconds, in the histogram),
            # and who holds the lease now.
            waits = dict(
                (s[0]["le"], s[1])
                for s in metric_samples(b, "capability_anchor_store_lock_wait_seconds_bucket")
            )
            assert waits["+Inf"] > waits["1.0"], waits  # some waits past a second
            holders = metric_samples(b, "capability_anchor_sequencer_lease_holder")
            assert len(holders) == 1, holders
            assert holders[0][0]["holder"].startswith("capability-anchor lease "), holders
            assert holders[0][1] == 1.0
    audit_ok(a_dir)
    audit_ok(b_dir)


# --- a role with no grants --------------------------------------------------------------------


@dataclass
class Intruder:
    """A session of a role granted CONNECT and nothing else, holding every advisory key the
    log ever took, and what it was answered when it tried the log's table locks."""

    conn: psycopg.Connection
    refused: dict[str, str] = field(default_factory=dict)

    def try_every_lock(self) -> None:
        for key in OLD_KEYS:
            row = self.conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            assert row == (True,), key  # held for the whole test: the log no longer cares
        for table in ("write_lock", "sequencer_lease"):
            for mode in LOCK_MODES:
                self._refused(f"LOCK TABLE {table} IN {mode} MODE NOWAIT")
            self._refused(f"SELECT * FROM {table} FOR UPDATE NOWAIT")
        self._refused("SELECT sequencer_next_term()")

    def _refused(self, statement: str) -> None:
        try:
            with self.conn.transaction():
                self.conn.execute(statement.encode())
        except psycopg.Error as exc:
            self.refused[statement] = f"{exc.sqlstate} {exc.diag.message_primary}"
            return
        raise AssertionError(f"a CONNECT-only role could run {statement!r}")


def test_attack_a_role_with_only_connect_cannot_take_the_write_lock_or_the_lease(
    postgres: PgServer, tmp_path: Path
) -> None:
    db = postgres.fresh_database("intruder")
    with postgres.connect(db) as owner:
        for role in (f"svc_{db}", f"intruder_{db}", f"nobody_{db}"):
            owner.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    data = tmp_path / "data"
    done = run("init", "--data", data, "--store", postgres.url(db), "--iss", ISS,
               "--service-role", f"svc_{db}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    # init --service-role took CONNECT from PUBLIC: a role nobody granted anything cannot
    # even connect; the intruder is granted CONNECT, and nothing more.
    with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
        postgres.connect(db, f"nobody_{db}").close()
    with postgres.connect(db) as owner:
        owner.execute(
            sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                sql.Identifier(db), sql.Identifier(f"intruder_{db}")
            )
        )
    intruder = Intruder(postgres.connect(db, f"intruder_{db}"))
    try:
        port = free_port()
        argv = serve_argv(data, port, SERVE_ARGS, init=False)
        with serving(data, port=port, argv=argv, logs=tmp_path / "logs") as server:
            intruder.try_every_lock()
            headers = server.writer_headers()
            with server.client(timeout=60.0) as client:
                for n in range(6):
                    prove = "?prove=1" if n % 2 else ""
                    answer = client.post(
                        f"/records{prove}",
                        json={"records": [observation(n, "past-intruder")]},
                        headers=headers,
                    )
                    assert answer.status_code == 200, answer.text
                    if prove:
                        assert "proof" in answer.json()["entries"][0]
            assert "published a head" in server.stderr()
    finally:
        intruder.conn.close()
    assert intruder.refused, "nothing was tried"
    for statement, answer in intruder.refused.items():
        assert answer.startswith("42501 permission denied"), (statement, answer)
    assert rows(postgres, db, "SELECT count(*) FROM entries") == [(6,)]
    audit_ok(data)


# --- a wrong clock ------------------------------------------------------------------------------


@pytest.mark.parametrize("offset", ["+400", "+1d"], ids=["400s-ahead", "a-day-ahead"])
def test_attack_a_replica_with_a_wrong_clock_takes_no_writes(
    postgres: PgServer, tmp_path: Path, offset: str
) -> None:
    lib = ensure_tool(LIBFAKETIME, "faketime", "libfaketime", timeout=600)
    db, (data,) = new_log(postgres, tmp_path, copies=1)
    fake = FakeTime(lib, tmp_path / "faketime.rc")
    fake.set(offset)
    port = free_port()
    argv = serve_argv(data, port, SERVE_ARGS, init=False)
    with serving(data, port=port, argv=argv, env=fake.env, logs=tmp_path / "logs") as server:
        headers = server.writer_headers()
        with server.client(timeout=60.0) as client:
            for n, path in enumerate(("/records", "/records?prove=1")):
                answer = client.post(
                    path, json={"records": [observation(n, "skewed")]}, headers=headers
                )
                assert answer.status_code == 503, answer.text
                note = answer.json()["note"]
                assert "clock" in note and "database server" in note, note
                assert answer.headers.get("Retry-After") == "1"
    assert rows(postgres, db, "SELECT count(*) FROM entries") == [(0,)]
    assert rows(postgres, db, "SELECT count(*) FROM heads") == [(0,)]


# --- a crash of the database during COMMIT -------------------------------------------------------

OUTCOME_UNKNOWN = "outcome unknown:"
ROUNDS = 3


@dataclass(eq=False)
class Recorder(threading.Thread):
    """Sends batches of new records, each until it is answered 200, and keeps every answer
    each batch got, in order."""

    server: Any
    tag: str
    stopped: threading.Event = field(default_factory=threading.Event)
    batches: list[list[tuple[int, str, Any]]] = field(default_factory=list)
    ok_times: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        threading.Thread.__init__(self, daemon=True, name=f"recorder-{self.tag}")

    def ok_since(self, began: float) -> bool:
        return any(t > began for t in self.ok_times)

    def run(self) -> None:
        headers = self.server.writer_headers()
        n = 0
        with httpx.Client(base_url=self.server.url, timeout=60.0) as client:
            while not self.stopped.is_set():
                batch = [observation(n + i, self.tag) for i in range(1 + n % 3)]
                prove = "?prove=1" if n % 2 else ""
                n += len(batch)
                answers: list[tuple[int, str, Any]] = []
                self.batches.append(answers)
                while True:
                    got = client.post(f"/records{prove}", json={"records": batch}, headers=headers)
                    body = got.json()
                    answers.append((got.status_code, body.get("note", ""), body))
                    if got.status_code == 200:
                        self.ok_times.append(time.monotonic())
                        break
                    if self.stopped.is_set():
                        break
                    time.sleep(0.05)


def test_attack_a_crash_during_commit_never_answers_not_stored_for_a_stored_batch(
    postgres: PgServer, tmp_path: Path
) -> None:
    db, (data,) = new_log(postgres, tmp_path, copies=1)
    with replica(data) as server:
        recorders = [Recorder(server, f"c{n}") for n in range(4)]
        for r in recorders:
            r.start()
        try:
            for _ in range(ROUNDS):
                time.sleep(random.uniform(1.0, 2.0))
                postgres.restart_immediate()
                back = time.monotonic()
                wait_for(lambda b=back: all(r.ok_since(b) for r in recorders), 30.0, "writes")
            time.sleep(1.5)
        finally:
            for r in recorders:
                r.stopped.set()
            for r in recorders:
                r.join(90)
        assert server.alive()
    stored = {bytes(h).hex() for (h,) in rows(postgres, db, "SELECT leaf_hash FROM entries")}
    unknown = retried = 0
    for r in recorders:
        for answers in r.batches:
            final = answers[-1]
            if final[0] != 200:
                continue  # stopped while the database was away: checked below
            entries = final[2]["entries"]
            assert all(e["leaf_hash"] in stored for e in entries)
            notes = [note for status, note, _ in answers[:-1]]
            unknown += sum(1 for n in notes if n.startswith(OUTCOME_UNKNOWN))
            retried += bool(notes)
            if all(e["duplicate"] for e in entries) and notes:
                # An earlier answer was a 503, and one of those attempts stored the batch:
                # that one must have said it could not know (never "not stored").
                assert any(n.startswith(OUTCOME_UNKNOWN) for n in notes), answers[:-1]
            for status, note, _ in answers[:-1]:
                assert status == 503, (status, note)
    print(f"{retried} batches answered 503 before 200, {unknown} outcome-unknown answers")
    check_tree(postgres, db)
    audit_ok(data)


# --- the write lock's bounds, at the engine --------------------------------------------------


def session_state(server: PgServer, name: str, conn: psycopg.Connection) -> Any:
    """(state, wait_event) of `conn`'s session, as the owner sees it; None once it ended."""
    with server.connect(name) as owner:
        return owner.execute(
            "SELECT state, wait_event FROM pg_stat_activity WHERE pid = %s",
            (conn.info.backend_pid,),
        ).fetchone()


@pytest.fixture
def engine_db(postgres: PgServer) -> Iterator[tuple[PgServer, str, str]]:
    name = migrated_database(postgres, "locks")
    yield postgres, name, service_role(postgres, name)


def test_attack_a_writer_stalled_inside_a_copy_is_ended_by_the_next_writer(
    engine_db: tuple[PgServer, str, str],
) -> None:
    """A writer that took the write lock and stopped in the middle of a COPY: the server
    waits for its rows with no timeout of its own, so the writer waiting behind it ends it."""
    server, name, role = engine_db
    stalled = server.connect(name, role)
    store = PostgresLeader(server.conninfo(name, role), f"db {name}")
    try:
        stalled.execute("BEGIN")
        stalled.execute("LOCK TABLE write_lock IN EXCLUSIVE MODE")
        stalled.pgconn.send_query(b"COPY entries FROM STDIN")  # and no row ever comes
        began = time.monotonic()
        with store.write():
            took = time.monotonic() - began
            store._exec(
                "INSERT INTO entries (day, leaf_index, leaf_hash, claims, accepted_at)"
                " VALUES ('2026-11-01', 0, %s, '{}', 1)",
                (b"\x01" * 32,),
            )
        print(f"the stalled COPY was ended after {took:.2f} s")
        assert took < WINDOW_S
        assert session_state(server, name, stalled) is None  # ended
    finally:
        stalled.close()
        store.close()


def test_attack_a_lock_holder_whose_idle_timeout_is_disarmed_is_ended_by_the_next_writer(
    engine_db: tuple[PgServer, str, str],
) -> None:
    """A writer that took the write lock and stalled while its session's
    idle_in_transaction_session_timeout is not armed: a pipeline (psycopg's `executemany`)
    whose last message, a Flush, reaches the server after its ReadyForQuery disarms it, so
    the session stays idle in its transaction for good. Whether the Flush comes before or
    after is a race of the server's, so here the timeout is disarmed outright (0): what is
    tested is the writer waiting behind it, which ends it."""
    server, name, role = engine_db
    stalled = server.connect(name, role)
    store = PostgresLeader(server.conninfo(name, role), f"db {name}")
    try:
        stalled.execute("BEGIN")
        stalled.execute(
            "SET LOCAL idle_in_transaction_session_timeout = 0; "
            "LOCK TABLE write_lock IN EXCLUSIVE MODE"
        )
        time.sleep(STALL_S + 1)  # an armed timeout would have ended it by now
        state = session_state(server, name, stalled)
        assert state == ("idle in transaction", "ClientRead"), state
        began = time.monotonic()
        with store.write():
            took = time.monotonic() - began
        print(f"the stalled session was ended after {took:.2f} s more")
        assert took < WINDOW_S
        assert session_state(server, name, stalled) is None  # ended
    finally:
        stalled.close()
        store.close()


def test_attack_a_writer_stalled_right_after_storing_tiles_loses_its_session(
    engine_db: tuple[PgServer, str, str],
) -> None:
    """The store's own statements leave the server's idle timeout armed: a write transaction
    that stalls right after it stored tiles (a many-row insert, once a pipeline) loses its
    session to idle_in_transaction_session_timeout, and its write fails retryable with
    nothing stored."""
    server, name, role = engine_db
    store = PostgresStore(server.conninfo(name, role), f"db {name}")
    tile = (0, 0, 1, b"\x05" * 32, None)
    try:
        with pytest.raises(StoreIOError) as caught, store.write():
            store.insert_tiles("2026-11-01", [tile, (0, 1, 1, b"\x06" * 32, None)])
            time.sleep(STALL_S + 2)  # this writer stalls (no statement, no COMMIT)
            store.day_size("2026-11-01")
        assert caught.value.retryable
        assert store.tile("2026-11-01", 0, 0, 1) is None
    finally:
        store.close()


def test_attack_the_lease_session_ended_inside_a_signing_transaction_does_not_hold_it(
    engine_db: tuple[PgServer, str, str],
) -> None:
    """The lease's session ended (a pause past its timeout) after a write transaction
    signed once and before it signs again: the transaction's first fenced insert holds the
    term's row, so a new term taken then would wait for that very transaction. It signs
    again under its term (nobody can take a newer one before it commits), and the next
    transaction takes the lease anew."""
    server, name, role = engine_db
    store = PostgresStore(server.conninfo(name, role), f"db {name}")

    def head(size: int) -> HeadRow:
        root = bytes([size + 1]) * 32
        return HeadRow(DAY, size, False, root, 1, HEAD_KID, head_doc(DAY, size, root))

    try:
        with store.write():
            store.insert_head(head(0))
            with server.connect(name) as owner:
                ended = owner.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE application_name LIKE 'capability-anchor lease %'"
                ).fetchone()
            assert ended == (1,)
            store.insert_head(head(1))
        with store.write():
            store.insert_head(head(2))
    finally:
        store.close()
    terms = [t for _, t in rows(server, name, "SELECT tree_size, term FROM heads ORDER BY 1")]
    assert terms[0] == terms[1] < terms[2], terms


def test_attack_a_lock_held_past_10_s_gives_the_waiting_writer_busy(
    engine_db: tuple[PgServer, str, str],
) -> None:
    """A session that holds the write lock and is not stalled in a COPY (the owner's, idle in
        its transaction with no timeout): a writer gives up after 10 s, StoreBusy (503 with
    Retry-After, as every retryable 503)."""
    server, name, role = engine_db
    store = PostgresLeader(server.conninfo(name, role), f"db {name}")
    with server.connect(name) as holder:
        holder.execute("BEGIN")
        holder.execute("LOCK TABLE write_lock IN EXCLUSIVE MODE")
        began = time.monotonic()
        try:
            with pytest.raises(StoreBusy), store.write():
                pass
        finally:
            store.close()
        waited = time.monotonic() - began
    assert WINDOW_S - 0.5 <= waited < WINDOW_S + 5, waited


def test_attack_a_commit_whose_connection_is_cut_is_outcome_unknown_until_read_back(
    engine_db: tuple[PgServer, str, str],
) -> None:
    """The connection cut as the COMMIT goes out: `write()` cannot say "not stored" (a server
    may have made it durable first), so it says OutcomeUnknown; the batch's leaf hashes read
    back then tell (here: not stored, the session ended before its COMMIT arrived)."""
    server, name, role = engine_db
    store = PostgresStore(server.conninfo(name, role), f"db {name}")
    leaf = b"\x07" * 32
    try:
        with pytest.raises(OutcomeUnknown) as caught, store.write():
            store.insert_entries("2026-11-01", 0, [(leaf, b"{}")], 1)
            assert server.terminate_backends(name) >= 1
        assert caught.value.http_note().startswith("outcome unknown: ")
        assert "re-sending it is safe" in caught.value.http_note()
        assert store.existing("2026-11-01", [leaf]) == {}
    finally:
        store.close()


def test_a_writer_waiting_for_a_holder_before_it_reads_ahead_gives_up_quietly(
    engine_db: tuple[PgServer, str, str],
) -> None:
    """`wait_for_writers` (a writer's wait for the holder's COMMIT before its look-ahead)
    gives up on a holder that keeps the lock, without an error: ending a stalled holder is
    `write()`'s business. The connection it used goes on serving writes."""
    server, name, role = engine_db
    store = PostgresStore(server.conninfo(name, role), f"db {name}", max_size=1)
    leaf = b"\x09" * 32
    try:
        with server.connect(name) as holder:
            holder.execute("BEGIN")
            holder.execute("LOCK TABLE write_lock IN EXCLUSIVE MODE")
            store.wait_for_writers()
            holder.execute("COMMIT")
        store.wait_for_writers()
        with store.write():
            store.insert_entries("2026-11-01", 0, [(leaf, b"{}")], 1)
        assert store.existing("2026-11-01", [leaf]) == {leaf: 0}
    finally:
        store.close()
