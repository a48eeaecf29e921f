#!/usr/bin/env python3
"""Disk benchmark (issue #23, item 4): bytes per stored record, the WAL's size under steady
writes, and reads meanwhile. Goals, not test assertions.

    .venv/bin/python tools/bench_disk.py                    # 1,000,000 records, ~2-4 min
    .venv/bin/python tools/bench_disk.py --records 200000   # the same phases, faster

What it does (one log in a temp dir on the local disk; `--dir` to choose where, `--keep` to
keep it):
  1. writes `--records` records through the library's batched append (`Log.append`,
     `--batch` per call, one durable transaction each; the clock fixed inside one UTC day as
     tools/bench_log.py has it), publishing a head every `--checkpoint-every` records;
  2. meanwhile samples the WAL file's size every few milliseconds (the maximum is the
     figure; goal <= 64 MB), and a reader process (this script again, `--reader-child`)
     opens the same log and at a fixed rate (`--read-rate`) looks up a random entry
     (`Log.store.entry`) and proves a random covered one (`Log.proof`): their p50/p99/max,
     so a checkpoint that stalls shows up there;
  3. then the SPEC floor (tools/writefloors.py) on the same records, in the same run: its
     write rate, and its database's bytes per record after a full checkpoint;
  4. prints bytes per record of the log's database (after a full checkpoint) against the
     floor's (goal <= 1.3x), and where the bytes go: each table and index of the database,
     from SQLite's dbstat (page bytes and payload bytes per record).
The load average is printed before and after: the machine is shared and noisy, read the
ratios. `--write-doc` writes the printed figures into docs/explanation/performance.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import benchdoc
from benchkit import ISS, FixedClock, default_base, loadavg, ms, print_table, quantile, record, say
from writefloors import floor_bytes_per_record, spec_floor

DAY = "2026-11-30"
NOON = dt.datetime(2026, 11, 30, 13, tzinfo=dt.UTC).timestamp()  # as bench_log's clock
READER_CHILD = "--reader-child"
WAL_GOAL = 64 * 2**20
BYTES_GOAL = 1.3
MB = 2**20


class Records(Sequence[dict[str, Any]]):
    """records 0..n-1, made when asked for (a million dicts at once would be a GB)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(i, slice):
            return [record(n) for n in range(*i.indices(self.n))]
        if not 0 <= i < self.n:
            raise IndexError(i)
        return record(i)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (record(n) for n in range(self.n))


# --- the reader child --------------------------------------------------------------------------


def reader_child(data: Path, rate: float, stop: Path) -> None:
    """Reads at `rate` per second until `stop` exists; prints the latencies as JSON."""
    from capability_anchor.log import Log

    log = Log.open(data, clock=FixedClock(NOON), background_checkpoints=False)
    rng = random.Random(7)
    entry_s: list[float] = []
    proof_s: list[float] = []
    late = 0
    period = 1 / rate
    due = time.perf_counter()
    try:
        while not stop.exists():
            head = log.store.newest_head(DAY)
            size = 0 if head is None else head.tree_size
            if size:
                i = rng.randrange(size)
                t0 = time.perf_counter()
                if log.store.entry(DAY, i) is None:
                    raise SystemExit(f"entry {i} missing")
                t1 = time.perf_counter()
                log.proof(DAY, rng.randrange(size))
                t2 = time.perf_counter()
                entry_s.append(t1 - t0)
                proof_s.append(t2 - t1)
            due += period
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            else:
                late += 1
    finally:
        log.close()
    print(json.dumps({"entry_s": entry_s, "proof_s": proof_s, "late": late}))


# --- the writer --------------------------------------------------------------------------------


class WalSampler:
    def __init__(self, wal: Path, every_s: float) -> None:
        self.wal, self.every_s = wal, every_s
        self.max = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                size = self.wal.stat().st_size
            except FileNotFoundError:
                size = 0
            self.max = max(self.max, size)
            self.samples += 1

    def __enter__(self) -> WalSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def write_log(args: argparse.Namespace, data: Path) -> dict[str, Any]:
    from capability_anchor.log import Log

    log = Log.init(data, iss=ISS, clock=FixedClock(NOON))
    n, batch = args.records, args.batch
    stop = data.parent / "reader.stop"
    stop.unlink(missing_ok=True)
    log.append([record(i) for i in range(min(batch, n))])
    log.checkpoint()
    done = min(batch, n)
    reader = subprocess.Popen(
        [sys.executable, __file__, READER_CHILD, str(data), str(args.read_rate), str(stop)],
        stdout=subprocess.PIPE,
        text=True,
    )
    step = max(batch, n // 10 // batch * batch)
    start = time.perf_counter()
    wal_path = data / "log.sqlite3-wal"
    grew = 0  # the most one call added to the WAL (one transaction; a lower bound)

    def file_size() -> int:
        return wal_path.stat().st_size if wal_path.exists() else 0

    with WalSampler(wal_path, args.sample_ms / 1000) as wal:
        while done < n:
            size = min(batch, n - done)
            chunk = [record(done + i) for i in range(size)]
            before = file_size()
            log.append(chunk)
            grew = max(grew, file_size() - before)
            done += size
            if done % args.checkpoint_every < batch or done == n:
                before = file_size()
                log.checkpoint()
                grew = max(grew, file_size() - before)
            if done % step == 0 or done == n:
                rate = (done - batch) / (time.perf_counter() - start)
                say(f"[write] {done:>10,} records, {rate:,.0f}/s, WAL max {wal.max / MB:.1f} MB")
        seconds = time.perf_counter() - start
    stop.touch()
    out, _ = reader.communicate(timeout=120)
    log.close()
    reads = json.loads(out)
    return {
        "rate": (n - min(batch, n)) / seconds,
        "wal_max": wal.max,
        "wal_one_commit": grew,
        "wal_samples": wal.samples,
        **reads,
    }


def breakdown(db: Path, n: int) -> tuple[float, list[tuple[str, str, str, str]]]:
    """Bytes per record of the whole file after a full checkpoint, and per table and index."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = int(conn.execute("PRAGMA page_size").fetchone()[0])
        rows = conn.execute(
            "SELECT name, sum(pgsize), sum(payload) FROM dbstat GROUP BY name ORDER BY 2 DESC"
        ).fetchall()
    finally:
        conn.close()
    total = db.stat().st_size
    lines = [
        (str(name), f"{b / n:.1f}", f"{p / n:.1f}", f"{100 * b / total:.1f}%")
        for name, b, p in rows
        if b / n >= 1
    ]
    small = [(b, p) for _, b, p in rows if b / n < 1]
    if small:
        b, p = sum(x for x, _ in small), sum(y for _, y in small)
        lines.append(
            (
                f"({len(small)} others, each < 1)",
                f"{b / n:.1f}",
                f"{p / n:.1f}",
                f"{100 * b / total:.1f}%",
            )
        )
    lines.append((f"(the file, {page}-byte pages)", f"{total / n:.1f}", "", "100%"))
    return total / n, lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="default: 1,000,000")
    parser.add_argument("--batch", type=int, default=1000, help="records per append, default: 1000")
    parser.add_argument(
        "--checkpoint-every", type=int, default=50_000, help="a head per N records, default: 50000"
    )
    parser.add_argument("--read-rate", type=float, default=200, help="reads/s, default: 200")
    parser.add_argument("--sample-ms", type=float, default=5, help="WAL sampling, default: 5")
    parser.add_argument("--dir", type=Path, default=None, help="default: a temp dir on disk")
    parser.add_argument("--keep", action="store_true", help="keep the data, default: removed")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-disk-", dir=args.dir or default_base()))
    load_before = loadavg()
    say(f"bench_disk: {args.records:,} records, batches of {args.batch}, in {work}")
    say(f"load average before: {load_before}; sqlite {sqlite3.sqlite_version}")
    try:
        figures = write_log(args, work / "log")
        records = Records(args.records)
        say("[floor] the SPEC floor on the same records")
        floor_rate = spec_floor(records, work, "spec-floor-rate.sqlite3")
        floor_bytes = floor_bytes_per_record(records, work)
        ours, lines = breakdown(work / "log" / "log.sqlite3", args.records)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    ratio = ours / floor_bytes
    entry_s, proof_s = sorted(figures["entry_s"]), sorted(figures["proof_s"])
    say("\nwhere the bytes go (per record; page bytes include free space in the pages)")
    print_table(("table or index", "bytes", "payload", "share"), lines)
    wal_ok = figures["wal_max"] <= WAL_GOAL
    rows = [
        (
            "bytes per record",
            f"{ours:.0f} B vs the floor's {floor_bytes:.0f} B: {ratio:.2f}x",
            f"<= {BYTES_GOAL}x",
            "ok" if ratio <= BYTES_GOAL else "MISSED",
        ),
        (
            "WAL size, max while writing",
            f"{figures['wal_max'] / MB:.1f} MB ({figures['wal_samples']:,} samples)",
            "<= 64 MB",
            "ok" if wal_ok else "MISSED",
        ),
        (
            "WAL, the most one transaction added",
            f"{figures['wal_one_commit'] / MB:.1f} MB",
            "",
            "",
        ),
        (
            f"entry lookup, another process, {args.read_rate:.0f}/s",
            f"p50 {ms(quantile(entry_s, 0.5))}, p99 {ms(quantile(entry_s, 0.99))}, "
            f"max {ms(entry_s[-1] if entry_s else float('nan'))} ({len(entry_s):,})",
            "",
            "",
        ),
        (
            f"proof, another process, {args.read_rate:.0f}/s",
            f"p50 {ms(quantile(proof_s, 0.5))}, p99 {ms(quantile(proof_s, 0.99))}, "
            f"max {ms(proof_s[-1] if proof_s else float('nan'))} ({figures['late']:,} late)",
            "",
            "",
        ),
        (
            "batched appends",
            f"{figures['rate']:,.0f}/s vs the SPEC floor's {floor_rate:,.0f}/s: "
            f"{figures['rate'] / floor_rate:.2f}x",
            "",
            "",
        ),
    ]
    print_table(("what", "figure", "goal", ""), rows)
    say(f"\nload average before {load_before}, after {loadavg()}")
    return 0  # goals are figures in the table, not the exit status


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == READER_CHILD:
        reader_child(Path(sys.argv[2]), float(sys.argv[3]), Path(sys.argv[4]))
        sys.exit(0)
    sys.exit(benchdoc.run("disk", main))
