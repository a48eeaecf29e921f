#!/usr/bin/env python3
"""Is `GET /record?id=` flat in the size of the log (issue #37)? Not a test: figures.

    PYTHONPATH=$PWD/src .venv/bin/python tools/bench_record_size.py --dir /var/tmp/recsize
    ... --sizes 100000 --against /work/main/src     # this tree beside another, one size

1. Builds one log per `--sizes` (10,000 and 1,000,000 servers): `Log.init`, library appends
   of 1,000-record batches, one record per distinct server (`benchkit.record(i)`), today's
   UTC day, then `checkpoint`. `--dir` keeps them (DIR/servers-N) and reuses them: a
   1,000,000-server build takes minutes. A log built on an earlier UTC day is rebuilt.
2. Serves each with `capability-anchor serve --rate-limit 0` (with `--against SRC`, repeated,
   also a server of the same log running the code in SRC: PYTHONPATH), all at once, warms
   each for `--warmup` s, then for `--rounds` runs `wrk -t1 -c64` of `GET /record?id=<a
   random server>` against each in turn (interleaved), `--duration` s each. With `--spread
   same`, each log is asked for the same number of distinct servers (the smallest size's,
   spread evenly over the log): the token cache then hits as often at every size, and only
   the log's size differs (decisions/37-record4.md).
3. Prints each rate, the server's CPU per request (its processes, every request counted),
   the load average, the medians, and the ratio of the largest size to the smallest (goal
   >= 0.9); `--write-doc` also writes it into docs/explanation/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.kit import serverkit

import benchdoc
import wrkkit
from benchkit import ISS, default_base, loadavg, print_table, processes, record, say
from capability_anchor.log import MAX_BATCH, Log

GOAL = 0.9
PATH_FORMAT = "/record?id=urn:agent:%09d"  # benchkit.record's sub


def today() -> str:
    return dt.datetime.now(dt.UTC).date().isoformat()


def build(data: Path, n: int) -> None:
    """A log of `n` servers in today's UTC day, checkpointed (reused when already built
    today: DATA/built says the day)."""
    mark = data.parent / "built"
    if mark.exists() and mark.read_text() == f"{today()} {n}":
        say(f"reusing {data} ({n:,} servers)")
        return
    if data.exists():
        for path in sorted(data.rglob("*"), reverse=True):
            path.unlink() if not path.is_dir() else path.rmdir()
        data.rmdir()
    start = time.monotonic()
    with Log.init(data, iss=ISS) as log:
        for first in range(0, n, MAX_BATCH):
            log.append([record(i) for i in range(first, min(n, first + MAX_BATCH))])
        log.checkpoint()
    mark.write_text(f"{today()} {n}")
    say(f"built {data}: {n:,} servers in {time.monotonic() - start:.0f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,1000000", help="servers per log, commas")
    parser.add_argument("--dir", type=Path, help="keep (and reuse) the logs here")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per wrk run")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds per server first")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument(
        "--spread",
        choices=("all", "same"),
        default="all",
        help="ask for any server (all) or for as many distinct ones in every log (same)",
    )
    parser.add_argument(
        "--against", type=Path, action="append", default=[], help="also serve the code in this src/"
    )
    args = parser.parse_args(argv)
    if not wrkkit.available():
        say("wrk is not installed")
        return 2
    sizes = [int(s) for s in args.sizes.split(",")]
    base = args.dir or Path(default_base()) / f"bench-record-size-{os.getpid()}"
    base.mkdir(parents=True, exist_ok=True)
    for n in sizes:
        (base / f"servers-{n}").mkdir(exist_ok=True)
        build(base / f"servers-{n}" / "data", n)
    trees = {"this": os.environ.get("PYTHONPATH", "")}
    trees.update({str(src): str(src.resolve()) for src in args.against})
    script = wrkkit.script_file(base)
    rates: dict[tuple[str, int], list[float]] = {}
    lines: list[list[str]] = []
    with contextlib.ExitStack() as stack:
        servers = {}
        for tree, src in trees.items():
            for n in sizes:
                data = base / f"servers-{n}" / "data"
                port = serverkit.free_port()
                argv_ = serverkit.serve_argv(data, port, ["--rate-limit", "0"], init=False)
                env = {"PYTHONPATH": src} if src else {}
                logs = base / f"logs-{len(servers)}"
                servers[tree, n] = stack.enter_context(
                    serverkit.serving(data, argv=argv_, env=env, port=port, logs=logs)
                )
        for (tree, n), server in servers.items():
            say(f"warming {tree} {n:,} for {args.warmup:g} s")
            asked = min(sizes) if args.spread == "same" else n
            asyncio.run(one(server, n, asked, args.warmup, args.connections, script))
        for r in range(1, args.rounds + 1):
            for (tree, n), server in servers.items():
                before = cpu(server.pid)
                asked = min(sizes) if args.spread == "same" else n
                result = asyncio.run(one(server, n, asked, args.duration, args.connections, script))
                used = (cpu(server.pid) - before) / max(1, result.requests) * 1e6
                load = loadavg(2, "/")
                rates.setdefault((tree, n), []).append(result.ok_rate)
                bad = result.requests - result.statuses["200"]
                rate = f"{result.ok_rate:,.0f}"
                lines.append([str(r), tree, f"{n:,}", rate, f"{used:,.0f}", str(bad), load])
                say(f"round {r} {tree} {n:,}: {rate}/s, {used:,.0f} us CPU each, l={load}")
    say()
    head = ["round", "code", "servers", "/record per s", "CPU us each", "non-200", "load 1/5/15"]
    print_table(head, lines)
    say()
    for tree in trees:
        medians = {n: statistics.median(rates[tree, n]) for n in sizes}
        low, high = min(sizes), max(sizes)
        ratio = medians[high] / medians[low] if medians[low] else 0.0
        verdict = "ok" if ratio >= GOAL else "MISSED"
        say(
            f"{tree}: median {' / '.join(f'{medians[n]:,.0f}' for n in sizes)} per s; "
            f"{high:,} / {low:,} = {ratio:.2f} (goal >= {GOAL}: {verdict})"
        )
    for tree in list(trees)[1:]:
        for n in sizes:
            this, other = (statistics.median(rates[t, n]) for t in ("this", tree))
            say(f"{n:,} servers: this / {tree} = {this / other:.2f}" if other else "")
    say(f"load average now {loadavg()}")
    return 0


def cpu(pgid: int) -> float:
    """CPU seconds of the server's processes (its session: `serverkit` starts one)."""
    return sum(p.cpu for p in processes() if p.group == pgid)


async def one(
    server: serverkit.Server, n: int, asked: int, duration: float, connections: int, script: Path
) -> wrkkit.WrkResult:
    """wrk on `asked` distinct servers of the `n`, spread evenly."""
    args = wrkkit.random_args(PATH_FORMAT, asked, n // asked)
    return await wrkkit.run(server.url, script, duration, connections, args, threads=1)


if __name__ == "__main__":
    sys.exit(benchdoc.run("record_size", main))
