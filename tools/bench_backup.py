#!/usr/bin/env python3
"""Backup benchmark (issue #21, "the backup time and size on a 1,000,000-record log, with
writes going on"). Figures, not test assertions.

    .venv/bin/python tools/bench_backup.py                    # 1,000,000 records, ~5-10 min
    .venv/bin/python tools/bench_backup.py --records 100000   # the same phases, ~1 minute

Phases:
  1. build: `--records` records appended through the library (`Log.append`, `--batch` records
     per durable transaction, as tools/bench_log.py's bulk load), today, then a checkpoint;
  2. load: a real `capability-anchor serve` on the data dir, and `--writers` HTTP clients
     posting 50-record batches to `POST /records` back to back;
  3. backup: `capability-anchor backup DEST --data DIR --json` as a real process, timed, while
     the writers go on; then the writers run on for as long again;
  4. printed: backup time, size, MB/s, the records it holds, the writers' records/s before,
     during and after it, their error count, and the load average (a shared machine skews
     every figure); `--audit` also runs `audit --data DEST` on the copy (slow: it re-derives
     everything).
"""

from __future__ import annotations

import argparse
import json
import shutil
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
from benchkit import default_base, loadavg, record, say
from capability_anchor.log import Log

HTTP_BATCH = 50


def build(data: Path, n: int, batch: int) -> float:
    started = time.monotonic()
    with Log.init(data, iss="https://resolver.example") as log:
        done = 0
        while done < n:
            size = min(batch, n - done)
            log.append([record(i) for i in range(done, done + size)])
            done += size
            if done % (n // 10 or 1) < size:
                say(f"  built {done:,} records, {done / (time.monotonic() - started):,.0f}/s")
        log.checkpoint()
    return time.monotonic() - started


class Writers:
    """HTTP writers posting until stopped; every acknowledged batch timestamped."""

    def __init__(self, url: str, token: str, count: int) -> None:
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acked: list[float] = []
        self.errors = 0
        self.threads = [
            threading.Thread(target=self._run, args=(url, token, w)) for w in range(count)
        ]

    def _run(self, url: str, token: str, w: int) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, timeout=60.0) as client:
            b = 0
            while not self.stop.is_set():
                body = {"records": [record(n, f"w{w}b{b}-") for n in range(HTTP_BATCH)]}
                b += 1
                try:
                    ok = client.post("/records", json=body, headers=headers).status_code == 200
                except httpx.HTTPError:
                    ok = False
                with self.lock:
                    if ok:
                        self.acked.append(time.monotonic())
                    else:
                        self.errors += 1

    def rate(self, start: float, end: float) -> float:
        with self.lock:
            batches = sum(1 for t in self.acked if start <= t < end)
        return batches * HTTP_BATCH / max(end - start, 1e-9)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=5000, help="records per Log.append (build)")
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds of writes before")
    ap.add_argument("--dir", type=Path, default=None, help="where (default: a disk temp dir)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--audit", action="store_true", help="also audit the copy")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-backup-", dir=args.dir or default_base()))
    data, dest = base / "data", base / "backup"
    try:
        say(f"bench_backup: {args.records:,} records in {base}, load {loadavg()}")
        built = build(data, args.records, args.batch)
        say(f"1. built in {built:.1f} s ({args.records / built:,.0f} records/s)")
        port = serverkit.free_port()
        argv = serverkit.serve_argv(data, port, ["--checkpoint-interval", "1"], init=False)
        with serverkit.serving(data, port=port, argv=argv, logs=base) as server:
            writers = Writers(server.url, server.token(), args.writers)
            for t in writers.threads:
                t.start()
            t0 = time.monotonic()
            time.sleep(args.warmup)
            began = time.monotonic()
            load_before = loadavg()
            done = subprocess.run(
                [str(serverkit.CLI), "backup", str(dest), "--data", str(data), "--json"],
                capture_output=True,
                text=True,
                env=serverkit.clean_env(),
                check=False,
            )
            ended = time.monotonic()
            load_during = loadavg()
            time.sleep(ended - began)
            writers.stop.set()
            for t in writers.threads:
                t.join()
            after = time.monotonic()
        if done.returncode != 0:
            say(f"backup failed ({done.returncode}): {done.stderr}")
            return 1
        result = json.loads(done.stdout)
        wall = ended - began
        mb = result["bytes"] / 1e6
        say(f"2. {args.writers} HTTP writers, {HTTP_BATCH}-record batches, {writers.errors} errors")
        say(f"3. backup: {wall:.2f} s wall ({result['seconds']:.2f} s in the command)")
        say(f"   size {mb:,.1f} MB ({result['bytes']:,} bytes), {mb / wall:,.1f} MB/s")
        say(f"   holds {result['records']:,} records, history size {result['history_size']}")
        say(
            f"   writers: {writers.rate(t0, began):,.0f} records/s before, "
            f"{writers.rate(began, ended):,.0f} during, {writers.rate(ended, after):,.0f} after"
        )
        say(f"   load average {load_before} before, {load_during} at the end")
        if args.audit:
            a0 = time.monotonic()
            audit = subprocess.run(
                [str(serverkit.CLI), "audit", "--data", str(dest)],
                capture_output=True,
                text=True,
                env=serverkit.clean_env(),
                check=False,
            )
            say(f"4. audit --data DEST: exit {audit.returncode} in {time.monotonic() - a0:.1f} s")
        return 0
    finally:
        if args.keep:
            say(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(benchdoc.run("backup", main))
