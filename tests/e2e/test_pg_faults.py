"""A served PostgreSQL log while its database fails under it, with real processes: the
server crashed and recovered (`pg_ctl restart -m immediate`) or every session of the log cut
(`pg_terminate_backend`) while writers go on. Writes answer 503 while the database is gone,
never 500; they work again without restarting the service; every acknowledged record is in
the database at its one index, and the audit passes. Helpers: tests/e2e/test_pg_replicas.py."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.test_pg_replicas import (
    Writer,
    audit_ok,
    check_acknowledged,
    check_proofs,
    check_tree,
    max_head,
    new_log,
    replica,
    wait_for,
    writing,
)
from tests.kit.pgkit import PgServer

RESUME_WITHIN_S = 20.0
OUTAGE_S = 7.0  # past the 5 s a write waits for a connection: some must answer 503
# A line of the service's plain log, or one of the two lines `serve` prints at start.
FORMATTED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \w+ |capability-anchor: ")


def restart(pg: PgServer, db: str) -> None:
    pg.restart_immediate()


def terminate(pg: PgServer, db: str) -> None:
    assert pg.terminate_backends(db) >= 1


def outage(pg: PgServer, db: str) -> None:
    """The server crashed and down for 7 s (writes arrive meanwhile), then started."""
    pg.pg_ctl("-m", "immediate", "stop")
    try:
        time.sleep(OUTAGE_S)
    finally:
        pg.start()


@pytest.mark.parametrize(
    "fault",
    [restart, terminate, outage],
    ids=["restart-immediate", "terminate-backends", "down-7s"],
)
def test_attack_the_database_fails_under_writes_503_then_resumes(
    postgres: PgServer, tmp_path: Path, fault: Callable[[PgServer, str], None]
) -> None:
    db, (data,) = new_log(postgres, tmp_path, copies=1)
    with replica(data) as server:
        pid = server.pid
        writers: tuple[Writer, ...] = (Writer(server, "w1"), Writer(server, "w2", prove=True))
        writers += (Writer(server, "w3", prove=False),)
        with writing(*writers):
            # Writes under way and signed before the fault (a wait, not a fixed sleep: on a
            # loaded machine the first head may take longer than any guess).
            wait_for(lambda: max_head(postgres, db)[0] > 0, RESUME_WITHIN_S, "a first head")
            size, term = max_head(postgres, db)
            assert size > 0
            began = time.monotonic()
            fault(postgres, db)
            back = time.monotonic()
            took = wait_for(
                lambda: all(any(t > back for t in w.ok_times) for w in writers),
                RESUME_WITHIN_S,
                "every writer acknowledged again",
            )
            resumed_size = max_head(postgres, db)[0]
            wait_for(
                lambda: max_head(postgres, db)[0] > resumed_size,
                RESUME_WITHIN_S,
                "a head signed after the fault",
            )
            time.sleep(1.0)
        unavailable = [w.unavailable for w in writers]
        print(
            f"{fault.__name__}: fault {back - began:.2f} s, writes again {took:.2f} s after,"
            f" 503s {unavailable}, term {term} -> {max_head(postgres, db)[1]}"
        )
        # Never a 500, never a cut connection: a 503 or a success (Writer.failures).
        assert all(w.transport_errors == 0 for w in writers)
        if fault is outage:  # 7 s without a database: the writers were told so
            assert sum(unavailable) > 0, unavailable
        assert server.alive() and server.pid == pid
        check_acknowledged(postgres, db, writers)
        check_tree(postgres, db)
        assert check_proofs((writers[1],), {"w2": server}) > 0
        logged = server.stderr()
        assert '" 500 ' not in logged, logged[-3000:]
        # The driver's reports of the lost connections are the service's log lines too (one
        # line each, in its format), not bare text from Python's last-resort handler.
        stray = [line for line in logged.splitlines() if not FORMATTED.match(line)]
        assert not stray, stray[:5]
        if fault is outage:
            assert " warning psycopg.pool: " in logged, logged[-3000:]
        with server.client() as client:
            assert client.get("/healthz").status_code == 200
    audit_ok(data)
