#!/usr/bin/env python3
"""What the history costs a checkpoint (issue 13: "publishing a head with its history leaf
and checkpoint costs <= 1.2x today's checkpoint on a 1,000,000-record day"). A goal, not a
test assertion.

    .venv/bin/python tools/bench_history_publish.py                    # 1,000,000 records, ~4 min
    .venv/bin/python tools/bench_history_publish.py --records 100000   # ~40 s

"Today's checkpoint" is the code before the history tree (`--before`, default 4fe4a60, the
main branch just before the history landed), extracted with `git archive` into a temp dir and
run from there; "after" is this checkout. Each side gets its own data dir holding one UTC day
of `--records` records (bulk-loaded, one head published). Then, alternating before / after
`--sets` times (the machine is noisy: the two sides share every period of load), a child
process opens the log and times `--rounds` publications, each `Log.checkpoint()` right after
a one-record append (untimed): sign a head over the grown day and store it, and, after, its
history leaf, tiles and the signed checkpoint, in one durable transaction.
Printed: median and p90 of each side, and the ratio after / before of the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchdoc
from benchkit import FixedClock, default_base, loadavg, ms, print_table, quantile, record, say

ROOT = Path(__file__).resolve().parent.parent
DAY_NOON = 1_796_040_000.0  # 2026-12-01T12:00:00Z: every append lands in one day
BATCH = 10_000


def child(data: Path, phase: str, records: int, rounds: int, first: int) -> None:
    """Runs with whichever `capability_anchor` is on sys.path (before or after)."""
    from capability_anchor.log import Log

    clock = FixedClock(DAY_NOON)
    if phase == "load":
        with Log.init(data, iss="https://resolver.example", clock=clock) as log:
            for start in range(0, records, BATCH):
                log.append([record(n) for n in range(start, min(start + BATCH, records))])
            log.checkpoint()
        return
    samples: list[float] = []
    with Log.open(data, clock=clock) as log:
        for n in range(first, first + rounds):
            log.append([record(n, "p")])
            clock.t += 1
            t0 = time.perf_counter()
            log.checkpoint()
            samples.append(time.perf_counter() - t0)
    print(json.dumps(samples))


def run_child(src: Path, data: Path, phase: str, args: argparse.Namespace, first: int = 0) -> str:
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{ROOT / 'tools'}"}
    command = [
        sys.executable,
        __file__,
        "--child",
        str(data),
        "--phase",
        phase,
        "--records",
        str(args.records),
        "--rounds",
        str(args.rounds),
        "--first",
        str(first),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{phase} in {src} failed:\n{done.stderr}")
    return done.stdout


def extract(commit: str, dest: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "src"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--sets", type=int, default=3)
    parser.add_argument("--before", default="4fe4a60")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.phase, args.records, args.rounds, args.first)
        return
    base = Path(tempfile.mkdtemp(prefix="bench-history-", dir=args.dir or default_base()))
    try:
        sides = {"before": extract(args.before, base), "after": ROOT / "src"}
        for name, src in sides.items():
            t0 = time.perf_counter()
            run_child(src, base / name, "load", args)
            say(f"{name}: loaded {args.records:,} records in {time.perf_counter() - t0:.1f} s")
        samples: dict[str, list[float]] = {"before": [], "after": []}
        for n in range(args.sets):
            for name, src in sides.items():
                out = run_child(src, base / name, "publish", args, first=n * args.rounds)
                samples[name] += json.loads(out)
            say(f"set {n + 1}/{args.sets} done (load {loadavg()})")
        rows = []
        for name in ("before", "after"):
            got = sorted(samples[name])
            rows.append([name, ms(statistics.median(got)), ms(quantile(got, 0.9)), str(len(got))])
        print_table(["side", "median", "p90", "n"], rows)
        ratio = statistics.median(samples["after"]) / statistics.median(samples["before"])
        say(
            f"publish a head on a {args.records:,}-record day: after / before = {ratio:.2f}x "
            f"(goal <= 1.2x; before = {args.before})"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(benchdoc.run("history_publish", main))
