#!/usr/bin/env python3
"""Replicas of one PostgreSQL log (#24), in one run. Goals, not tests.

    .venv/bin/python tools/bench_replicas.py                 # 10 s load phases, 3 failovers
    .venv/bin/python tools/bench_replicas.py --seconds 20 --failovers 5

1. `POST /records` (one new record per request, wrk, 32 connections in all) against one
   replica, then the same load split over two replicas at once.   Goal: two / one >= 1.5.
2. From kill -9 of the leader to the next head signed (by the standby, seen at its
   `/roots/<day>`), while one writer posts to the standby.        Goal: <= 10 s.

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
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

import benchdoc
import wrkkit
from benchkit import ISS, loadavg, print_table, record, say

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
        self.port = _port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [str(CLI), "serve", "--data", str(data), "--port", str(self.port)]
        argv += ["--checkpoint-interval", "1", "--rate-limit", "0"]
        self.log = log.open("w")
        self.proc = subprocess.Popen(argv, stderr=self.log)
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
    for count in (1, 2):
        dirs = _log(server, work / f"load{count}", 2)
        replicas = [Replica(d, work / f"load{count}-{i}.log") for i, d in enumerate(dirs)]
        try:
            token = (dirs[0] / "writer-token").read_text().strip()
            script = wrkkit.script_file(work)
            used = [r.url for r in replicas[:count]]
            results = asyncio.run(_load(used, token, seconds, script))
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--failovers", type=int, default=3)
    args = parser.parse_args()
    if not wrkkit.available():
        say("wrk is not installed: run `python3 tools/dev.py wrk`")
        return 2
    server = start_server()
    work = Path(tempfile.mkdtemp(prefix="bench-replicas-"))
    try:
        say(f"load average before: {loadavg()}")
        say(f"POST /records, one new record per request, {CONNECTIONS} connections in all:")
        print_table(
            ["replicas", "acknowledged/s", "worst p99 ms", "other answers", "statuses"],
            _throughput(server, work, args.seconds),
        )
        times = [_failover(server, work) for _ in range(args.failovers)]
        say(
            "kill -9 of the leader to the next signed head: "
            + ", ".join(f"{t:.2f} s" for t in times)
            + f" (max {max(times):.2f} s, goal <= 10 s)"
        )
        say(f"load average after: {loadavg()}")
    finally:
        stop_server(server)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(benchdoc.run("replicas", main))
