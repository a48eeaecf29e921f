#!/usr/bin/env python3
"""Replicas of one PostgreSQL log (#24), in one run. Goals, not tests.

    .venv/bin/python tools/bench_replicas.py                 # 10 s load phases, 3 failovers
    .venv/bin/python tools/bench_replicas.py --seconds 20 --failovers 5

1. `POST /records` (one new record per request, wrk, 32 connections in all) against one
   replica, then the same load split over two replicas at once.   Goal: two / one >= 1.5.
2. From kill -9 of the leader to the next head signed (by the standby, seen at its
   `/roots/<day>`), while one writer posts to the standby.        Goal: <= 10 s.
3. `GET /proof?day=D&index=I` (I uniform over a `--proof-records` day), open loop at 500/s
   in all, half from each of two replicas, with no writes, then while one writer posts
   1,000-record batches to the first, back to back and at 200, 500 and 2,000 records/s
   (`--write-rates`; bench_api.py's generator and client). Warmed up first as replicas
   that have served a while are: a proof in every full tile, one batch written and its head
   seen by both. 100 sampled answers are verified, each against the head the *other*
   replica serves.                                                 Goal: p99 <= 10 ms.

Each replica is a real `serve` on its own data dir copy and port, all sharing one real
PostgreSQL 15 started here (tests/kit/pgkit.py). The two cores are shared by the
replicas, the database and wrk: on this machine the load generator and the database
compete with the replicas for the same cores, so the ratio says little about separate
machines. Read the ratios and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

import bench_api
import benchdoc
import wrkkit
from benchkit import ISS, loadavg, ms, print_table, processes, quantile, record, say
from capability_anchor import merkle
from capability_anchor.leaf import leaf_hash
from capability_anchor.log import MAX_BATCH, Log

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from kit.pgkit import PgServer, start_server, stop_server

CLI = Path(sys.executable).parent / "capability-anchor"
CONNECTIONS = 32


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Replica:
    def __init__(self, data: Path, log: Path) -> None:
        self.data = data
        self.port = _port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [str(CLI), "serve", "--data", str(data), "--port", str(self.port)]
        argv += ["--checkpoint-interval", "1", "--rate-limit", "0"]
        self.log = log.open("w")
        self.proc = subprocess.Popen(argv, stderr=self.log, start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{self.url}/healthz", timeout=1)
                return
            except httpx.HTTPError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"the replica on {self.port} did not start") from None
                time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def _cpu_seconds(replicas: list[Replica]) -> dict[str, float]:
    """CPU seconds used so far by each replica (its process group), by every `postgres`
    process, and by this process (the generator of the read phase)."""
    groups = {r.proc.pid: r.url for r in replicas}
    used: Counter[str] = Counter()
    for comm, group, cpu in processes():
        if group in groups:
            used[groups[group]] += cpu
        elif comm in ("postgres", "wrk"):
            used[comm] += cpu
    used["generator"] = time.process_time()
    return dict(used)


def _cpu_line(before: dict[str, float], after: dict[str, float], wall: float) -> str:
    """Each one's share of a core over `wall` seconds (100% = one core of the two)."""
    return ", ".join(f"{k} {(after[k] - before.get(k, 0.0)) / wall:.0%}" for k in sorted(after))


def _log(server: PgServer, work: Path, replicas: int) -> list[Path]:
    url = server.url(server.fresh_database("replicas"))
    first = work / "r0"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    argv = [str(CLI), "init", "--data", str(first), "--store", url, "--iss", ISS]
    subprocess.run(argv, check=True, capture_output=True)
    dirs = [first]
    for n in range(1, replicas):
        shutil.copytree(first, work / f"r{n}")
        dirs.append(work / f"r{n}")
    return dirs


async def _load(
    urls: list[str], token: str, seconds: float, script: Path
) -> list[wrkkit.WrkResult]:
    per = CONNECTIONS // len(urls)
    runs = [wrkkit.run(u, script, seconds, per, wrkkit.post_args(token)) for u in urls]
    return list(await asyncio.gather(*runs))


def _throughput(server: PgServer, work: Path, seconds: float) -> list[list[str]]:
    rows = []
    rates: dict[int, float] = {}
    cpu: dict[int, str] = {}
    for count in (1, 2):
        dirs = _log(server, work / f"load{count}", 2)
        replicas = [Replica(d, work / f"load{count}-{i}.log") for i, d in enumerate(dirs)]
        try:
            token = (dirs[0] / "writer-token").read_text().strip()
            script = wrkkit.script_file(work)
            used = [r.url for r in replicas[:count]]
            before, began = _cpu_seconds(replicas), time.monotonic()
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            results = asyncio.run(_load(used, token, seconds, script))
            after, wall = _cpu_seconds(replicas), time.monotonic() - began
            done = resource.getrusage(resource.RUSAGE_CHILDREN)  # wrk's, reaped
            after["wrk"] = done.ru_utime + done.ru_stime - children.ru_utime - children.ru_stime
            del after["generator"]
            cpu[count] = _cpu_line(before, after, wall)
            rate = sum(r.accepted_rate for r in results)
            rates[count] = rate
            worst = max(r.p99 for r in results)
            others = sum(r.other for r in results)
            statuses = sum((r.statuses for r in results), start=Counter())
            rows.append(
                [str(count), f"{rate:,.0f}", f"{worst * 1e3:.1f}", str(others), str(dict(statuses))]
            )
        finally:
            for replica in replicas:
                replica.stop()
    ratio = rates[2] / rates[1] if rates[1] else float("nan")
    rows.append(["2 / 1", f"{ratio:.2f} (goal >= 1.5)", "", "", ""])
    for count, line in cpu.items():
        say(f"  CPU with {count} replica(s) loaded (100% = one core): {line}")
    return rows


def _newest(url: str, day: str) -> int:
    answer = httpx.get(f"{url}/roots/{day}", timeout=5)
    return int(json.loads(answer.text).get("tree_size", 0)) if answer.status_code == 200 else 0


def _failover(server: PgServer, work: Path) -> float:
    dirs = _log(server, work / "failover", 2)
    replicas = [Replica(d, work / f"failover-{i}.log") for i, d in enumerate(dirs)]
    token = (dirs[0] / "writer-token").read_text().strip()
    headers = {"Authorization": f"Bearer {token}"}
    try:
        leader, standby = replicas
        day = time.strftime("%Y-%m-%d", time.gmtime())
        for n in range(3):  # the first replica to sign leads
            body = {"records": [record(n, "lead")]}
            httpx.post(f"{leader.url}/records?prove=1", headers=headers, json=body, timeout=30)
        before = _newest(standby.url, day)
        leader.proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        n = 0
        while True:
            n += 1
            body = {"records": [record(n, "after")]}
            httpx.post(f"{standby.url}/records", headers=headers, json=body, timeout=30)
            if _newest(standby.url, day) > before:
                return time.monotonic() - killed
            if time.monotonic() - killed > 60:
                raise RuntimeError("no head signed within 60 s of the leader's kill")
            time.sleep(0.05)
    finally:
        for replica in replicas:
            replica.stop()


PROOF_RATE = 500
PROOF_P99_GOAL_S = 0.010


def _built(server: PgServer, work: Path, records: int) -> list[Path]:
    """A PostgreSQL log holding `records` records (benchkit.record(i) at index i) in today's
    day, checkpointed, and two data dirs of it."""
    url = server.url(server.fresh_database("reads"))
    first = work / "reads" / "r0"
    shutil.rmtree(first.parent, ignore_errors=True)
    with Log.init(first, iss=ISS, store=url) as log:
        for b in range(0, records, MAX_BATCH):
            log.append([record(i) for i in range(b, min(records, b + MAX_BATCH))])
        log.checkpoint()
    shutil.copytree(first, first.parent / "r1")
    return [first, first.parent / "r1"]


async def _reads(
    replicas: list[Replica], day: str, records: int, seconds: float, write_rate: float
) -> list[Any]:
    """GET /proof, open loop, PROOF_RATE in all split over the replicas, while one writer
    posts 1,000-record batches back to back to the first; the phases and what was checked."""
    rng = random.Random(1)
    token = (replicas[0].data / "writer-token").read_text().strip()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    clients = [bench_api.RawClient(r.port, 16) for r in replicas]
    per = PROOF_RATE / len(replicas)
    indexes = [rng.randrange(records) for _ in range(int(PROOF_RATE * seconds) + 1)]
    urls = [f"/proof?day={day}&index={i}" for i in indexes]
    kept: list[dict[int, bytes]] = [{} for _ in replicas]
    sample = set(rng.sample(range(len(urls)), min(100, len(urls))))

    async def get(c: bench_api.RawClient, i: int) -> tuple[int, bytes]:
        return await c.get(urls[i])

    def keeper(n: int) -> Any:
        def keep(i: int, body: bytes) -> None:
            if i in sample:
                kept[n][i] = body

        return keep

    # Warm-up (not measured), as on replicas that have been serving for a while: a proof in
    # every full level-0 tile of the day (so the measured proofs meet the tile cache a
    # running replica has, where 300 random ones left about half of them to the measured
    # phase) and, with a writer, one batch written and its head seen by every replica (the
    # write path's first use is not what a steady writer costs).
    warm_urls = [f"/proof?day={day}&index={i}" for i in range(0, records, merkle.TILE_WIDTH)]

    async def get_warm(c: bench_api.RawClient, i: int) -> tuple[int, bytes]:
        return await c.get(warm_urls[i])

    warm = bench_api.Phase("warm-up", "")
    for c in clients:
        await bench_api.closed_loop(c, get_warm, warm, len(warm_urls), 8, 30.0)
    more = bench_api.post_bodies(int(seconds * 20) + 2, MAX_BATCH) if write_rate >= 0 else []
    if more:
        first = bench_api.RawClient(replicas[0].port, 1)
        try:
            status, _ = await first.post("/records", more.pop(), headers)
        finally:
            await first.aclose()
        if status != 200:
            raise RuntimeError(f"the warm-up batch was answered {status}")
        _heads_reach(replicas, day, records + MAX_BATCH)  # not measured: may block

    paced_from = time.monotonic()

    async def post(c: bench_api.RawClient, i: int) -> tuple[int, bytes]:
        if write_rate:  # batch i is due at i * MAX_BATCH / write_rate s
            await asyncio.sleep(
                max(0.0, paced_from + i * MAX_BATCH / write_rate - time.monotonic())
            )
        return await c.post("/records", more[i], headers)

    phases = [bench_api.Phase(f"GET /proof from {r.url}", f"{per:,.0f}/s") for r in replicas]
    writes = bench_api.Phase("POST /records", "1 writer")
    writer = bench_api.RawClient(replicas[0].port, 1)
    before, began = _cpu_seconds(replicas), time.monotonic()
    try:
        await asyncio.gather(
            bench_api.closed_loop(
                writer, post, writes, len(more), 1, seconds, bench_api.acknowledged
            ),
            *(
                bench_api.open_loop(c, get, p, per, seconds, 256, keeper(n))
                for n, (c, p) in enumerate(zip(clients, phases, strict=True))
            ),
        )
    finally:
        for c in [*clients, writer]:
            await c.aclose()
    cpu = _cpu_line(before, _cpu_seconds(replicas), time.monotonic() - began)
    return [phases, writes, indexes, kept, cpu]


def _heads_reach(replicas: list[Replica], day: str, size: int) -> None:
    """Until every replica serves a head of `day` of at least `size` (at most 30 s)."""
    deadline = time.monotonic() + 30
    for replica in replicas:
        while _newest(replica.url, day) < size:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no head of {day} reached {size:,} within 30 s")
            time.sleep(0.05)


def _check(replicas: list[Replica], indexes: list[int], kept: list[dict[int, bytes]]) -> int:
    """The sampled answers' proofs verify, and each anchor's root is the root the OTHER
    replica serves for that day and size; how many checked (an error is raised)."""
    checked = 0
    for n, answers in enumerate(kept):
        other = replicas[(n + 1) % len(replicas)]
        for i, body in answers.items():
            answer = json.loads(body)
            proof, anchor = answer["proof"], answer["anchor"]
            merkle.verify_inclusion(
                leaf_hash(record(indexes[i])),
                proof["leaf_index"],
                proof["tree_size"],
                [bytes.fromhex(p) for p in proof["path"]],
                bytes.fromhex(anchor["root"]),
            )
            head = httpx.get(f"{other.url}/roots/{anchor['day']}/{proof['tree_size']}", timeout=5)
            if head.status_code != 200 or head.json()["root"] != anchor["root"]:
                raise RuntimeError(f"{other.url} serves another root for {anchor}")
            checked += 1
    return checked


def _proofs(
    server: PgServer, work: Path, records: int, seconds: float, write_rate: float
) -> list[list[str]]:
    dirs = _built(server, work, records)
    replicas = [Replica(d, work / f"reads-{i}.log") for i, d in enumerate(dirs)]
    try:
        day = time.strftime("%Y-%m-%d", time.gmtime())
        phases, writes, indexes, kept, cpu = asyncio.run(
            _reads(replicas, day, records, seconds, write_rate)
        )
        checked = _check(replicas, indexes, kept)
    finally:
        for replica in replicas:
            replica.stop()
    rows = []
    for p in phases:
        p50, p99, top = p.quantiles()
        rows.append([p.name, f"{p.throughput:,.0f}", ms(p50), ms(p99), ms(top), str(p.errors)])
    together = sorted(t for p in phases for t in p.latencies)
    p99 = quantile(together, 0.99)
    errors = sum(p.errors for p in phases)
    verdict = "ok" if p99 <= PROOF_P99_GOAL_S and not errors else "MISSED"
    rate = sum(p.throughput for p in phases)
    rows.append(
        [
            "both",
            f"{rate:,.0f}",
            ms(quantile(together, 0.5)),
            f"{ms(p99)} (goal <= 10 ms: {verdict})",
            ms(together[-1] if together else float("nan")),
            str(errors),
        ]
    )
    say(
        f"  beside them: {writes.items:,} records acknowledged by the first replica "
        f"({writes.throughput:,.0f}/s, {writes.errors} errors); {checked} sampled proofs "
        "checked against the other replica's heads"
    )
    say(f"  CPU (100% = one core): {cpu}")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--failovers", type=int, default=3)
    parser.add_argument("--proof-records", type=int, default=100_000)
    parser.add_argument(
        "--write-rates",
        default="-1,0,200,500,2000",
        help="the read phase's writer, records/s (0: flat out, -1: none)",
    )
    parser.add_argument("--phases", default="writes,failover,reads", help="which to run")
    args = parser.parse_args()
    if not wrkkit.available():
        say("wrk is not installed: run `python3 tools/dev.py wrk`")
        return 2
    server = start_server()
    work = Path(tempfile.mkdtemp(prefix="bench-replicas-"))
    try:
        say(f"load average before: {loadavg()}")
        if "writes" in args.phases:
            say(f"POST /records, one new record per request, {CONNECTIONS} connections in all:")
            print_table(
                ["replicas", "acknowledged/s", "worst p99 ms", "other answers", "statuses"],
                _throughput(server, work, args.seconds),
            )
        if "failover" in args.phases:
            times = [_failover(server, work) for _ in range(args.failovers)]
            say(
                "kill -9 of the leader to the next signed head: "
                + ", ".join(f"{t:.2f} s" for t in times)
                + f" (max {max(times):.2f} s, goal <= 10 s)"
            )
        for rate in (
            (float(r) for r in args.write_rates.split(",")) if "reads" in args.phases else ()
        ):
            pace = f"{rate:,.0f} records/s" if rate else "back to back"
            beside = (
                f"while a writer posts 1,000-record batches ({pace}) to the first"
                if rate >= 0
                else "no writes"
            )
            say(
                f"GET /proof, {PROOF_RATE}/s in all over 2 replicas, a {args.proof_records:,}-"
                f"record day, {beside}:"
            )
            print_table(
                ["from", "answers/s", "p50", "p99", "max", "errors"],
                _proofs(server, work, args.proof_records, args.seconds, rate),
            )
        say(f"load average after: {loadavg()}")
    finally:
        stop_server(server)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(benchdoc.run("replicas", main))
