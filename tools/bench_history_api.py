#!/usr/bin/env python3
"""History read API benchmarks (SPEC §12.4, issue #13) against a real server on 127.0.0.1.
Goals, not test assertions.

    .venv/bin/python tools/bench_history_api.py                   # a 100,000-head history
    .venv/bin/python tools/bench_history_api.py --heads 20000 --duration 5   # a short run
    .venv/bin/python tools/bench_history_api.py --dir /tmp/h100k  # build once, keep, reuse

What it does:
  1. builds a log with the library (`--dir DIR` keeps it; a log already there is reused):
     `--heads` records appended into today, then one unsealed head at every size 1..heads,
     signed through the writer (`LogWriter.sign_head`, so each head gets its history leaf,
     history tiles and checkpoint exactly as in production), a few thousand heads per
     transaction (the fast build; each head is still the production write);
  2. starts `capability-anchor serve --rate-limit 0` on a free loopback port;
  3. runs, in one run and side by side:
     - `GET /history/proof?leaf_hash=H`, H uniform over the history, open loop at
       `--proof-rate` (500/s) for `--duration` s; 50 answers are verified (tlog-proof parse,
       inclusion against the checkpoint's root, checkpoint signed by the log key)
                                                                goal p99 <= 5 ms at 500/s
     - the baseline at the same rate: `GET /roots/D/N` (a stored head document)
     - history tiles `GET /history/tile/0/N` (full tiles, N uniform) and `GET /history/tile/
       entries/N`, closed loop over `--concurrency` connections          goal >= 2,000/s
     - the baseline closed loops: `GET /roots/D/N` (the ratios' base) and `GET /roots/D`
  4. prints a table with the ratios to the baselines, the CPU of server and generator (100% =
     one core) and the load average.

The load generator and its accounting are `bench_api.py`'s (open loop without coordinated
omission, a raw keep-alive client of ~40 us a request). Machines here have 2 cores shared
by the server, the generator and anything else running: figures are lower bounds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import hashlib
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # repo root: tests.kit

from tests.kit import serverkit

import benchdoc
from bench_api import Meter, Phase, RawClient, closed_loop, open_loop
from benchkit import ISS, default_base, loadavg, print_table, say
from capability_anchor.keys import KeySet
from capability_anchor.log import MAX_BATCH, Log
from capability_anchor.log.serverindex import Pending
from capability_anchor.merkle import verify_inclusion
from capability_anchor.note import NoteVerifier, open_checkpoint, parse_tlog_proof

PROOF_P99_GOAL_S = 0.005
PROOF_RATE = 500
TILE_RATE_GOAL = 2000
HEADS_PER_TRANSACTION = 2000


def build(data: Path, heads: int) -> tuple[str, list[bytes]]:
    """A log with one unsealed head at every size 1..heads of today; returns the day and
    every history leaf hash (reused when `data` already holds such a log)."""
    if not (data / "log.sqlite3").exists():
        say(f"building a history of {heads:,} heads in {data} ...")
        began = time.monotonic()
        # Tiny records (`--records any`): each head's /record index pass re-reads the entries
        # since the last index run, and this build publishes a head per entry.
        with Log.init(data, iss=ISS, records="any") as log:
            day = log.today()
            for start in range(0, heads, MAX_BATCH):
                log.append([{"h": i} for i in range(start, min(heads, start + MAX_BATCH))])
            if log.today() != day:
                raise SystemExit("the UTC day changed while building; run again")
            done = 1
            while done <= heads:
                last = min(heads, done + HEADS_PER_TRANSACTION - 1)
                with log.store.write():
                    for size in range(done, last + 1):
                        # No /record index pass (`pending` given, empty): these records have
                        # no server, and the pass would re-read every entry since the last.
                        empty = Pending(day, size, ())
                        log.writer.sign_head(day, size, False, int(time.time()), empty)
                done = last + 1
                if done % 20_000 < HEADS_PER_TRANSACTION:
                    rate = (done - 1) / (time.monotonic() - began)
                    say(f"  {done - 1:>8,} heads  {rate:,.0f} heads/s")
        took = time.monotonic() - began
        say(f"built {heads:,} heads in {took:.1f} s  (load average {loadavg()})")
    with Log.open(data, background_checkpoints=False) as log:
        hashes = [leaf.leaf_hash for leaf in log.store.iter_history()]
        day = max(row.day for row in log.store.all_heads())
    if len(hashes) < heads:
        raise SystemExit(f"the log in {data} has a history of {len(hashes)}, not {heads}")
    return day, hashes


def check_proofs(answers: list[tuple[bytes, bytes]], keys: KeySet, origin: str) -> int:
    """How many of the sampled tlog-proofs fail: parse, checkpoint signature, inclusion."""
    verifiers = [NoteVerifier(origin, k.raw) for k in keys]
    wrong = 0
    for leaf_hash, body in answers:
        try:
            proof = parse_tlog_proof(body)
            checkpoint = open_checkpoint(proof.note, list(verifiers), origin=origin).checkpoint
            path = list(proof.path)
            verify_inclusion(leaf_hash, proof.index, checkpoint.size, path, checkpoint.root)
        except Exception:
            wrong += 1
    return wrong


async def run(
    server: serverkit.Server, day: str, hashes: list[bytes], args: argparse.Namespace
) -> list[tuple[str, Phase, str]]:
    client = RawClient(server.port, args.concurrency)
    rng = random.Random(13)
    picks = [rng.randrange(len(hashes)) for _ in range(int(PROOF_RATE * args.duration) + 1)]
    full_tiles = len(hashes) // 256
    tiles = [rng.randrange(max(1, full_tiles)) for _ in range(100_000)]
    sampled: list[tuple[bytes, bytes]] = []
    results: list[tuple[str, Phase, str]] = []

    def index_path(n: int) -> str:
        digits = f"{n:03d}"
        digits = "0" * (-len(digits) % 3) + digits
        groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
        return "/".join([*("x" + g for g in groups[:-1]), groups[-1]])

    async def warm(c: RawClient, i: int) -> tuple[int, bytes]:
        return await c.get(f"/history/proof?leaf_hash={hashes[picks[i]].hex()}")

    async def proof(c: RawClient, i: int) -> tuple[int, bytes]:
        return await c.get(f"/history/proof?leaf_hash={hashes[picks[i]].hex()}")

    def keep(i: int, body: bytes) -> None:
        if len(sampled) < 50 and i % 17 == 0:
            sampled.append((hashes[picks[i]], body))

    async def head_doc(c: RawClient, i: int) -> tuple[int, bytes]:
        return await c.get(f"/roots/{day}/{picks[i % len(picks)] + 1}")

    async def tile(c: RawClient, i: int) -> tuple[int, bytes]:
        return await c.get(f"/history/tile/0/{index_path(tiles[i % len(tiles)])}")

    async def bundle(c: RawClient, i: int) -> tuple[int, bytes]:
        return await c.get(f"/history/tile/entries/{index_path(tiles[i % len(tiles)])}")

    async def roots_day(c: RawClient, i: int) -> tuple[int, bytes]:
        return await c.get(f"/roots/{day}")

    try:
        warmup = Phase("warm-up", "200 proofs")
        await closed_loop(client, warm, warmup, 200, 4, 20.0)
        rate = f"open loop {args.proof_rate}/s for {args.duration:g} s"
        for name, request, on_answer in (
            ("GET /history/proof", proof, keep),
            ("GET /roots/D/N (baseline)", head_doc, None),
        ):
            phase = Phase(name, rate)
            with Meter(server.pid) as meter:
                await open_loop(
                    client, request, phase, args.proof_rate, args.duration, 256, on_answer
                )
            phase.cpu_server, phase.cpu_client, phase.load = meter.server, meter.client, meter.load
            results.append((name, phase, "open"))
            say(phase.describe())
        count = int(TILE_RATE_GOAL * args.duration * 3)
        closed = f"closed loop, {args.concurrency} connections, {args.duration:g} s"
        for name, request in (
            ("GET /history/tile/0/N", tile),
            ("GET /history/tile/entries/N", bundle),
            ("GET /roots/D/N (closed baseline)", head_doc),
            ("GET /roots/D (baseline)", roots_day),
        ):
            phase = Phase(name, closed)
            with Meter(server.pid) as meter:
                await closed_loop(client, request, phase, count, args.concurrency, args.duration)
            phase.cpu_server, phase.cpu_client, phase.load = meter.server, meter.client, meter.load
            results.append((name, phase, "closed"))
            say(phase.describe())
    finally:
        await client.aclose()
    with Log.open(server.data, background_checkpoints=False) as log:
        keys, origin = log.keyset(), log.read.history.origin()
    wrong = check_proofs(sampled, keys, origin)
    say(f"verified {len(sampled)} sampled tlog-proofs: {wrong} wrong")
    if wrong:
        results.append(("sampled proofs wrong", Phase("wrong", "-"), "wrong"))
    return results


def table(results: list[tuple[str, Phase, str]], heads: int) -> None:
    phases = {name: phase for name, phase, _ in results}
    base_open = phases["GET /roots/D/N (baseline)"]
    base_closed = phases["GET /roots/D/N (closed baseline)"]
    rows = []
    for name, phase, kind in results:
        if kind == "wrong":
            rows.append([name, "-", "-", "-", "MISSED", "-", "-"])
            continue
        p50, p99, _ = phase.quantiles()
        if kind == "open":
            ratio = p99 / max(base_open.quantiles()[1], 1e-9)
            figure = f"p99 {p99 * 1e3:.2f} ms (p50 {p50 * 1e3:.2f})"
            goal = "p99 <= 5 ms at 500/s" if name == "GET /history/proof" else "-"
            met = p99 <= PROOF_P99_GOAL_S and not phase.errors
        else:
            ratio = phase.throughput / max(base_closed.throughput, 1e-9)
            figure = f"{phase.throughput:,.0f}/s"
            goal = ">= 2,000/s" if "tile" in name else "-"
            met = phase.throughput >= TILE_RATE_GOAL and not phase.errors
        verdict = ("ok" if met else "MISSED") if goal != "-" else "-"
        cpu = f"{phase.cpu_server:.0%} / {phase.cpu_client:.0%}"
        rows.append([name, figure, f"{ratio:.2f}x", goal, verdict, f"{phase.errors}", cpu])
    say(f"\nhistory of {heads:,} heads; ratios are to the baseline of the same kind")
    print_table(
        ["phase", "figure", "vs baseline", "goal", "", "errors", "CPU server / generator"],
        rows,
    )
    say(f"load average {loadavg()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--heads", type=int, default=100_000, help="heads in the history")
    parser.add_argument("--dir", help="the log's data dir, kept (an existing log is reused)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per phase")
    parser.add_argument("--proof-rate", type=int, default=PROOF_RATE)
    parser.add_argument("--concurrency", type=int, default=32, help="connections in the pool")
    args = parser.parse_args(argv)
    if args.heads < 256 or not 0 < args.duration <= 120:
        parser.error("--heads >= 256, 0 < --duration <= 120")
    say(
        f"bench_history_api {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M:%S}Z, "
        f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {loadavg()}"
    )
    if args.dir:
        base = data = Path(args.dir)
    else:
        base = Path(tempfile.mkdtemp(prefix="bench-history-", dir=default_base()))
        data = base / "data"
    try:
        day, hashes = build(data, args.heads)
        say(
            f"history size {len(hashes):,}; sha256 of the first leaf hash "
            f"{hashlib.sha256(hashes[0]).hexdigest()[:16]}"
        )
        logs = base / "logs" if not args.dir else Path(tempfile.gettempdir())
        argv_s = serverkit.serve_argv(data, serverkit.free_port(), ["--rate-limit", "0"])
        port = int(argv_s[argv_s.index("--port") + 1])
        with serverkit.serving(data, argv=argv_s, port=port, logs=logs) as server:
            results = asyncio.run(run(server, day, hashes, args))
        table(results, len(hashes))
    finally:
        if args.dir:
            say(f"kept {data}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(benchdoc.run("history_api", main))
