#!/usr/bin/env python3
"""Crash soak: SIGKILL the `capability-anchor` CLI thousands of times during append,
checkpoint, seal and export, and check after every kill what `tests/e2e/test_crash.py` checks
(the scenarios live in `tests/kit/crashkit.py`).

    .venv/bin/python tools/crash_soak.py --iterations 2000 --seed 7
    .venv/bin/python tools/crash_soak.py --commands seal,export --iterations 300
    .venv/bin/python tools/crash_soak.py --serve 48

`--serve N` is the red team's crash loop instead (issue #21): kill -9 of `serve` (after a
batch through its append worker) and a new start, N times; after each kill it prints how
many of all the runs' helper processes (forkserver, body workers, resource tracker) are
still alive 5 s later and their memory, and exits 1 if any is.

Prints every failure as it happens (with the scenario seed that reproduces it: `--only
COMMAND:SEED`), then a summary: kills per command and where they landed (`before`: killed
with no trace, `during`: killed with something stored, written or printed, `after`: the run
finished first), failures. Exit 1 on any failure.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # repo root: tests.kit

from tests.kit import crashkit, serverkit
from tests.kit.obskit import observation


def serve_loop(iterations: int) -> int:
    """The crash loop of `serve` (see the module's doc); the exit code."""

    def work(server: serverkit.Server, n: int) -> None:
        batch = {"records": [observation(i, f"l{n}", sub=f"example:l{n}-{i}") for i in range(5)]}
        with server.client() as client:
            client.post("/records", json=batch, headers=server.writer_headers()).raise_for_status()

    started = 0
    left: set[int] = set()
    with tempfile.TemporaryDirectory(prefix="serve-crash-loop-") as tmp:
        data = Path(tmp) / "data"
        loop = serverkit.serve_crash_loop(data, iterations, work, logs=Path(tmp))
        for n, (tree, left) in enumerate(loop, 1):
            started += len(tree)
            rss = sum(_rss_kib(pid) for pid in left)
            print(f"kill {n}: {len(tree)} helpers, {len(left)} left alive ({rss / 1024:.0f} MiB)")
        holders = serverkit.holders(data / "log.sqlite3")
        print(
            f"serve crash loop: {iterations} kills, {started} helpers started, {len(left)} left "
            f"alive, {len(holders)} processes holding log.sqlite3 open"
        )
    return 1 if left or holders else 0


def _rss_kib(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next(
        (int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")), 0
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=2000, help="kills in all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kills-per-run", type=int, default=5, help="kills per scenario run")
    parser.add_argument(
        "--commands",
        default=",".join(crashkit.COMMANDS),
        help="comma-separated subset of " + ",".join(crashkit.COMMANDS),
    )
    parser.add_argument(
        "--only", metavar="COMMAND:SEED", help="re-run one scenario (as printed by a failure)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the work folder of failures")
    parser.add_argument(
        "--serve", type=int, metavar="N", help="instead: kill -9 `serve` N times (helpers left)"
    )
    args = parser.parse_args(argv)
    if args.serve is not None:
        return serve_loop(args.serve)
    commands = [c for c in args.commands.split(",") if c]
    unknown = sorted(set(commands) - set(crashkit.COMMANDS))
    if unknown or not commands:
        parser.error(f"unknown commands {unknown}")
    if not crashkit.CLI.exists():
        parser.error(f"{crashkit.CLI} not found: run this with the project's venv python")

    stats = crashkit.Stats()
    failures: list[str] = []
    inconclusive = 0
    started = time.monotonic()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="crash-soak-") as tmp_name:
        tmp = Path(tmp_name)
        timings: dict[str, crashkit.Timing] = {}
        builds = 0

        def build() -> crashkit.Workbench:
            nonlocal builds
            builds += 1
            return crashkit.Workbench.build(tmp / f"bench{builds}", timings, stats)

        bench = build()
        plan: list[tuple[str, int, int]] = []  # (command, scenario seed, kills)
        if args.only:
            command, _, seed = args.only.partition(":")
            plan.append((command, int(seed), args.kills_per_run))
        run_no = 0
        while (plan or not args.only) and stats.total < args.iterations and len(failures) < 20:
            if plan:
                command, seed, kills = plan.pop()
            else:
                command = commands[run_no % len(commands)]
                seed = rng.getrandbits(32)
                kills = min(args.kills_per_run, args.iterations - stats.total)
            if crashkit.today() != bench.today:
                bench = build()  # the bases are relative to today
            work = tmp / f"run{run_no}"
            work.mkdir()
            keep = False
            try:
                crashkit.SCENARIOS[command](bench, random.Random(seed), work, kills)
            except crashkit.CrossedMidnight:
                inconclusive += 1
            except Exception as exc:
                if crashkit.today() != bench.today:
                    inconclusive += 1
                else:
                    where = f"{command}:{seed}"
                    failures.append(f"{where}: {exc}")
                    print(f"FAIL --only {where}: {exc}", file=sys.stderr)
                    if not isinstance(exc, AssertionError):
                        traceback.print_exc()
                    if args.keep:
                        kept = Path(tempfile.mkdtemp(prefix=f"crash-soak-{command}-{seed}-"))
                        shutil.copytree(work, kept, dirs_exist_ok=True)
                        print(f"  work folder kept in {kept}", file=sys.stderr)
                        keep = True
            if not keep:
                shutil.rmtree(work, ignore_errors=True)
            run_no += 1
            if run_no % 20 == 0:
                print(
                    f"... {stats.total} kills, {len(failures)} failures, "
                    f"{time.monotonic() - started:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )

    elapsed = time.monotonic() - started
    print(f"crash soak: seed {args.seed}, {stats.total} kills in {run_no} scenario runs")
    for line in stats.lines():
        print("  " + line)
    print(
        "  timing estimates: "
        + ", ".join(f"{c} {1000 * t.estimate:.0f} ms" for c, t in timings.items())
    )
    if inconclusive:
        print(f"  {inconclusive} scenario runs inconclusive (the UTC day changed under them)")
    print(f"  {len(failures)} failures, {elapsed:.0f} s")
    for failure in failures:
        print(f"  FAIL {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
