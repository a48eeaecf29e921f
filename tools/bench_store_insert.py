#!/usr/bin/env python3
"""The append path's insert: raw `executemany` (what `Store.insert_entries` does) against
sqlite-utils' `Table.insert_all` on the same rows, into the real schema (STRICT, CHECKs,
the dedupe index and the append-only triggers), each batch in one write transaction.

    .venv/bin/python tools/bench_store_insert.py                    # 100 batches of 500
    .venv/bin/python tools/bench_store_insert.py --batches 40 --batch 1000

Rounds alternate between the two ways, each on a day of its own (so the next-index trigger
sees the same sizes), and the figure is the median per round; the machines here are noisy,
so only the ratio measured in the same run means much.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import benchdoc
from capability_anchor.store.sqlite import SqliteStore
from capability_anchor.store.sqlite.engine import SqliteEngine
from capability_anchor.store.sqlite.schema import database


def _rows(day: str, first: int, count: int) -> list[tuple[bytes, bytes]]:
    return [
        (os.urandom(32), b'{"kind":"server","n":%d,"day":"%s"}' % (first + n, day.encode()))
        for n in range(count)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=100, help="batches per way per round")
    parser.add_argument("--batch", type=int, default=500, help="rows per batch")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        SqliteEngine().create(data, lambda store: None)
        store = SqliteEngine().open(data, upkeep=False)
        assert isinstance(store, SqliteStore)
        db = database(store._writer)  # the tool measures the writer connection itself
        entries = db.table("entries")
        times: dict[str, list[float]] = {"executemany": [], "sqlite-utils insert_all": []}
        try:
            for r in range(args.rounds):
                for way in times:
                    day = f"round-{r}-{way}"  # entries.day is any text: no date needed here
                    batches = [_rows(day, b * args.batch, args.batch) for b in range(args.batches)]
                    started = time.perf_counter()
                    for b, rows in enumerate(batches):
                        first = b * args.batch
                        with store.write():
                            if way == "executemany":
                                store.insert_entries(day, first, rows, 1_790_000_000)
                            else:
                                entries.insert_all(
                                    (
                                        {
                                            "day": day,
                                            "leaf_index": first + n,
                                            "leaf_hash": h,
                                            "claims": c,
                                            "accepted_at": 1_790_000_000,
                                        }
                                        for n, (h, c) in enumerate(rows)
                                    ),
                                    batch_size=args.batch,
                                )
                    times[way].append(time.perf_counter() - started)
        finally:
            store.close()
    total = args.batches * args.batch
    base = statistics.median(times["executemany"])
    for way, runs in times.items():
        median = statistics.median(runs)
        print(
            f"{way:>24}: {total / median:>9,.0f} rows/s  median {median:.3f} s per "
            f"{total:,} rows  ({median / base:.2f}x executemany)"
        )


if __name__ == "__main__":
    sys.exit(benchdoc.run("store_insert", main))
