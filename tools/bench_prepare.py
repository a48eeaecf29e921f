#!/usr/bin/env python3
"""The library's batched append against the SPEC floor (issue #23, item 3; #37, item 5).

    .venv/bin/python tools/bench_prepare.py                       # 200,000 records, 3 rounds each
    .venv/bin/python tools/bench_prepare.py --records 50000 --rounds 5

Builds `--records` records (`benchkit.record`), then alternates rounds A B A B ...: A is the
SPEC floor (`writefloors.spec_floor`: the log's own schema, triggers and `/record` index in a
bare sqlite3 store, sorted compact JSON, SHA-256, `executemany` of 1,000 a transaction), B is
the library as `capability-anchor append` drives it: `Log.prepare(records)` then
`Log.append_prepared(batch)` per 1,000 records, on a fresh log each round whose clock stands at
13:00 of the records' day. Prepare and store are timed apart, so the breakdown says where the
library's time goes. The ratio is the median over rounds of B's rate over the A run just
before it; the single-row floor (`writefloors.single_row_floor`, one durable commit per
record, `--single-records`) is printed beside it. Goal: the library's batched append >= 0.9x
the SPEC floor (tools/bench_writes.py's `library` phase runs the same rounds).
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import benchdoc
from benchkit import ISS, FixedClock, default_base, loadavg, print_table, record, say
from writefloors import FLOOR_BATCH, single_row_floor, spec_floor

GOAL = 0.9
# The log's clock: 13:00 UTC of the records' day (benchkit.CHECKED_AT is 12:34:56 that day, and
# the record rule refuses a checked_at from the future).
NOON = dt.datetime(2026, 11, 30, 13, tzinfo=dt.UTC).timestamp()


def library_round(records: Sequence[Any], folder: Path) -> tuple[float, float, float]:
    """(records/s, prepare seconds, store seconds) of one batched append into a fresh log."""
    from capability_anchor.log import Log

    log = Log.init(folder, iss=ISS, clock=FixedClock(NOON))
    prepare_s = store_s = 0.0
    try:
        for at in range(0, len(records), FLOOR_BATCH):
            t0 = time.perf_counter()
            prepared = log.prepare(records[at : at + FLOOR_BATCH])
            t1 = time.perf_counter()
            results = log.append_prepared(prepared)
            t2 = time.perf_counter()
            prepare_s += t1 - t0
            store_s += t2 - t1
            if results[-1].duplicate or results[-1].leaf_index != at + len(results) - 1:
                raise SystemExit(f"unexpected append result {results[-1]} at {at}")
    finally:
        log.close()
    return len(records) / (prepare_s + store_s), prepare_s, store_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000, help="records per round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each (A B A B ...), >= 3")
    ap.add_argument(
        "--single-records", type=int, default=5000, help="records for the single-row floor"
    )
    ap.add_argument("--dir", type=Path, help="parent of the temp dir (default: local-disk tmp)")
    args = ap.parse_args()
    if args.records < FLOOR_BATCH or args.rounds < 3:
        ap.error(f"--records must be >= {FLOOR_BATCH} and --rounds >= 3")

    records = [record(n) for n in range(args.records)]
    base = args.dir or default_base()
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench_prepare-", dir=base))
    say(f"# {args.records:,} records per round, {args.rounds} rounds of each, in {work}")
    say(f"# load average before: {loadavg()}")
    lines = []
    floors: list[float] = []
    libs: list[float] = []
    ratios: list[float] = []
    prepare_total = store_total = 0.0
    try:
        for n in range(args.rounds):
            floor = spec_floor(records, work, f"floor-{n}.sqlite3")
            lib, prepare_s, store_s = library_round(records, work / f"log-{n}")
            floors.append(floor)
            libs.append(lib)
            ratios.append(lib / floor)
            prepare_total += prepare_s
            store_total += store_s
            share = prepare_s / (prepare_s + store_s)
            lines.append(
                (
                    str(n + 1),
                    f"{floor:,.0f}/s",
                    f"{lib:,.0f}/s",
                    f"{lib / floor:.2f}x",
                    f"{prepare_s / args.records * 1e6:.1f} us ({share:.0%})",
                    f"{store_s / args.records * 1e6:.1f} us ({1 - share:.0%})",
                    loadavg(),
                )
            )
            shutil.rmtree(work / f"log-{n}", ignore_errors=True)
        single = single_row_floor(records[: args.single_records], work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    head = ("round", "SPEC floor", "library", "ratio", "prepare/rec", "store/rec", "load avg")
    print_table(head, lines)
    ratio = statistics.median(ratios)
    share = prepare_total / (prepare_total + store_total)
    say("")
    say(
        f"SPEC floor {statistics.median(floors):,.0f}/s, library batched append "
        f"{statistics.median(libs):,.0f}/s (medians); single-row floor {single:,.0f}/s "
        f"({args.single_records:,} records, one durable commit each)"
    )
    say(f"time in the library: prepare {share:.0%}, store {1 - share:.0%}")
    say(f"ratio library / SPEC floor: {ratio:.2f}x (median of {args.rounds} rounds)")
    say(f"load average after: {loadavg()}")
    say(f"library batched append >= {GOAL}x SPEC floor: {'MET' if ratio >= GOAL else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(benchdoc.run("prepare", main))
