#!/usr/bin/env python3
"""Replicas of one PostgreSQL log (#24, #37 item 5), in one run. Goals, not tests.

    .venv/bin/python tools/bench_replicas.py                   # 5 s phases
    .venv/bin/python tools/bench_replicas.py --seconds 20 --rounds 3 --failovers 5

1. Batches: `POST /records` of 1,000 new records, 4 clients posting back to back, against
   one replica, then split over two; rounds alternate (1, 2, 1, 2, ...).  Goal: two / one
   >= 0.9. Each round reads every replica's `/metrics` before and after: the write lock's
   hold (`capability_anchor_store_lock_hold_seconds`, every write transaction, checkpoints
   included) per 1,000 records appended, and the ceiling it implies: 1,000 / that hold, in
   records/s.                                                    Goal: >= 30,000 records/s.
   Then a projection for 1 to 8 replicas on machines of their own, from each part's
   measured cost per record (docs/explanation/replicas.md, "Past one machine").
2. One-record `POST /records` (wrk, 32 connections in all), one replica then two.
3. From kill -9 of the leader to the next signed head (by the standby).  Goal: <= 10 s.
4. `GET /proof` at 500/s from two replicas beside a writer at each `--write-rates`, for
   `--read-seconds` each (replicareads.py).     Goal: p99 <= 10 ms, writes at 200 records/s.

Each replica is a real `serve` on its own data dir copy and port, all sharing one real
PostgreSQL 15 started here (tests/kit/pgkit.py). On this machine the replicas, the database
and the load generator share the same cores: read the ratios and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx

import bench_api
import benchdoc
import replicareads
import wrkkit
from benchkit import loadavg, print_table, record, say
from capability_anchor.log import MAX_BATCH
from replicakit import (
    PgServer,
    Replica,
    cpu_line,
    cpu_seconds,
    fresh_log,
    newest,
    start_server,
    stop_server,
)

CONNECTIONS = 32
BATCH_CLIENTS = 4
CEILING_GOAL = 30_000  # records/s: 1,000 records / 33 ms of the write lock
RATIO_GOAL = 0.9
# Round trips to the database made while an append holds the write lock (read from the
# code: the lock and clock, sealed head, size, newest head, new leaves, dedupe probe, COPY,
# the tile and index inserts with their savepoints, COMMIT); each adds an RTT on a network.
LOCKED_ROUND_TRIPS = 18
HOLD = "capability_anchor_store_lock_hold_seconds"
APPENDED = "capability_anchor_records_appended_total"


@dataclass
class Round:
    replicas: int
    rate: float  # records acknowledged per second
    appended: float
    hold: float  # seconds the write lock was held, every replica's transactions
    writes: float  # write transactions
    cpu: dict[str, float]  # CPU seconds: "replicas", "postgres", "generator"
    load: float

    @property
    def ceiling(self) -> float:
        return self.appended / self.hold if self.hold else float("nan")


def _batch_round(
    server: PgServer, replicas: list[Replica], used: int, seconds: float, bodies: list[bytes]
) -> Round:
    token = replicas[0].token()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    share = [bodies[n::used] for n in range(used)]
    phases = [bench_api.Phase(r.url, "back to back") for r in replicas[:used]]

    async def load() -> None:
        clients = [bench_api.RawClient(r.port, BATCH_CLIENTS // used) for r in replicas[:used]]

        def poster(mine: list[bytes]) -> bench_api.Request:
            async def post(c: bench_api.Client, i: int) -> bench_api.Answer:
                return await c.post("/records", mine[i], headers)

            return post

        try:
            await asyncio.gather(
                *(
                    bench_api.closed_loop(
                        c,
                        poster(mine),
                        p,
                        len(mine),
                        BATCH_CLIENTS // used,
                        seconds,
                        bench_api.acknowledged,
                    )
                    for c, mine, p in zip(clients, share, phases, strict=True)
                )
            )
        finally:
            for c in clients:
                await c.aclose()

    before = [r.metrics() for r in replicas]
    cpu_before, began = cpu_seconds(server, replicas), time.monotonic()
    asyncio.run(load())
    cpu_after, wall = cpu_seconds(server, replicas), time.monotonic() - began
    after = [r.metrics() for r in replicas]
    delta: Counter[str] = Counter()
    for b, a in zip(before, after, strict=True):
        for name in (f"{HOLD}_sum", f"{HOLD}_count", APPENDED):
            delta[name] += a[name] - b[name]
    errors = sum(p.errors for p in phases)
    if errors:
        raise RuntimeError(f"batches refused: {[dict(p.statuses) for p in phases]}")
    used_cpu = {k: cpu_after[k] - cpu_before.get(k, 0.0) for k in cpu_after}
    cpu = {
        "replicas": sum(v for k, v in used_cpu.items() if k.startswith("http")),
        "postgres": used_cpu.get("postgres", 0.0),
        "generator": used_cpu["generator"],
    }
    say(f"  {used} replica(s): CPU (100% = one core) {cpu_line(cpu_before, cpu_after, wall)}")
    return Round(
        used,
        sum(p.items for p in phases) / max(p.span for p in phases),
        delta[APPENDED],
        delta[f"{HOLD}_sum"],
        delta[f"{HOLD}_count"],
        cpu,
        os.getloadavg()[0],
    )


def _batches(server: PgServer, work: Path, seconds: float, rounds: int) -> list[Round]:
    dirs = fresh_log(server, work / "batches", 2)
    replicas = [Replica(d, work / f"batches-{i}.log") for i, d in enumerate(dirs)]
    out = []
    try:
        _batch_round(server, replicas, 2, 1, bench_api.post_bodies(4, MAX_BATCH))  # warm-up
        for used in [1, 2] * rounds:
            bodies = bench_api.post_bodies(int(seconds * 10) + 4, MAX_BATCH)  # before timing
            out.append(_batch_round(server, replicas, used, seconds, bodies))
    finally:
        for replica in replicas:
            replica.stop()
    return out


def _per_record(rounds: list[Round]) -> dict[str, float]:
    """Seconds per record appended of each part, pooled over `rounds`."""
    appended = sum(r.appended for r in rounds)
    per = {k: sum(r.cpu[k] for r in rounds) / appended for k in ("replicas", "postgres")}
    per["hold"] = sum(r.hold for r in rounds) / appended
    per["records per write"] = appended / sum(r.writes for r in rounds)
    return per


def _projection(per: dict[str, float], cores: int, db_cores: int, rtt_ms: float) -> list[list[str]]:
    """records/s for 1 to 8 replicas, each on a machine of `cores` cores, the database on one
    of `db_cores`, each round trip under the lock `rtt_ms` longer: the least of the
    replicas' CPU, the database's CPU and the write lock (Amdahl's serial part)."""
    hold = per["hold"] + LOCKED_ROUND_TRIPS * rtt_ms / 1e3 / per["records per write"]
    rows = []
    for n in range(1, 9):
        limits = {
            "replicas' CPU": n * cores / per["replicas"],
            "database CPU": db_cores / per["postgres"],
            "write lock": 1 / hold,
        }
        part = min(limits, key=lambda k: limits[k])
        rows.append([str(n), f"{limits[part]:,.0f}", part])
    return rows


def _report_batches(rounds: list[Round], args: argparse.Namespace) -> None:
    print_table(
        ["replicas", "records/s", "lock held per 1,000", "ceiling records/s", "load"],
        [
            [
                str(r.replicas),
                f"{r.rate:,.0f}",
                f"{1e3 * r.hold / r.appended * 1e3:.1f} ms",
                f"{r.ceiling:,.0f}",
                f"{r.load:.2f}",
            ]
            for r in rounds
        ],
    )
    one = statistics.median(r.rate for r in rounds if r.replicas == 1)
    two = statistics.median(r.rate for r in rounds if r.replicas == 2)
    verdict = "ok" if two / one >= RATIO_GOAL else "MISSED"
    say(f"two / one (medians): {two / one:.2f} (goal >= {RATIO_GOAL}: {verdict})")
    per = _per_record(rounds)
    ceiling = 1 / per["hold"]
    verdict = "ok" if ceiling >= CEILING_GOAL else "MISSED"
    say(
        f"write lock held {per['hold'] * 1e6:.1f} ms per 1,000 records (every "
        f"round, {per['records per write']:,.0f} records per write transaction): ceiling "
        f"{ceiling:,.0f} records/s (goal >= {CEILING_GOAL:,}: {verdict})"
    )
    say(
        f"per record: replica CPU {per['replicas'] * 1e6:.0f} us, database CPU "
        f"{per['postgres'] * 1e6:.0f} us, write lock held {per['hold'] * 1e6:.1f} us"
    )
    say(
        f"projection, each replica on a machine of {args.cores} cores, the database on one of "
        f"{args.db_cores}, RTT {args.rtt_ms} ms x {LOCKED_ROUND_TRIPS} round trips under the lock:"
    )
    print_table(
        ["replicas", "records/s", "limited by"],
        _projection(per, args.cores, args.db_cores, args.rtt_ms),
    )


def _singles(server: PgServer, work: Path, seconds: float) -> list[list[str]]:
    """One-record POSTs under wrk: one replica, then both."""
    rows = []
    rates: dict[int, float] = {}
    for count in (1, 2):
        dirs = fresh_log(server, work / f"load{count}", 2)
        replicas = [Replica(d, work / f"load{count}-{i}.log") for i, d in enumerate(dirs)]
        try:
            script = wrkkit.script_file(work)
            args = wrkkit.post_args(replicas[0].token())
            before, began = cpu_seconds(server, replicas), time.monotonic()
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            urls = [r.url for r in replicas[:count]]
            results = asyncio.run(_wrk(urls, script, seconds, args))
            after, wall = cpu_seconds(server, replicas), time.monotonic() - began
            done = resource.getrusage(resource.RUSAGE_CHILDREN)  # wrk's, reaped
            after["wrk"] = done.ru_utime + done.ru_stime - children.ru_utime - children.ru_stime
            del after["generator"]
            say(f"  {count} replica(s): CPU (100% = one core) {cpu_line(before, after, wall)}")
            rates[count] = sum(r.accepted_rate for r in results)
            statuses = sum((r.statuses for r in results), start=Counter())
            worst = max(r.p99 for r in results)
            rows.append(
                [str(count), f"{rates[count]:,.0f}", f"{worst * 1e3:.1f}", str(dict(statuses))]
            )
        finally:
            for replica in replicas:
                replica.stop()
    rows.append(["2 / 1", f"{rates[2] / rates[1]:.2f}", "", ""])
    return rows


async def _wrk(
    urls: list[str], script: Path, seconds: float, args: list[str]
) -> list[wrkkit.WrkResult]:
    per = CONNECTIONS // len(urls)
    return list(await asyncio.gather(*(wrkkit.run(u, script, seconds, per, args) for u in urls)))


def _failover(server: PgServer, work: Path) -> float:
    dirs = fresh_log(server, work / "failover", 2)
    replicas = [Replica(d, work / f"failover-{i}.log") for i, d in enumerate(dirs)]
    headers = {"Authorization": f"Bearer {replicas[0].token()}"}
    try:
        leader, standby = replicas
        day = time.strftime("%Y-%m-%d", time.gmtime())
        for n in range(3):  # the first replica to sign leads
            body = {"records": [record(n, "lead")]}
            httpx.post(f"{leader.url}/records?prove=1", headers=headers, json=body, timeout=30)
        before = newest(standby.url, day)
        leader.proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        n = 0
        while True:
            n += 1
            body = {"records": [record(n, "after")]}
            httpx.post(f"{standby.url}/records", headers=headers, json=body, timeout=30)
            if newest(standby.url, day) > before:
                return time.monotonic() - killed
            if time.monotonic() - killed > 60:
                raise RuntimeError("no head signed within 60 s of the leader's kill")
            time.sleep(0.05)
    finally:
        for replica in replicas:
            replica.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5, help="each load phase or round")
    parser.add_argument("--rounds", type=int, default=2, help="batch rounds of each count")
    parser.add_argument("--failovers", type=int, default=3)
    parser.add_argument("--proof-records", type=int, default=100_000)
    parser.add_argument(
        "--read-seconds", type=float, default=10, help="each read phase (a batch is 5 s at 200/s)"
    )
    parser.add_argument(
        "--write-rates",
        default="-1,200,2000",
        help="the read phase's writer, records/s (0: flat out, -1: none)",
    )
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1, help="per replica")
    parser.add_argument("--db-cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--rtt-ms", type=float, default=0.0, help="replica to database")
    parser.add_argument("--phases", default="batches,singles,failover,reads", help="which to run")
    args = parser.parse_args()
    if "singles" in args.phases and not wrkkit.available():
        say("wrk is not installed: run `python3 tools/dev.py wrk`")
        return 2
    server = start_server()
    work = Path(tempfile.mkdtemp(prefix="bench-replicas-"))
    try:
        say(f"load average before: {loadavg()}")
        if "batches" in args.phases:
            say(f"POST /records, 1,000 new records each, {BATCH_CLIENTS} clients in all:")
            _report_batches(_batches(server, work, args.seconds, args.rounds), args)
        if "singles" in args.phases:
            say(f"POST /records, one new record per request, {CONNECTIONS} connections in all:")
            print_table(
                ["replicas", "acknowledged/s", "worst p99 ms", "statuses"],
                _singles(server, work, args.seconds),
            )
        if "failover" in args.phases and args.failovers:
            times = [_failover(server, work) for _ in range(args.failovers)]
            say(
                "kill -9 of the leader to the next signed head: "
                + ", ".join(f"{t:.2f} s" for t in times)
                + f" (max {max(times):.2f} s, goal <= 10 s)"
            )
        if "reads" in args.phases:
            for rate in (float(r) for r in args.write_rates.split(",")):
                replicareads.phase(server, work, args.proof_records, args.read_seconds, rate)
        say(f"load average after: {loadavg()}")
    finally:
        stop_server(server)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(benchdoc.run("replicas", main))
