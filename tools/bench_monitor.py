#!/usr/bin/env python3
"""`capability-anchor monitor` catch-up benchmarks (issue #14). Goals, not test assertions.

    .venv/bin/python tools/bench_monitor.py                         # 20,000 heads, 200,000 records
    .venv/bin/python tools/bench_monitor.py --heads 100000 --records 1000000   # the issue's sizes

What it does:
  1. builds a log with the library (`bench_history_api.build`: one unsealed head at every
     size 1..heads of today, each written as in production), and a second log of one day
     with `--records` entries and a head every 10,000 entries;
  2. exports each with `export --tiles` (the monitor reads the folder: no server shares
     the 2 cores);
  3. runs `capability-anchor monitor DIR --keys DIR/keys.json --state S` as a real process
     on a fresh state (the whole history: every head's JWS, rules, day consistency from the
     tiles), then the same over HTTP from a real `serve --rate-limit 0` on 127.0.0.1 (the
     server shares the cores), then on the records log with `--entries`, and reports wall
     time and peak RSS (GNU time's %M of the monitor process), with a linear extrapolation
     to the issue's sizes:
                         100,000 heads <= 60 s; 1,000,000-record day with --entries <= 120 s;
                         RSS <= 200 MB
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # repo root: tests.kit

import httpx
from tests.kit import serverkit

import benchdoc
from bench_history_api import build
from benchkit import ISS, say
from capability_anchor.log import MAX_BATCH, Log
from capability_anchor.log.serverindex import Pending

CLI = Path(sys.executable).parent / "capability-anchor"
HEADS_GOAL, HEADS_GOAL_S = 100_000, 60.0
RECORDS_GOAL, RECORDS_GOAL_S = 1_000_000, 120.0
RSS_GOAL_MB = 200.0
HEAD_EVERY = 10_000


def build_records(data: Path, records: int) -> None:
    with Log.init(data, iss=ISS, records="any") as log:
        day = log.today()
        for start in range(0, records, MAX_BATCH):
            log.append([{"r": i} for i in range(start, min(records, start + MAX_BATCH))])
            size = min(records, start + MAX_BATCH)
            if size % HEAD_EVERY == 0 or size == records:
                with log.store.write():
                    log.writer.sign_head(day, size, False, int(time.time()), Pending(day, size, ()))


def export(data: Path, out: Path) -> float:
    began = time.monotonic()
    subprocess.run(
        [str(CLI), "export", "--data", str(data), str(out), "--tiles"],
        check=True,
        capture_output=True,
    )
    return time.monotonic() - began


def _tree_rss_mb(root: int) -> float:
    """The summed VmRSS of `root`'s descendants (the monitor and its worker processes)."""
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        try:
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
            if pid != root:
                status = Path(f"/proc/{pid}/status").read_text()
                total += int(status.split("VmRSS:")[1].split()[0]) if "VmRSS:" in status else 0
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue
    return total / 1024


def run_monitor(
    folder: Path, state: Path, *extra: str, url: str | None = None, keys: Path | None = None
) -> tuple[float, float, float, str]:
    """Wall seconds, the monitor process's peak RSS in MB, the peak of it and its worker
    processes together (sampled every 0.1 s), and its summary line."""
    keys = folder / "keys.json" if keys is None else keys
    argv = [str(CLI), "monitor", url or str(folder), "--keys", str(keys)]
    argv += ["--state", str(state), *extra]
    # GNU time's %M: the child's own peak. ru_maxrss seen from here would be inherited
    # from this process, which holds the whole built log (Linux keeps it across exec).
    rss_file = state.with_name(state.name + ".rss")
    began = time.monotonic()
    child = subprocess.Popen(
        ["/usr/bin/time", "-f", "%M", "-o", str(rss_file), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak = [0.0]
    sampler = threading.Thread(target=_sample, args=(child, peak), daemon=True)
    sampler.start()
    out, err = child.communicate()
    took = time.monotonic() - began
    sampler.join()
    if child.returncode != 0:
        raise SystemExit(f"monitor exited {child.returncode}: {out}{err}")
    rss = int(rss_file.read_text().split()[-1]) / 1024
    return took, rss, max(rss, peak[0]), out.splitlines()[-1]


def _sample(child: subprocess.Popen[str], peak: list[float]) -> None:
    while child.poll() is None:
        peak[0] = max(peak[0], _tree_rss_mb(child.pid))
        time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--heads", type=int, default=20_000)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--dir", help="work folder (kept; logs there are reused)")
    args = parser.parse_args(argv)
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-monitor-"))
    heads_data, records_data = work / "heads-data", work / "records-data"
    build(heads_data, args.heads)
    if not records_data.exists():
        say(f"building a day of {args.records:,} records ...")
        build_records(records_data, args.records)
    for data, out in ((heads_data, work / "heads-roots"), (records_data, work / "records-roots")):
        if not out.exists():
            say(f"export --tiles {data.name}: {export(data, out):.1f} s")
    for state in ("s1", "s2", "s3"):
        subprocess.run(["rm", "-rf", str(work / state)], check=True)
    took, rss, tree, line = run_monitor(work / "heads-roots", work / "s1")
    say(
        f"heads: {args.heads:,} in {took:.1f} s ({args.heads / took:,.0f} heads/s), "
        f"peak RSS {rss:.0f} MB (with its workers {tree:.0f} MB); {line}"
    )
    say(
        f"  extrapolated to {HEADS_GOAL:,}: {took * HEADS_GOAL / args.heads:.0f} s "
        f"(goal <= {HEADS_GOAL_S:.0f} s)"
    )
    with serverkit.serving(heads_data, "--rate-limit", "0") as server:
        origin = httpx.get(f"{server.url}/history/vkey").text.split("+")[0]
        keys = work / "keys.json"
        keys.write_bytes(httpx.get(f"{server.url}/keys").content)
        took, rss, tree, line = run_monitor(
            work / "heads-roots", work / "s3", "--origin", origin, url=server.url, keys=keys
        )
    say(
        f"heads over HTTP (a real serve): {args.heads:,} in {took:.1f} s "
        f"({args.heads / took:,.0f} heads/s), peak RSS {rss:.0f} MB "
        f"(with its workers {tree:.0f} MB); {line}"
    )
    say(
        f"  extrapolated to {HEADS_GOAL:,}: {took * HEADS_GOAL / args.heads:.0f} s "
        f"(goal <= {HEADS_GOAL_S:.0f} s)"
    )
    took, rss, tree, line = run_monitor(work / "records-roots", work / "s2", "--entries")
    say(
        f"records --entries: {args.records:,} in {took:.1f} s "
        f"({args.records / took:,.0f} records/s), peak RSS {rss:.0f} MB "
        f"(with its workers {tree:.0f} MB); {line}"
    )
    say(
        f"  extrapolated to {RECORDS_GOAL:,}: {took * RECORDS_GOAL / args.records:.0f} s "
        f"(goal <= {RECORDS_GOAL_S:.0f} s); RSS goal <= {RSS_GOAL_MB:.0f} MB"
    )
    say(f"work folder: {work} (load average {os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(benchdoc.run("monitor", main))
