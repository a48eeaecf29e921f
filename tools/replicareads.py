"""The replicas' read phase (bench_replicas.py, phase 3): `GET /proof` at a random index of a
`--proof-records` day, open loop at 500/s in all, half from each of two PostgreSQL replicas,
while one writer posts 1,000-record batches to the first at a given rate; sampled answers
are verified against the head the *other* replica serves. Goal (#37 item 5): p99 <= 10 ms
with writes at 200 records/s, a resolver's rate."""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import time
from pathlib import Path
from typing import Any

import httpx

import bench_api
from benchkit import ISS, ms, print_table, quantile, record, say
from capability_anchor import merkle
from capability_anchor.leaf import leaf_hash
from capability_anchor.log import MAX_BATCH, Log
from replicakit import PgServer, Replica, cpu_line, cpu_seconds, heads_reach

PROOF_RATE = 500
PROOF_P99_GOAL_S = 0.010
GOAL_WRITE_RATE = 200.0  # records/s: the goal's writer (#37 item 5)


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
    server: PgServer,
    replicas: list[Replica],
    day: str,
    records: int,
    seconds: float,
    write_rate: float,
) -> list[Any]:
    """GET /proof, open loop, PROOF_RATE in all split over the replicas, while one writer
    posts 1,000-record batches to the first at `write_rate` records/s (0: back to back, -1:
    no writer); the phases and what was checked."""
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
        heads_reach(replicas, day, records + MAX_BATCH)  # not measured: may block

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
    before, began = cpu_seconds(server, replicas), time.monotonic()
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
    cpu = cpu_line(before, cpu_seconds(server, replicas), time.monotonic() - began)
    return [phases, writes, indexes, kept, cpu]


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
            _reads(server, replicas, day, records, seconds, write_rate)
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
    # The goal is set at a resolver's rate; the other rates show where the tail goes.
    goal = f"goal <= 10 ms: {verdict}" if write_rate == GOAL_WRITE_RATE else "no goal here"
    rate = sum(p.throughput for p in phases)
    rows.append(
        [
            "both",
            f"{rate:,.0f}",
            ms(quantile(together, 0.5)),
            f"{ms(p99)} ({goal})",
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


def phase(server: PgServer, work: Path, records: int, seconds: float, rate: float) -> None:
    """One read phase at one write rate, printed."""
    pace = f"{rate:,.0f} records/s" if rate else "back to back"
    beside = (
        f"while a writer posts 1,000-record batches ({pace}) to the first"
        if rate >= 0
        else "no writes"
    )
    say(f"GET /proof, {PROOF_RATE}/s in all over 2 replicas, a {records:,}-record day, {beside}:")
    print_table(
        ["from", "answers/s", "p50", "p99", "max", "errors"],
        _proofs(server, work, records, seconds, rate),
    )
