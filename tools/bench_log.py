#!/usr/bin/env python3
"""Log benchmarks (issue: the SQLite log). Goals, not test assertions.

    .venv/bin/python tools/bench_log.py                      # the issue's figures: a 10,000,000-
                                                             # record day, ~10-20 min, ~5 GB disk
    .venv/bin/python tools/bench_log.py --records 200000     # the same phases, ~1 minute

What it measures, through the public `Log` API only (one process, the log in a temp dir on the
local disk; `--dir` to choose where, `--keep` to keep it):
  1. single-record durable appends (one record per `Log.append`, one commit and WAL fsync
     each, synchronous=FULL) on a fresh log                                     goal >= 500/s
  2. bulk load of one UTC day: `--records` records in `--batch`-record `Log.append` calls (one
     durable transaction each); progress on stdout; an unsealed head is published (checkpoint)
     at the pymerkle comparison size M and at N                           goal >= 20,000 rec/s
     (`Log.append` is `append_prepared(prepare(records))`; the two halves are timed apart so
     the table can say where the time goes: validation + JCS + leaf hash, and the store)
  3. open and first proof: `Log.open` and the first `Log.proof` after it, with the page cache
     of the data dir evicted first (posix_fadvise DONTNEED: a cold start) and warm
                                                     goal: first proof, and open + it, <= 50 ms
  4. `--proofs` inclusion proofs `Log.proof(day, i)` at random i against the newest published
     head (size N), from the store's tiles; and at the head of size M    goal p99 <= 1 ms
  5. single-record appends again, into the day of N records                      goal >= 500/s
  6. seal: the injected clock moves past midnight, then `Log.seal()` is timed     goal <= 1 s
  7. peak RSS of this process (getrusage ru_maxrss), printed after every phase  goal <= 200 MB
  8. pymerkle 7 `SqliteTree` (in a child process, after ours, so neither its memory nor its CPU
     touches our figures) on the same records' leaf bytes, M = min(N, --pymerkle-records):
     `append_entries` per batch, `append_entry` singles, open + first proof, proof latencies.
     Its tree root at M is checked against our head's root at M (both are RFC 9162 trees).
     Configured as close to the log as its API allows: pymerkle opens SQLite with the library
     defaults (rollback journal, synchronous=FULL); we switch its connection (`tree.con`) to
     WAL + synchronous=FULL like the log's. What still differs: it is handed ready canonical
     leaf bytes (no validation, no JCS), stores (entry, hash) in one rowid table with no hash
     index (no dedupe), no tiles, no per-day trees and no heads; `append_entries` commits once
     per call, `append_entry` once per record; proofs are recomputed from leaf hashes behind
     its default 1 GiB LRU subroot cache. `--pymerkle-records 0` skips it.

Every record is a ~300-byte Capability Resolution-like dict with a unique counter; the clock is
fixed inside one UTC day so all records land in one day. Machines here are noisy: the pymerkle
column is a speed ratio (ours / pymerkle for throughput, pymerkle / ours for latency; > 1 means
ours is faster) measured in the same run, at the same size M.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path
from typing import Any

import benchdoc
from benchkit import (
    ISS,
    FixedClock,
    current_rss_mb,
    default_base,
    fs_type,
    hwm_rss_mb,
    loadavg,
    ms,
    peak_rss_mb,
    print_table,
    quantile,
    record,
    say,
)

DAY = "2026-11-30"
# The log's clock: 13:00 of DAY (UTC), so every append lands in DAY, and after the records'
# `checked_at` (benchkit.CHECKED_AT, 12:34:56), which the record rule refuses from the future
# (CR 0.2 §9.6); seal moves the clock to the next day.
NOON = dt.datetime(2026, 11, 30, 13, tzinfo=dt.UTC).timestamp()
NEXT_DAY = dt.datetime(2026, 12, 1, 0, 0, 5, tzinfo=dt.UTC).timestamp()
PYMERKLE_CHILD = "--pymerkle-child"


# --- helpers (shared with the pymerkle child; the rest is in benchkit) -------------------------


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# --- the table --------------------------------------------------------------------------------


@dataclass
class Row:
    what: str
    figure: str
    goal: str = ""
    ok: bool | None = None
    pymerkle: str = ""
    speed: float | None = None  # > 1: ours faster
    value: float = 0.0  # the figure as a number, for ratios added later


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        status = "" if row.ok is None else ("ok" if row.ok else "MISSED")
        say(f"  -> {row.what}: {row.figure}  {row.goal}  {status}")
        return row

    def print(self) -> None:
        head = ("what", "figure", "goal", "", "pymerkle", "ours vs pymerkle")
        lines = [
            (
                r.what,
                r.figure,
                r.goal,
                "" if r.ok is None else ("ok" if r.ok else "MISSED"),
                r.pymerkle,
                ""
                if r.speed is None
                else f"{r.speed:.2f}x {'faster' if r.speed >= 1 else 'slower'}",
            )
            for r in self.rows
        ]
        print_table(head, lines)


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} us"


# --- disk --------------------------------------------------------------------------------------


def evict_page_cache(data_dir: Path) -> None:
    """Drop the data dir's files from the OS page cache (a cold start, without root)."""
    for path in data_dir.iterdir():
        if not path.is_file():
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


# --- our log -----------------------------------------------------------------------------------


def rss_line(phase: str) -> None:
    load = loadavg(1, ", ")
    say(
        f"[rss] after {phase}: peak {peak_rss_mb():.1f} MB, now {current_rss_mb():.1f} MB"
        f"  (load average {load})"
    )


def source_state() -> str:
    """Which code is measured: HEAD and the files under src/ that differ from it (read-only
    git; --no-optional-locks so not even the index is refreshed)."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "--no-optional-locks", "-C", str(root), "status", "--porcelain", "src"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no git)"
    changed = [line[3:] for line in dirty if line.strip()]
    return head + (f" + uncommitted changes in {', '.join(changed)}" if changed else "")


def node_hash_ns() -> float:
    """One RFC 9162 interior-node hash, best of 5 (a yardstick for this machine right now)."""
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(100_000):
            sha256(b"\x01" + b"a" * 64).digest()
        best = min(best, time.perf_counter() - t0)
    return best / 100_000 * 1e9


def bench_singles(log: Any, first: int, count: int) -> tuple[float, list[float]]:
    """`count` one-record appends; returns (records/s, sorted per-call latencies)."""
    latencies = []
    for n in range(first, first + count):
        rec = record(n)
        t0 = time.perf_counter()
        result = log.append([rec])
        latencies.append(time.perf_counter() - t0)
        if result[0].duplicate:
            raise SystemExit(f"record {n} came back as a duplicate")
    rate = count / sum(latencies)
    latencies.sort()
    return rate, latencies


def singles_row(report: Report, what: str, rate: float, lat: list[float]) -> Row:
    return report.add(
        Row(
            what,
            f"{rate:,.0f}/s (p50 {ms(quantile(lat, 0.5))}, p99 {ms(quantile(lat, 0.99))})",
            ">= 500/s",
            rate >= 500,
            value=rate,
        )
    )


@dataclass
class BulkResult:
    seconds: float  # append time over all N (prepare + store)
    prepare_s: float
    store_s: float
    at_m_seconds: float | None  # append time over the first M records
    at_m_store_s: float | None  # of which the store half (append_prepared)
    last_window_rate: float
    batch_latencies: list[float]


def bulk_load(log: Any, n: int, batch: int, m: int, start_counter: int) -> BulkResult:
    """Append records start_counter.. in batches; checkpoint at M. Prints progress."""
    step = max(batch, (n // 20) // batch * batch)
    prepare_s = store_s = 0.0
    at_m: float | None = None
    at_m_store: float | None = None
    done = 0
    window = (0.0, 0.0, 0)  # prepare_s, store_s, done at the last progress line
    batch_latencies: list[float] = []
    wall = time.perf_counter()
    last_rate = 0.0
    while done < n:
        size = min(batch, n - done)
        records = [record(start_counter + done + i) for i in range(size)]
        # Log.append(records) is exactly append_prepared(prepare(records)); timed in halves.
        t0 = time.perf_counter()
        prepared = log.prepare(records)
        t1 = time.perf_counter()
        results = log.append_prepared(prepared)
        t2 = time.perf_counter()
        if results[-1].leaf_index != done + size - 1 or results[-1].duplicate:
            raise SystemExit(f"unexpected append result {results[-1]} at {done}")
        prepare_s += t1 - t0
        store_s += t2 - t1
        batch_latencies.append(t2 - t0)
        done += size
        if done == m:
            at_m, at_m_store = prepare_s + store_s, store_s
            t = time.perf_counter()
            log.checkpoint()
            say(f"[bulk] checkpoint at M = {m:,}: head published in {ms(time.perf_counter() - t)}")
        if done % step == 0 or done == n:
            total = prepare_s + store_s
            w_prep, w_store, w_done = prepare_s - window[0], store_s - window[1], done - window[2]
            last_rate = w_done / (w_prep + w_store)
            window = (prepare_s, store_s, done)
            say(
                f"[bulk] {done:>11,} / {n:,}  {total:7.1f} s in append  "
                f"overall {done / total:7,.0f}/s  last window {last_rate:7,.0f}/s "
                f"= prepare {w_prep / w_done * 1e6:4.1f} us "
                f"+ store {w_store / w_done * 1e6:4.1f} us per record  "
                f"db {dir_bytes(log.data_dir) / 2**30:.2f} GiB  "
                f"peak RSS {peak_rss_mb():.0f} MB  wall {time.perf_counter() - wall:.0f} s  "
                f"eta {(n - done) / last_rate:.0f} s"
            )
    batch_latencies.sort()
    return BulkResult(
        prepare_s + store_s, prepare_s, store_s, at_m, at_m_store, last_rate, batch_latencies
    )


def time_proofs(
    log: Any, day: str, indices: Sequence[int], tree_size: int | None
) -> tuple[list[float], list[dict[str, Any]]]:
    latencies = []
    sample = []
    for k, i in enumerate(indices):
        t0 = time.perf_counter()
        proof = log.proof(day, i, tree_size)
        latencies.append(time.perf_counter() - t0)
        if k < 200:
            sample.append(proof)
    latencies.sort()
    return latencies, sample


def check_proofs(proofs: Sequence[dict[str, Any]]) -> None:
    """Verify proofs against their anchors' roots (outside every timing)."""
    from capability_anchor import leaf, merkle

    for p in proofs:
        body = p["proof"]
        i = body["leaf_index"]
        merkle.verify_inclusion(
            leaf.leaf_hash(record(i)),
            i,
            body["tree_size"],
            [bytes.fromhex(h) for h in body["path"]],
            bytes.fromhex(p["anchor"]["root"]),
        )


def open_and_first_proof(
    data_dir: Path, clock: FixedClock, index: int, tree_size: int | None, cold: bool
) -> tuple[Any, float, float, dict[str, Any]]:
    from capability_anchor.log import Log

    if cold:
        evict_page_cache(data_dir)
    t0 = time.perf_counter()
    log = Log.open(data_dir, clock=clock)
    t1 = time.perf_counter()
    proof = log.proof(DAY, index, tree_size)
    t2 = time.perf_counter()
    return log, t1 - t0, t2 - t1, proof


# --- pymerkle (child process) ------------------------------------------------------------------


def pymerkle_child(argv: Sequence[str]) -> None:
    """Run pymerkle's SqliteTree on the first M records; print one JSON line of results."""
    ap = argparse.ArgumentParser(prog="bench_log.py " + PYMERKLE_CHILD)
    ap.add_argument("--path", required=True)
    ap.add_argument("--records", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--singles", type=int, required=True)
    ap.add_argument("--proofs", type=int, required=True)
    ap.add_argument("--seed", type=int, required=True)
    args = ap.parse_args(argv)

    from pymerkle import SqliteTree

    from capability_anchor import leaf

    def open_tree() -> Any:
        tree = SqliteTree(args.path)
        # pymerkle opens SQLite with its defaults (rollback journal, synchronous=FULL); give it
        # the same durability mode as the log: WAL, fsync at every commit.
        tree.con.execute("PRAGMA journal_mode = WAL")
        tree.con.execute("PRAGMA synchronous = FULL")
        return tree

    out: dict[str, Any] = {}
    tree = open_tree()
    out["journal_mode"] = tree.con.execute("PRAGMA journal_mode").fetchone()
    out["synchronous"] = tree.con.execute("PRAGMA synchronous").fetchone()
    m, batch = args.records, args.batch
    append_s = 0.0
    done = 0
    step = max(batch, (m // 5) // batch * batch)
    while done < m:
        size = min(batch, m - done)
        # The same records' canonical leaf bytes, made outside the timing: pymerkle takes
        # bytes and neither validates nor canonicalises.
        entries = [leaf.leaf_bytes(record(done + i)) for i in range(size)]
        t0 = time.perf_counter()
        tree.append_entries(entries)  # one `with con:` transaction: one commit per call
        append_s += time.perf_counter() - t0
        done += size
        if done % step == 0 or done == m:
            print(
                f"[pymerkle] {done:,} / {m:,} appended, {done / append_s:,.0f}/s",
                file=sys.stderr,
                flush=True,
            )
    out["append_rate"] = m / append_s
    out["root"] = tree.get_root(m).hex()
    tree.close()

    rng = random.Random(args.seed)
    first_index = rng.randrange(m)
    t0 = time.perf_counter()
    tree = open_tree()
    t1 = time.perf_counter()
    tree.prove_inclusion(first_index + 1, m)  # pymerkle counts leaves from 1
    t2 = time.perf_counter()
    out["open_s"], out["first_proof_s"] = t1 - t0, t2 - t1
    print(f"[pymerkle] first proof after open: {(t2 - t1) * 1000:.0f} ms", file=sys.stderr)

    latencies = []
    for _ in range(args.proofs):
        i = rng.randrange(m)
        t0 = time.perf_counter()
        tree.prove_inclusion(i + 1, m)
        latencies.append(time.perf_counter() - t0)
    latencies.sort()
    out["proof_p50_s"] = quantile(latencies, 0.5)
    out["proof_p99_s"] = quantile(latencies, 0.99)
    out["proofs"] = len(latencies)

    singles = []
    for k in range(args.singles):
        data = leaf.leaf_bytes(record(m + k))
        t0 = time.perf_counter()
        tree.append_entry(data)  # its own `with con:` transaction: one commit per record
        singles.append(time.perf_counter() - t0)
    out["singles_rate"] = len(singles) / sum(singles) if singles else float("nan")
    tree.close()
    out["peak_rss_mb"] = hwm_rss_mb()
    print(json.dumps(out), flush=True)


def run_pymerkle(
    base: Path, m: int, batch: int, singles: int, proofs: int, seed: int
) -> dict[str, Any] | None:
    try:
        import pymerkle  # noqa: F401
    except ImportError:
        say("[pymerkle] not installed; no comparison (pip install pymerkle)")
        return None
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        PYMERKLE_CHILD,
        "--path",
        str(base / "pymerkle.sqlite3"),
        "--records",
        str(m),
        "--batch",
        str(batch),
        "--singles",
        str(singles),
        "--proofs",
        str(proofs),
        "--seed",
        str(seed),
    ]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        say(f"[pymerkle] child failed with exit code {done.returncode}")
        return None
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# --- main --------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == [PYMERKLE_CHILD]:
        pymerkle_child(argv[1:])
        return 0

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--records", type=int, default=10_000_000, help="records in the bulk-loaded day"
    )
    ap.add_argument(
        "--batch", type=int, default=1000, help="records per Log.append in the bulk load"
    )
    ap.add_argument(
        "--singles", type=int, default=2000, help="one-record appends per singles phase"
    )
    ap.add_argument("--proofs", type=int, default=10_000, help="random proofs per proof phase")
    ap.add_argument("--dir", type=Path, help="parent of the temp dir (default: local-disk tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the log and pymerkle's database")
    ap.add_argument(
        "--pymerkle-records",
        type=int,
        default=1_000_000,
        help="M: size of pymerkle's tree and of our comparison head (0: skip pymerkle)",
    )
    ap.add_argument("--pymerkle-proofs", type=int, default=300, help="pymerkle proofs to time")
    ap.add_argument("--seed", type=int, default=20261130)
    args = ap.parse_args(argv)
    n, batch = args.records, args.batch
    if n < 1 or not 1 <= batch <= 1000:
        ap.error("--records must be >= 1 and --batch 1..1000 (the Log's MAX_BATCH)")
    m = min(args.pymerkle_records, n) // batch * batch

    from capability_anchor import leaf
    from capability_anchor.log import Log

    base = args.dir or default_base()
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench_log-", dir=base))
    kind = fs_type(work)
    free = shutil.disk_usage(work).free
    sample_bytes = statistics.mean(
        len(leaf.leaf_bytes(record(i))) for i in range(0, n, max(1, n // 100))
    )
    say(
        f"# {platform.python_implementation()} {platform.python_version()} on "
        f"{platform.machine()}, {os.cpu_count()} CPUs; SQLite "
        f"{__import__('sqlite3').sqlite_version}"
    )
    say(
        f"# N = {n:,} records of ~{sample_bytes:.0f} leaf bytes in batches of {batch}; "
        f"{args.singles} singles per phase; {args.proofs:,} proofs; pymerkle M = {m:,}"
    )
    say(f"# work dir {work} ({kind or 'unknown fs'}), {free / 2**30:.0f} GiB free")
    say(f"# code: {source_state()}")
    say(
        f"# one interior-node hash: {node_hash_ns():.0f} ns; load average "
        f"{loadavg(1, ', ')} (other work on this machine "
        "shows up in every figure, most in p99s)"
    )
    if kind in ("tmpfs", "ramfs"):
        say("# WARNING: the work dir is in RAM: durable-append figures mean nothing here")
    if free < n * 700:
        say(f"# WARNING: ~{n * 600 / 2**30:.1f} GiB needed, {free / 2**30:.1f} GiB free")
    rng = random.Random(args.seed)
    report = Report()
    try:
        run(args, n, batch, m, work, rng, report, Log)
    finally:
        if args.keep:
            say(f"# kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    report.print()
    missed = [r.what for r in report.rows if r.ok is False]
    say("")
    say("all goals met" if not missed else f"MISSED: {', '.join(missed)}")
    return 0


def run(
    args: argparse.Namespace,
    n: int,
    batch: int,
    m: int,
    work: Path,
    rng: random.Random,
    report: Report,
    log_class: Callable[..., Any] | Any,
) -> None:
    clock = FixedClock(NOON)
    rss_line("start")

    # 1. singles on a fresh log (counters far above the bulk ones: no duplicates anywhere)
    fresh = log_class.init(work / "fresh", iss=ISS, clock=FixedClock(NOON))
    say(f"[singles] {args.singles} one-record appends on a fresh log")
    rate, lat = bench_singles(fresh, 10**12, args.singles)
    fresh.close()
    singles_fresh = singles_row(report, "single-record appends, fresh log", rate, lat)
    rss_line("singles on a fresh log")

    # 2. bulk load
    data = work / "log"
    log = log_class.init(data, iss=ISS, clock=clock)
    say(f"[bulk] {n:,} records in batches of {batch} into {DAY}")
    bulk = bulk_load(log, n, batch, m, 0)
    rate = n / bulk.seconds
    bulk_row = report.add(
        Row(
            f"batched appends ({batch}/batch), whole day of {n:,}",
            f"{rate:,.0f}/s (prepare {bulk.prepare_s / n * 1e6:.1f} us + store "
            f"{bulk.store_s / n * 1e6:.1f} us per record)",
            ">= 20,000/s",
            rate >= 20_000,
        )
    )
    report.add(
        Row(
            f"batched appends, last window (up to {n:,})",
            f"{bulk.last_window_rate:,.0f}/s",
            ">= 20,000/s",
            bulk.last_window_rate >= 20_000,
        )
    )
    bl = bulk.batch_latencies
    report.add(
        Row(
            f"one {batch}-record append call",
            f"p50 {ms(quantile(bl, 0.5))}, p99 {ms(quantile(bl, 0.99))}, max {ms(bl[-1])}",
        )
    )
    at_m_row = store_m_row = None
    if m and bulk.at_m_seconds and bulk.at_m_store_s:
        at_m_row = report.add(
            Row(
                f"batched appends, first M = {m:,}",
                f"{m / bulk.at_m_seconds:,.0f}/s",
                ">= 20,000/s",
                m / bulk.at_m_seconds >= 20_000,
            )
        )
        store_m_row = report.add(
            Row(
                f"  of which the store half (append_prepared), first M = {m:,}",
                f"{m / bulk.at_m_store_s:,.0f}/s",
            )
        )
    rss_line("bulk load")
    t0 = time.perf_counter()
    log.checkpoint()
    report.add(Row(f"checkpoint (publish a head at {n:,})", ms(time.perf_counter() - t0)))
    root_n = log.head_for(DAY).root
    root_m = log.head_for(DAY, m).root if m else None
    log.close()
    say(f"[db] {dir_bytes(data) / 2**30:.2f} GiB on disk for {n:,} records")

    # 3. open + first proof: cold (page cache of the data dir evicted), then warm
    say("[open] Log.open and its first proof, page cache evicted")
    log, open_s, first_s, proof = open_and_first_proof(data, clock, rng.randrange(n), None, True)
    log.close()
    check_proofs([proof])
    report.add(
        Row(
            "first proof after open, cold page cache",
            f"{ms(first_s)} (open + it: {ms(open_s + first_s)})",
            "<= 50 ms",
            open_s + first_s <= 0.050,
        )
    )
    say("[open] Log.open and its first proof, warm")
    log, open_s, first_s, proof = open_and_first_proof(data, clock, rng.randrange(n), None, False)
    check_proofs([proof])
    report.add(Row("first proof after open, warm", ms(first_s), "<= 50 ms", first_s <= 0.050))
    report.add(
        Row("open + first proof, warm", ms(open_s + first_s), "<= 50 ms", open_s + first_s <= 0.050)
    )
    rss_line("open")

    # 4. proofs at N and at M
    say(f"[proofs] {args.proofs:,} proofs at random indices against the head of size {n:,}")
    lat, sample = time_proofs(log, DAY, [rng.randrange(n) for _ in range(args.proofs)], None)
    check_proofs(sample)
    if any(bytes.fromhex(p["anchor"]["root"]) != root_n for p in sample):
        raise SystemExit("a proof at N is anchored to another root")
    p99 = quantile(lat, 0.99)
    report.add(
        Row(
            f"proof at {n:,} from the store",
            f"p50 {us(quantile(lat, 0.5))}, p99 {us(p99)}, max {us(lat[-1])}",
            "p99 <= 1 ms",
            p99 <= 0.001,
        )
    )
    proof_m_row = open_m_row = None
    if m:
        say(f"[proofs] {args.proofs:,} proofs against the head of size M = {m:,}")
        lat, sample = time_proofs(log, DAY, [rng.randrange(m) for _ in range(args.proofs)], m)
        check_proofs(sample)
        if any(bytes.fromhex(p["anchor"]["root"]) != root_m for p in sample):
            raise SystemExit("a proof at M is anchored to another root")
        p99 = quantile(lat, 0.99)
        proof_m_row = report.add(
            Row(
                f"proof at M = {m:,} from the store",
                f"p50 {us(quantile(lat, 0.5))}, p99 {us(p99)}",
                "p99 <= 1 ms",
                p99 <= 0.001,
                value=quantile(lat, 0.5),
            )
        )
        log.close()
        log, open_m, first_m, proof = open_and_first_proof(data, clock, rng.randrange(m), m, False)
        check_proofs([proof])
        open_m_row = report.add(
            Row(
                f"open + first proof at M = {m:,}, warm",
                f"{ms(open_m + first_m)} (first proof {ms(first_m)})",
                "<= 50 ms",
                open_m + first_m <= 0.050,
                value=open_m + first_m,
            )
        )
    rss_line("proofs")

    # 5. singles into the big day
    say(f"[singles] {args.singles} one-record appends into the day of {n:,}")
    rate, lat = bench_singles(log, n, args.singles)
    singles_big = singles_row(report, f"single-record appends, day of {n:,}", rate, lat)
    rss_line("singles into the big day")

    # 6. seal
    clock.t = NEXT_DAY
    t0 = time.perf_counter()
    sealed = log.seal()
    seal_s = time.perf_counter() - t0
    if len(sealed) != 1:
        raise SystemExit(f"seal produced {len(sealed)} heads, expected 1")
    head = log.head_for(DAY)
    if not head.sealed or head.tree_size != n + args.singles:
        raise SystemExit(f"unexpected sealed head {head.tree_size} sealed={head.sealed}")
    check_proofs([log.proof(DAY, rng.randrange(n))])
    report.add(Row(f"seal a day of {head.tree_size:,}", ms(seal_s), "<= 1 s", seal_s <= 1.0))
    log.close()
    rss_line("seal")
    report.add(
        Row(
            "peak RSS of this process, whole run",
            f"{peak_rss_mb():.0f} MB",
            "<= 200 MB",
            peak_rss_mb() <= 200,
        )
    )

    # 7. pymerkle, in a child process, after all of ours
    if not m:
        return
    say(f"[pymerkle] SqliteTree on the first {m:,} records, in a child process")
    pm = run_pymerkle(work, m, batch, args.singles, args.pymerkle_proofs, args.seed)
    if pm is None:
        return
    say(
        f"[pymerkle] journal_mode={pm['journal_mode']} synchronous={pm['synchronous']} "
        f"(2 = FULL); child peak RSS {pm['peak_rss_mb']:.0f} MB"
    )
    if root_m is not None and pm["root"] != root_m.hex():
        raise SystemExit(f"pymerkle's root at {m} {pm['root']} is not ours {root_m.hex()}")
    say(f"[pymerkle] its root at {m:,} equals our head's root at {m:,}")
    appends = f"{pm['append_rate']:,.0f}/s (first {m:,})"
    bulk_row.pymerkle = appends
    bulk_row.speed = (n / bulk.seconds) / pm["append_rate"]
    if at_m_row is not None and store_m_row is not None and bulk.at_m_seconds:
        at_m_row.pymerkle = store_m_row.pymerkle = appends
        at_m_row.speed = m / bulk.at_m_seconds / pm["append_rate"]
        store_m_row.speed = m / (bulk.at_m_store_s or 1) / pm["append_rate"]
    for row in (singles_fresh, singles_big):
        row.pymerkle = f"{pm['singles_rate']:,.0f}/s (at {m:,})"
        row.speed = row.value / pm["singles_rate"]
    if proof_m_row is not None:
        proof_m_row.pymerkle = (
            f"p50 {ms(pm['proof_p50_s'])}, p99 {ms(pm['proof_p99_s'])} ({pm['proofs']} proofs)"
        )
        proof_m_row.speed = pm["proof_p50_s"] / proof_m_row.value
    if open_m_row is not None:
        open_m_row.pymerkle = (
            f"{ms(pm['open_s'] + pm['first_proof_s'])} (first proof {ms(pm['first_proof_s'])})"
        )
        open_m_row.speed = (pm["open_s"] + pm["first_proof_s"]) / open_m_row.value
    report.add(Row("peak RSS of the pymerkle child", f"{pm['peak_rss_mb']:.0f} MB"))


if __name__ == "__main__":
    sys.exit(benchdoc.run("log", main))
