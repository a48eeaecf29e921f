#!/usr/bin/env python3
"""The PostgreSQL engine against SQLite on this machine (#24), in one run. Goals, not tests.

    .venv/bin/python tools/bench_pg.py                    # 20 batches x 1,000 records, 3 rounds
    .venv/bin/python tools/bench_pg.py --batches 50 --rounds 5

1. Batched appends: `--batches` batches of `--batch` records, each one durable
   `Log.append` (validation, JCS, leaf hashes, the store's insert and commit), into a fresh
   log on each engine; the engines alternate round by round so both see the same load.
   Goal: PostgreSQL / SQLite >= 0.5.
2. Append to signed checkpoint: after each batch, `Log.checkpoint()` (the head signed and
   the history's checkpoint made), timed alone. Goal: what it is on SQLite (ratio ~1).
3. Append to signed checkpoint as a client sees it (`--served-seconds`, 0 to skip): a real
   `serve --checkpoint-interval 1` on each engine, a writer posting 1,000-record batches
   at `--served-rate` records/s beside a prober that posts one record every 0.2 s and
   polls `GET /roots/<day>` every 50 ms (writeprobe.py, as bench_writes.py's): p50 and p99
   of (a head covering the probe seen - its 200). Goal: PG/SQLite p99 ~1.

PostgreSQL is a real server started here (initdb and pg_ctl in a temporary folder, as the
tests do: tests/kit/pgkit.py), on a unix socket, with its defaults (fsync on,
synchronous_commit on); SQLite is the default data dir (WAL, synchronous=FULL), both on the
same disk. The machine is shared: read the ratios and the load average, not the rates.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import bench_api
import benchdoc
import writeprobe
from benchkit import ISS, loadavg, print_table, quantile, record, say
from replicakit import Replica

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from capability_anchor.log import Log
from kit.pgkit import PgServer, start_server, stop_server


def _one(data: Path, store: str | None, batches: int, batch: int, tag: str) -> tuple[float, float]:
    """(records per second appended, median seconds of a checkpoint after a batch)."""
    shutil.rmtree(data, ignore_errors=True)
    with Log.init(data, iss=ISS, store=store) as log:
        spent, checkpoints = 0.0, []
        for b in range(batches):
            records = [record(b * batch + i, tag) for i in range(batch)]
            start = time.perf_counter()
            log.append(records)
            spent += time.perf_counter() - start
            start = time.perf_counter()
            log.checkpoint()
            checkpoints.append(time.perf_counter() - start)
    return batches * batch / spent, statistics.median(checkpoints)


async def _served_load(replica: Replica, seconds: float, rate: float) -> writeprobe.Probe:
    token = (replica.data / "writer-token").read_text().strip()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    bodies = bench_api.post_bodies(int(seconds * rate / 1000) + 1, 1000) if rate > 0 else []
    writer, poster, poller = (bench_api.RawClient(replica.port, 1) for _ in range(3))
    stop = asyncio.Event()

    async def write() -> None:
        began = time.monotonic()
        for i, body in enumerate(bodies):
            await asyncio.sleep(max(0.0, began + i * 1000 / rate - time.monotonic()))
            status, _ = await writeprobe.ask(writer, "POST", "/records", body, headers)
            if status != 200:
                raise RuntimeError(f"a batch was refused with {status}")

    async def timer() -> None:
        await asyncio.sleep(seconds)
        stop.set()

    try:
        probe, *_ = await asyncio.gather(
            writeprobe.run_probe(poster, poller, headers, stop, 1.0, "probe"), write(), timer()
        )
    finally:
        for c in (writer, poster, poller):
            await c.aclose()
    return probe


def _served(data: Path, store: str | None, seconds: float, rate: float) -> writeprobe.Probe:
    """Phase 3 on one engine: a fresh log served by a real `serve` (interval 1 s)."""
    shutil.rmtree(data, ignore_errors=True)
    with Log.init(data, iss=ISS, store=store):
        pass
    replica = Replica(data, data.parent / f"{data.name}.log")
    try:
        return asyncio.run(_served_load(replica, seconds, rate))
    finally:
        replica.stop()


def _served_phase(server: PgServer, work: Path, seconds: float, rate: float) -> None:
    rows, probes = [], {}
    for name, store in (("SQLite", None), ("PostgreSQL", server.url(server.fresh_database("s")))):
        probe = probes[name] = _served(work / f"served-{name.lower()}", store, seconds, rate)
        waits = sorted(probe.waits)
        rows.append(
            [
                name,
                f"{probe.acked}/{probe.sent}",
                f"{quantile(waits, 0.5):.2f} s",
                f"{quantile(waits, 0.99):.2f} s",
                f"{waits[-1]:.2f} s" if waits else "-",
                str(probe.uncovered),
            ]
        )
    say(
        f"append to a covering signed head, served (checkpoint interval 1 s), a writer at "
        f"{rate:,.0f} records/s beside the prober, {seconds:g} s per engine:"
    )
    print_table(["engine", "probes acked", "p50", "p99", "max", "never covered"], rows)
    lite, pg = probes["SQLite"].p99(), probes["PostgreSQL"].p99()
    say(f"PG/SQLite p99 {pg / lite:.2f} (goal ~1: the interval, not the engine, decides)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--served-seconds", type=float, default=20)
    parser.add_argument("--served-rate", type=float, default=2000)
    args = parser.parse_args()
    server: PgServer = start_server()
    work = Path(tempfile.mkdtemp(prefix="bench-pg-"))
    try:
        say(f"load average before: {loadavg()}")
        rows, ratios, cp_ratios = [], [], []
        for r in range(args.rounds):
            url = server.url(server.fresh_database("bench"))
            lite, lite_cp = _one(work / "sqlite", None, args.batches, args.batch, f"s{r}")
            pg, pg_cp = _one(work / "pg", url, args.batches, args.batch, f"p{r}")
            ratios.append(pg / lite)
            cp_ratios.append(pg_cp / lite_cp)
            rows.append(
                [
                    str(r + 1),
                    f"{lite:,.0f}",
                    f"{pg:,.0f}",
                    f"{pg / lite:.2f}",
                    f"{lite_cp * 1000:.1f}",
                    f"{pg_cp * 1000:.1f}",
                    f"{pg_cp / lite_cp:.2f}",
                ]
            )
        say(f"{args.batches} batches of {args.batch:,} records per engine per round")
        print_table(
            [
                "round",
                "SQLite rec/s",
                "PostgreSQL rec/s",
                "PG/SQLite (goal >= 0.5)",
                "SQLite checkpoint ms",
                "PG checkpoint ms",
                "PG/SQLite",
            ],
            rows,
        )
        say(
            f"median append ratio {statistics.median(ratios):.2f} (goal >= 0.5); median "
            f"checkpoint time ratio {statistics.median(cp_ratios):.2f}"
        )
        if args.served_seconds > 0:
            _served_phase(server, work, args.served_seconds, args.served_rate)
        say(f"load average after: {loadavg()}")
    finally:
        stop_server(server)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(benchdoc.run("pg", main))
