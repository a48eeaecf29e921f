#!/usr/bin/env python3
"""The PostgreSQL write lock's hold per 1,000-record batch, in-process (#37 item 5): one
replica, two taking turns (each finds the other's batch), then two contending (a thread
each, both appending at once: one waits for the lock while the other holds it), on a real
PostgreSQL started here. Prints the hold per 1,000 records, the ceiling it implies (1,000 /
hold in seconds) and where the hold goes (the store calls made under the lock), with the
load average. The floor, interleaved batch by batch: the same entries and `/record` index
rows by a bare psycopg COPY each, in a transaction of their own under the same lock, to its
COMMIT.

    .venv/bin/python tools/bench_lockhold.py --batches 20 --rounds 2

In-process: the replicas share one interpreter (and its GIL), where bench_replicas.py runs
each as its own `serve`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import benchdoc
from benchkit import ISS, record, say

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from capability_anchor.log import Log
from capability_anchor.log.batch import Prepared
from capability_anchor.log.days import utc_day
from capability_anchor.store import server_key_digest
from capability_anchor.store.postgres import base
from capability_anchor.store.postgres.writelock import take_write_lock
from kit.pgkit import start_server, stop_server

_TIMED = (
    "existing",
    "insert_entries",
    "insert_tiles",
    "insert_servers",
    "leaf_hashes",
    "entries",
    "day_size",
    "newest_head",
    "edge_partials",
    "sealed_head",
)


def _timed(log: Log, spent: dict[str, float]) -> None:
    """Time the store calls of `log` made inside a write transaction."""
    store: Any = log.store
    writing = store.write

    @contextmanager
    def write() -> Iterator[None]:
        with writing():
            store._local.writing = True
            try:
                yield
            finally:
                store._local.writing = False
                began = time.perf_counter()
        spent["commit"] += time.perf_counter() - began

    store.write = write
    for name in _TIMED:
        inner = getattr(store, name)

        def wrap(*a: Any, _inner: Callable[..., Any] = inner, _n: str = name, **k: Any) -> Any:
            if not getattr(store._local, "writing", False):
                return _inner(*a, **k)
            began = time.perf_counter()
            try:
                return _inner(*a, **k)
            finally:
                spent[_n] += time.perf_counter() - began

        setattr(store, name, wrap)


class _Holds:
    """Stands for the metrics in `base.py`: the holds summed (the service's histogram)."""

    def __init__(self) -> None:
        self.total, self.count = 0.0, 0
        self.lock_hold = self

    def observe(self, seconds: float) -> None:
        self.total += seconds
        self.count += 1


_HOLDS = _Holds()
base.observe = lambda: _HOLDS  # type: ignore[assignment,return-value]


def _hold() -> tuple[float, float]:
    return _HOLDS.total, _HOLDS.count


def _append_all(log: Log, batches: list[list[Prepared]]) -> None:
    for prepared in batches:
        log.append_prepared(prepared)


def _floor(conn: Any, first: int, batch: list[Prepared]) -> float:
    """The seconds from the lock to the COMMIT of `batch`'s rows by two bare COPYs."""
    day = utc_day(time.time())
    entries = [(day, first + n, h, b, int(time.time())) for n, (h, b, _) in enumerate(batch)]
    servers = sorted(
        (d, day, first + n) for n, (_, _, k) in enumerate(batch) for d in map(server_key_digest, k)
    )
    with conn.transaction():
        take_write_lock(conn, "floor")
        began = time.perf_counter()
        for table, rows, types in (
            ("entries", entries, ("text", "int8", "bytea", "bytea", "int8")),
            ("servers (key, day, leaf_index)", servers, ("text", "text", "int8")),
        ):
            base._copy(conn, table, types, rows)
    return time.perf_counter() - began


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--batches", type=int, default=20, help="batches per phase")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    say(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    server = start_server()
    work = Path(tempfile.mkdtemp(prefix="lockhold-"))
    try:
        url = server.url(server.fresh_database("lockhold"))
        Log.init(work / "r0", iss=ISS, store=url).close()
        floor_db = server.fresh_database("floor")
        Log.init(work / "floor", iss=ISS, store=server.url(floor_db)).close()
        conn = server.connect(floor_db)
        conn.autocommit = True
        conn.execute("SET capability_anchor.leaf_probe = off")
        floored = 0  # the floor database's size
        shutil.copytree(work / "r0", work / "r1")
        logs = [
            Log.open(work / f"r{n}", background_checkpoints=False, handoff=False) for n in (0, 1)
        ]
        spent: dict[str, float] = defaultdict(float)
        for log in logs:
            _timed(log, spent)
        n = 0
        for r in range(args.rounds):
            for replicas, mode in ((1, "one replica"), (2, "two taking turns"), (2, "contending")):
                batches = [
                    logs[0].prepare(
                        [record(n + b * args.batch + i, "h") for i in range(args.batch)]
                    )
                    for b in range(args.batches)
                ]
                n += args.batches * args.batch
                spent.clear()
                s0, c0 = _hold()
                wall, floor_s = 0.0, 0.0
                if mode == "contending":
                    threads = [
                        threading.Thread(target=_append_all, args=(logs[k], batches[k::2]))
                        for k in (0, 1)
                    ]
                    began = time.perf_counter()
                    for t in threads:
                        t.start()
                    for t in threads:
                        t.join()
                    wall = time.perf_counter() - began
                for b, prepared in enumerate(batches):
                    if mode != "contending":
                        began = time.perf_counter()
                        logs[b % replicas].append_prepared(prepared)
                        wall += time.perf_counter() - began
                    floor_s += _floor(conn, floored, prepared)
                    floored += len(prepared)
                s1, c1 = _hold()
                records = args.batches * args.batch
                per = (s1 - s0) / records * 1000
                parts = ", ".join(
                    f"{k} {v / records * 1e6:.1f}"
                    for k, v in sorted(spent.items(), key=lambda x: -x[1])
                )
                say(
                    f"round {r + 1}, {mode}: {records / wall:,.0f} records/s, "
                    f"lock held {per * 1000:.1f} ms per 1,000 ({c1 - c0:.0f} holds), "
                    f"ceiling {1000 / per:,.0f} records/s, load {os.getloadavg()[0]:.2f}"
                )
                say(f"  under the lock, ms per 1,000: {parts}")
                fl = floor_s / records * 1e6
                say(
                    f"  floor (bare COPY, entries and index rows): {fl:.1f} ms per 1,000; "
                    f"hold / floor {per * 1000 / fl:.2f}"
                )
        for log in logs:
            log.close()
    finally:
        stop_server(server)
        shutil.rmtree(work, ignore_errors=True)
    say(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(benchdoc.run("lockhold", main))
