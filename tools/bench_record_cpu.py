#!/usr/bin/env python3
"""CPU per `GET /record?id=<random server>` in-process (issue #37): the ASGI app called
directly, no HTTP, so the shared machine disturbs it less than wrk. Not a test: figures.

    PYTHONPATH=$PWD/src .venv/bin/python tools/bench_record_cpu.py --dir /var/tmp/be5-copy \
        --servers 100000 --against /work/main/src

Each round runs one child process per code tree (this one, then each `--against` src/,
interleaved): it opens the log in DIR (a `bench_edge.py` log: `benchkit.record`'s servers),
answers `--warmup` random servers, waits 3 s (the tile warmer), then times `--requests` more
with `time.process_time` (every thread of the process). Prints µs per request and the load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import benchdoc
from bench_record_size import PATH_FORMAT
from benchkit import loadavg, print_table, say


async def _serve(data: Path, servers: int, warmup: int, requests: int, seed: int) -> float:
    from capability_anchor.api import Settings, create_app

    app = create_app(Settings(data_dir=data, rate_limit=0, checkpoint_interval=3600))
    lifespan: asyncio.Queue[dict[str, str]] = asyncio.Queue()
    started: list[object] = []

    async def send_lifespan(message: object) -> None:
        started.append(message)

    scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
    task = asyncio.create_task(app(scope, lifespan.get, send_lifespan))  # type: ignore[arg-type]
    await lifespan.put({"type": "lifespan.startup"})
    while not started:
        await asyncio.sleep(0.01)

    async def call(target: str) -> int:
        path, _, query = target.partition("?")
        request = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(),
            "query_string": query.encode(), "root_path": "", "headers": [(b"host", b"b")],
            "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
        }  # fmt: skip
        sent: list[dict[str, object]] = []

        async def receive() -> dict[str, object]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, object]) -> None:
            sent.append(message)

        await app(request, receive, send)  # type: ignore[arg-type]
        return int(sent[0]["status"])  # type: ignore[call-overload]

    pick = random.Random(seed)
    targets = [PATH_FORMAT % pick.randrange(servers) for _ in range(warmup + requests)]
    for target in targets[:warmup]:
        assert await call(target) == 200, target
    await asyncio.sleep(3)
    start = time.process_time()
    statuses = [await call(target) for target in targets[warmup:]]
    spent = time.process_time() - start
    assert set(statuses) == {200}, set(statuses)
    await lifespan.put({"type": "lifespan.shutdown"})
    await task
    return spent / requests * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, required=True, help="the log's data dir (read)")
    parser.add_argument("--servers", type=int, default=100_000)
    parser.add_argument("--warmup", type=int, default=3000)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", type=Path, action="append", default=[])
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)  # the seed, in a child
    args = parser.parse_args()
    if args.child is not None:
        cost = asyncio.run(_serve(args.dir, args.servers, args.warmup, args.requests, args.child))
        print(f"{cost:.0f}")
        return
    trees = {"this": os.environ.get("PYTHONPATH", "")}
    trees.update({str(src): str(src.resolve()) for src in args.against})
    say(f"{os.cpu_count()} CPUs, load average {loadavg()} before anything runs")
    lines = []
    for round_ in range(1, args.rounds + 1):
        for name, src in trees.items():
            command = [sys.executable, __file__, "--dir", str(args.dir), "--child", str(round_)]
            command += ["--servers", str(args.servers), "--warmup", str(args.warmup)]
            command += ["--requests", str(args.requests)]
            env = {**os.environ, "PYTHONPATH": src}
            done = subprocess.run(
                command, env=env, check=True, capture_output=True, text=True, timeout=600
            )
            cost = done.stdout.split()[-1]
            say(f"round {round_} {name}: {cost} µs CPU per /record, load {loadavg()}")
            lines.append([str(round_), name, cost, loadavg()])
    say()
    print_table(["round", "code", "CPU µs per /record", "load 1/5/15"], lines)


if __name__ == "__main__":
    sys.exit(benchdoc.run("record_cpu", main))
