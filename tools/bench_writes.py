#!/usr/bin/env python3
"""Write benchmarks (issues #23 and #37, item 5) against real servers on 127.0.0.1, with
wrk (Debian's) as the load. Goals, not test assertions.

    .venv/bin/python tools/bench_writes.py                   # the issues' figures (~8 min)
    .venv/bin/python tools/bench_writes.py --rounds 2        # serve, uvicorn, serve, uvicorn
    .venv/bin/python tools/bench_writes.py --duration 5 --forms serve --phases batches,reads

First, each round, in this process: `library`, the SPEC floor (tools/writefloors.py: a bare
sqlite3 store with the log's own schema, triggers and `/record` index) and the library's
batched append (`Log.append` of 1,000-record batches into a fresh log) alternated
LIBRARY_PAIRS times on `--library-records` records: library / floor, the median of the
pairs                                                                          goal >= 0.9x
Then two servers (`--forms`), each on a fresh log (`--seed` records, covered by a head),
checkpoint interval 1 s, no rate limit: `capability-anchor serve` and `uvicorn
capability_anchor.api.asgi:app --workers 2` (configured by Settings.from_env's environment),
runs interleaved (serve, uvicorn, serve, ... with `--rounds`). Each runs these phases
(`--phases` picks some), with the load average at each phase's start and end and the
server's CPU (100% = one core):
  healthz     the HTTP floor: wrk -t2 -c`--connections` -d`--duration` GET /healthz
  writes      wrk, the same settings, POST /records with the writer token, one NEW record a
              request, no back-off: accepted writes/s (200 answers, not duplicates) against the
              healthz rate                                                       goal >= 0.5x
              503 answers                                                            goal 0
              p99 latency (wrk's, every answer)                               goal <= 250 ms
              then: today's tree grew by at least the acknowledged records, and sampled
              acknowledged entries are at their (day, leaf_index) in /entries   goal: all
              beside it the single-row floor (tools/writefloors.py), run just before
  checkpoint  during `writes`, one record every 200 ms from a prober; p99 of (a head at
              /roots/<day> covers it - its ack)                  goal <= 2 x the interval
  batches     4 clients posting 1,000-record batches of new records, closed loop, for
              `--duration`: records/s; uvicorn x2 / serve                        goal >= 1.0x
              serve / the SPEC floor (run just before, on FLOOR_RECORDS)         goal >= 0.8x
  reads       GET /proof?day=&index= at random over the seeded day, open loop 500/s for
              `--duration`, while one writer posts a 200-record batch each second (a
              resolver's 200 records/s; #37), after a warm-up of a proof per tile
                                                                           goal p99 <= 10 ms
  reads-batches  the same reads while the `batches` load runs again (#23's form): no goal

Each goal is a `goal:` line, MET or MISSED; the exit status is 0 whatever they say. The 2
cores are shared by the server, wrk, this process and anything else: read the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # repo root: tests.kit

from tests.kit import serverkit

import bench_prepare
import benchdoc
import writefloors
import writeprobe
import wrkkit
from bench_api import Client, Meter, Phase, RawClient, acknowledged, build, closed_loop, open_loop
from benchkit import default_base, loadavg, print_table, record, say
from capability_anchor import merkle
from capability_anchor.log import MAX_BATCH
from writeprobe import Probe

PHASES = ("library", "healthz", "writes", "checkpoint", "batches", "reads", "reads-batches")
INTERVAL = 1.0  # s, the servers' checkpoint interval (Settings.checkpoint_interval)
BATCH_CLIENTS = 4
PROOF_RATE = 500
READ_WRITES = 200  # records/s beside the reads: one batch of this many each second
SINGLE_FLOOR_RECORDS = 3_000
FLOOR_RECORDS = 50_000
LIBRARY_PAIRS = 3
WRITES_VS_HEALTHZ_GOAL = 0.5
P99_GOAL_S = 0.250
UVICORN_VS_SERVE_GOAL = 1.0
SERVE_VS_FLOOR_GOAL = 0.8
LIBRARY_VS_FLOOR_GOAL = 0.9
PROOF_P99_GOAL_S = 0.010
MIN_PROBES = 20
SERVE, UVICORN = "serve", "uvicorn x2"
FORMS = {"serve": SERVE, "uvicorn": UVICORN}


@dataclass
class Run:
    """One server's figures in one round."""

    form: str
    round: int
    connections: int
    loads: dict[str, tuple[str, str]] = field(default_factory=dict)  # phase: (start, end)
    cpu: dict[str, float] = field(default_factory=dict)  # phase: the server's CPU, 1 = a core
    healthz: wrkkit.WrkResult | None = None
    writes: wrkkit.WrkResult | None = None
    grew: int = 0
    probe: Probe | None = None
    samples_stored: int = 0
    single_floor: float = 0.0
    batches: Phase | None = None
    spec_floor: float = 0.0
    spec_floor_cpu: float = 0.0  # µs a record
    reads: Phase | None = None
    reads_load: Phase | None = None  # the writer beside `reads`
    reads_batches: Phase | None = None
    reads_batches_load: Phase | None = None

    @property
    def name(self) -> str:
        return f"{self.form} r{self.round}"


@contextlib.contextmanager
def measured(run: Run, phase: str, pid: int) -> Iterator[None]:
    start = loadavg()
    say(f"  {phase}: load average {start}")
    with Meter(pid) as meter:
        yield
    run.loads[phase] = (start, meter.load)
    run.cpu[phase] = meter.server


def floor_records(n: int) -> list[dict[str, object]]:
    tag = os.urandom(4).hex() + ":"
    return [record(i, tag) for i in range(n)]


async def wrk(
    server: serverkit.Server, args: argparse.Namespace, script: Path, script_args: list[str]
) -> wrkkit.WrkResult:
    return await wrkkit.run(server.url + "/", script, args.duration, args.connections, script_args)


async def writes_phase(
    server: serverkit.Server, run: Run, args: argparse.Namespace, script: Path
) -> None:
    headers = {**server.writer_headers(), "Content-Type": "application/json"}
    checks: Client = RawClient(server.port, 2)
    poster, poller = RawClient(server.port, 1), RawClient(server.port, 1)
    try:
        before = await writeprobe.tree_size(checks, headers)
        stop = asyncio.Event()
        probing = None
        if "checkpoint" in args.phases:
            tag = os.urandom(4).hex() + ":probe:"
            probing = asyncio.create_task(
                writeprobe.run_probe(poster, poller, headers, stop, INTERVAL, tag)
            )
        with measured(run, "writes", server.pid):
            run.writes = await wrk(server, args, script, wrkkit.post_args(server.token()))
        stop.set()
        if probing is not None:
            run.probe = await probing
        run.grew = await writeprobe.tree_size(checks, headers) - before
        run.samples_stored = await writeprobe.stored(checks, run.writes.samples)
    finally:
        for c in (checks, poster, poller):
            await c.aclose()
    w = run.writes
    say("    " + w.describe("POST /records, one record each"))
    say(
        f"    accepted {w.acknowledged:,} ({w.accepted_rate:,.0f}/s), duplicates "
        f"{w.duplicates}; today's tree grew by {run.grew:,}; {run.samples_stored}/"
        f"{len(w.samples)} sampled acks found in /entries; single-row floor "
        f"{run.single_floor:,.0f}/s"
    )
    if run.probe is not None:
        say("    checkpoint prober: " + run.probe.describe(INTERVAL))


def batch_poster(
    server: serverkit.Server, size: int, every_s: float = 0.0
) -> tuple[Phase, Callable[[Client, int], Awaitable[tuple[int, bytes]]]]:
    """A phase and a request posting `size`-record batches of new records; request i is due
    at i * `every_s` after the first (0: at once)."""
    # One body encoded up front; each request swaps in a fresh tag (its records' sub and url
    # carry it), so every batch is new records at the cost of one bytes.replace.
    mark = wrkkit.MARK.encode()
    body = json.dumps({"records": [record(j, wrkkit.MARK) for j in range(size)]}).encode()
    headers = {**server.writer_headers(), "Content-Type": "application/json"}
    start = time.monotonic()

    async def post(c: Client, i: int) -> tuple[int, bytes]:
        await asyncio.sleep(max(0.0, start + i * every_s - time.monotonic()))
        return await c.post("/records", body.replace(mark, os.urandom(6).hex().encode()), headers)

    return Phase("POST /records batches", f"{size:,} records a batch"), post


async def batch_load(server: serverkit.Server, args: argparse.Namespace) -> Phase:
    """4 clients posting 1,000-record batches of new records, closed loop, for --duration."""
    phase, post = batch_poster(server, MAX_BATCH)
    client = RawClient(server.port, BATCH_CLIENTS)
    try:
        await closed_loop(client, post, phase, 10**9, BATCH_CLIENTS, args.duration, acknowledged)
    finally:
        await client.aclose()
    return phase


async def paced_writer(server: serverkit.Server, args: argparse.Namespace) -> Phase:
    """One writer posting a READ_WRITES-record batch each second, for --duration."""
    phase, post = batch_poster(server, READ_WRITES, 1.0)
    client = RawClient(server.port, 1)
    try:
        count = int(args.duration)
        await closed_loop(client, post, phase, count, 1, args.duration + 1, acknowledged)
    finally:
        await client.aclose()
    return phase


async def batches_phase(server: serverkit.Server, run: Run, args: argparse.Namespace) -> None:
    with measured(run, "batches", server.pid):
        phase = await batch_load(server, args)
    run.batches = phase
    say(
        f"    {phase.items:,} records in {phase.span:.1f} s: {phase.throughput:,.0f} records/s, "
        f"statuses {dict(phase.statuses)}; SPEC floor {run.spec_floor:,.0f} records/s"
    )


async def reads_phase(
    server: serverkit.Server, run: Run, args: argparse.Namespace, day: str, name: str
) -> None:
    """GET /proof at PROOF_RATE/s beside the writer of phase `name`, after a warm-up."""
    rng = random.Random(1)
    urls = [
        f"/proof?day={day}&index={rng.randrange(args.seed)}"
        for _ in range(int(PROOF_RATE * args.duration) + 1)
    ]
    # Not measured: a proof in every full tile, as a server serving for a while has cached.
    warm = [f"/proof?day={day}&index={i}" for i in range(0, args.seed, merkle.TILE_WIDTH)]

    async def get(c: Client, i: int) -> tuple[int, bytes]:
        return await c.get(urls[i])

    async def get_warm(c: Client, i: int) -> tuple[int, bytes]:
        return await c.get(warm[i])

    client = RawClient(server.port, 32)
    phase = Phase("GET /proof under writes", f"open loop {PROOF_RATE}/s x {args.duration:g} s")
    writer = paced_writer if name == "reads" else batch_load
    try:
        await closed_loop(client, get_warm, Phase("warm-up", ""), len(warm), 8, 60.0)
        with measured(run, name, server.pid):
            _, load = await asyncio.gather(
                open_loop(client, get, phase, PROOF_RATE, args.duration, 256),
                writer(server, args),
            )
    finally:
        await client.aclose()
    p50, p99, top = phase.quantiles()
    say(
        f"    GET /proof: {phase.sent:,} sent, statuses {dict(phase.statuses)}, skipped "
        f"{phase.skipped}; {phase.throughput:,.0f}/s; latency p50 {p50 * 1e3:.1f} ms, p99 "
        f"{p99 * 1e3:.1f} ms, max {top * 1e3:.0f} ms"
    )
    say(
        f"    beside it, the writer{'' if name == 'reads' else 's'}: {load.throughput:,.0f} "
        f"records/s, statuses {dict(load.statuses)}"
    )
    if name == "reads":
        run.reads, run.reads_load = phase, load
    else:
        run.reads_batches, run.reads_batches_load = phase, load


async def run_phases(
    server: serverkit.Server, run: Run, args: argparse.Namespace, day: str, base: Path
) -> None:
    script = wrkkit.script_file(base)
    if "healthz" in args.phases:
        with measured(run, "healthz", server.pid):
            run.healthz = await wrk(server, args, script, wrkkit.get_args("/healthz"))
        say("    " + run.healthz.describe("GET /healthz"))
    if "writes" in args.phases:
        run.single_floor = writefloors.single_row_floor(floor_records(SINGLE_FLOOR_RECORDS), base)
        await writes_phase(server, run, args, script)
    if "batches" in args.phases:
        cpu = time.process_time()
        run.spec_floor = writefloors.spec_floor(floor_records(FLOOR_RECORDS), base)
        run.spec_floor_cpu = (time.process_time() - cpu) / FLOOR_RECORDS * 1e6
        await batches_phase(server, run, args)
    for name in ("reads", "reads-batches"):
        if name in args.phases:
            await reads_phase(server, run, args, day, name)


def server_argv(form: str, data: Path, port: int) -> tuple[list[str], dict[str, str]]:
    if form == SERVE:
        serve_args = ["--rate-limit", "0", "--checkpoint-interval", f"{INTERVAL:g}"]
        return serverkit.serve_argv(data, port, serve_args), {}
    env = {
        "CAPABILITY_ANCHOR_DATA": str(data),
        "CAPABILITY_ANCHOR_RATE_LIMIT": "0",
        "CAPABILITY_ANCHOR_CHECKPOINT_INTERVAL": f"{INTERVAL:g}",
    }
    return serverkit.uvicorn_argv(port, 2), env


def one_run(form: str, n: int, args: argparse.Namespace, base: Path) -> Run:
    folder = base / f"{n}-{form.split()[0]}"
    data = folder / "data"
    day = build(data, args.seed)
    port = serverkit.free_port()
    argv, env = server_argv(form, data, port)
    say(f"\n{form}, round {n}: {' '.join(argv)}")
    if env:
        say("  " + " ".join(f"{k}={v}" for k, v in env.items()))
    say(f"  checkpoint interval {INTERVAL:g} s, rate limit off, a fresh log of {args.seed:,}")
    run = Run(form, n, args.connections)
    with serverkit.serving(data, argv=argv, env=env, port=port, logs=folder / "logs") as server:
        asyncio.run(run_phases(server, run, args, day, folder))
    shutil.rmtree(data, ignore_errors=True)  # the next run's disk is not this one's
    return run


@dataclass
class Library:
    """One round of the library phase: (SPEC floor, library) records/s and the load, a pair
    each."""

    round: int
    # (floor, library) records/s, (floor, library) CPU µs a record, the load after
    pairs: list[tuple[float, float, float, float, str]] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return statistics.median(lib / floor for floor, lib, *_ in self.pairs)


def library_phase(n: int, args: argparse.Namespace, base: Path) -> Library:
    """The SPEC floor and the library's batched append, alternated on the same records."""
    records = floor_records(args.library_records)
    say(f"\nlibrary, round {n}: {args.library_records:,} records, {MAX_BATCH:,} a batch")
    done = Library(n)
    per = 1e6 / len(records)  # seconds in all -> µs a record
    for k in range(LIBRARY_PAIRS):
        cpu = time.process_time()
        floor = writefloors.spec_floor(records, base, f"spec-floor-{k}.sqlite3")
        floor_cpu, cpu = (time.process_time() - cpu) * per, time.process_time()
        lib, prepare_s, store_s = bench_prepare.library_round(records, base / f"library-{k}")
        lib_cpu = (time.process_time() - cpu) * per
        shutil.rmtree(base / f"library-{k}", ignore_errors=True)
        done.pairs.append((floor, lib, floor_cpu, lib_cpu, loadavg()))
        say(
            f"  SPEC floor {floor:,.0f}/s, library {lib:,.0f}/s ({lib / floor:.2f}x; prepare "
            f"{prepare_s * per:.1f} us, store {store_s * per:.1f} us a record); CPU a record: "
            f"floor {floor_cpu:.1f} us, library {lib_cpu:.1f} us; load average {loadavg()}"
        )
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=30, help="seconds per phase (wrk: whole)")
    parser.add_argument("--connections", type=int, default=256, help="wrk's connections")
    parser.add_argument("--rounds", type=int, default=1, help="serve, uvicorn pairs")
    parser.add_argument("--phases", default=",".join(PHASES), help="comma-separated subset")
    parser.add_argument("--seed", type=int, default=100_000, help="records in each fresh log")
    parser.add_argument("--forms", default="serve,uvicorn", help="servers: serve,uvicorn")
    parser.add_argument(
        "--library-records", type=int, default=FLOOR_RECORDS, help="the library phase's"
    )
    parser.add_argument("--dir", type=Path, help="parent of the temp dir (default: disk tmp)")
    args = parser.parse_args(argv)
    args.phases = set(args.phases.split(",")) - {""}
    if not args.phases or not args.phases <= set(PHASES):
        parser.error(f"--phases: a subset of {','.join(PHASES)}")
    if "checkpoint" in args.phases and "writes" not in args.phases:
        parser.error("--phases: checkpoint runs during writes")
    args.forms = [FORMS[f] for f in args.forms.split(",") if f in FORMS]
    if not args.forms:
        parser.error("--forms: serve, uvicorn or both")
    if not 1 <= args.duration <= 300 or args.connections < 1 or args.rounds < 1 or args.seed < 1:
        parser.error("1 <= --duration <= 300, --connections, --rounds and --seed >= 1")
    if args.library_records < MAX_BATCH:
        parser.error(f"--library-records >= {MAX_BATCH}")
    if not wrkkit.available():
        raise SystemExit(f"{wrkkit.WRK} is missing (tools/dev.py wrk installs Debian's wrk)")

    now = dt.datetime.now(dt.UTC)
    say(f"bench_writes {now:%Y-%m-%d %H:%M:%S}Z, Python {sys.version.split()[0]}")
    say(f"{os.cpu_count()} CPUs, load average {loadavg()} before anything runs")
    say(f"wrk -t2 -c{args.connections} -d{args.duration:g}s --timeout {wrkkit.TIMEOUT} --latency")
    base = Path(tempfile.mkdtemp(prefix="bench-writes-", dir=args.dir or default_base()))
    runs: list[Run] = []
    libraries: list[Library] = []
    try:
        for n in range(1, args.rounds + 1):
            if "library" in args.phases:
                libraries.append(library_phase(n, args, base))
            if args.phases - {"library"}:
                runs += [one_run(form, n, args, base) for form in args.forms]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    report(runs, libraries)
    say(f"\nload average {loadavg()} at the end")
    return 0


# --- the report ---------------------------------------------------------------------------------


def rows(run: Run) -> list[tuple[str, str, str, str]]:
    """(phase, figure, load average start -> end, server CPU) lines of one run."""
    out: list[tuple[str, str]] = []  # (phase, figure); the phase's load on its first line
    h, w, p, b, r = run.healthz, run.writes, run.probe, run.batches, run.reads
    if h is not None:
        out.append(("healthz", f"{h.ok_rate:,.0f}/s, p99 {h.p99 * 1e3:.1f} ms"))
    if w is not None:
        ratio = f", {w.accepted_rate / h.ok_rate:.2f}x healthz" if h and h.ok_rate else ""
        out += [
            ("writes", f"{w.accepted_rate:,.0f} accepted/s{ratio}"),
            ("", f"503: {w.statuses['503']:,} of {w.requests:,} answers; other: {w.other:,}"),
            ("", f"p99 {w.p99 * 1e3:.0f} ms (p50 {w.p50 * 1e3:.0f} ms)"),
            ("", f"tree grew {run.grew:,} for {w.acknowledged:,} acknowledged"),
            ("", f"single-row floor {run.single_floor:,.0f}/s"),
        ]
    if p is not None:
        out.append(("", f"ack to head p99 {p.p99():.2f} s ({p.acked} probes)"))
    if b is not None:
        floor = f", {b.throughput / run.spec_floor:.2f}x SPEC floor" if run.spec_floor else ""
        out.append(("batches", f"{b.throughput:,.0f} records/s{floor}"))
        if b.throughput and "batches" in run.cpu:
            server = run.cpu["batches"] / b.throughput * 1e6
            out.append(("", f"CPU {server:.1f} us a record (floor {run.spec_floor_cpu:.1f})"))
    for name, r, load in (
        ("reads", run.reads, run.reads_load),
        ("reads-batches", run.reads_batches, run.reads_batches_load),
    ):
        if r is not None and load is not None:
            p50, p99, _ = r.quantiles()
            out.append((name, f"/proof p50 {p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms"))
            out.append(("", f"at {r.throughput:,.0f}/s beside {load.throughput:,.0f} records/s"))
    loads = {k: f"{a.split()[0]} -> {b.split()[0]}" for k, (a, b) in run.loads.items()}
    cpu = {k: f"{v:.0%}" for k, v in run.cpu.items()}
    return [(ph, fig, loads.get(ph, ""), cpu.get(ph, "")) for ph, fig in out]


Goal = tuple[str, str, bool]  # (what, figure, met)


def run_goals(run: Run) -> list[Goal]:
    found: list[Goal] = []
    h, w, p, b, r, name = run.healthz, run.writes, run.probe, run.batches, run.reads, run.name
    if w is not None and h is not None and h.ok_rate:
        x = w.accepted_rate / h.ok_rate
        goal = WRITES_VS_HEALTHZ_GOAL
        found.append((f"{name} accepted writes/s >= {goal}x healthz", f"{x:.2f}x", x >= goal))
    if w is not None:
        n503, p99 = w.statuses["503"], w.p99
        stored = f"grew {run.grew:,} for {w.acknowledged:,}, {run.samples_stored}/"
        stored += f"{len(w.samples)} samples found"
        all_there = run.grew >= w.acknowledged and run.samples_stored == len(w.samples)
        found += [
            (f"{name} no 503 at {run.connections} connections", f"{n503:,}", n503 == 0),
            (f"{name} write p99 <= 250 ms", f"{p99 * 1e3:.0f} ms", p99 <= P99_GOAL_S),
            (f"{name} every acknowledged record stored", stored, all_there),
        ]
    if p is not None:
        # A p99 of a handful of probes (the others refused) is their max: judged from 20 up.
        met = p.p99() <= 2 * INTERVAL and p.uncovered == 0 and p.acked >= MIN_PROBES
        figure = f"{p.p99():.2f} s ({p.acked} acknowledged, {p.uncovered} never covered)"
        found.append((f"{name} ack to head p99 <= {2 * INTERVAL:g} s", figure, met))
    if b is not None and run.form == SERVE and run.spec_floor:
        x = b.throughput / run.spec_floor
        goal = SERVE_VS_FLOOR_GOAL
        found.append((f"{name} batches / SPEC floor >= {goal}x", f"{x:.2f}x", x >= goal))
    if r is not None and run.reads_load is not None:
        p99 = r.quantiles()[1]
        met = p99 <= PROOF_P99_GOAL_S and r.errors == 0 and r.throughput >= 0.98 * PROOF_RATE
        figure = f"{p99 * 1e3:.1f} ms at {r.throughput:,.0f}/s, {r.errors:,} errors or skipped, "
        figure += f"writes {run.reads_load.throughput:,.0f} records/s"
        what = f"GET /proof p99 <= 10 ms at 500/s, writes at {READ_WRITES} records/s"
        found.append((f"{name} {what}", figure, met))
    return found


def pair_goals(serve: Run, uvicorn: Run) -> list[Goal]:
    sb, ub = serve.batches, uvicorn.batches
    if sb is None or ub is None:
        return []
    x = ub.throughput / sb.throughput if sb.throughput else 0.0
    n = serve.round
    return [
        (f"round {n} batches uvicorn x2 / serve >= 1.0x", f"{x:.2f}x", x >= UVICORN_VS_SERVE_GOAL),
    ]


def library_goal(lib: Library) -> Goal:
    x, goal = lib.ratio, LIBRARY_VS_FLOOR_GOAL
    pairs = ", ".join(f"{b / a:.2f}x (load {load.split()[0]})" for a, b, *_, load in lib.pairs)
    return (
        f"library r{lib.round} batched append / SPEC floor >= {goal}x",
        f"{x:.2f}x median of {pairs}",
        x >= goal,
    )


def report(runs: list[Run], libraries: list[Library]) -> None:
    if libraries:
        lines = [
            (f"r{lib.round}", f"{a:,.0f}/s", f"{b:,.0f}/s", f"{b / a:.2f}x", *cpu, load)
            for lib in libraries
            for a, b, ca, cb, load in lib.pairs
            for cpu in [(f"{ca:.1f} / {cb:.1f} us", f"{ca / cb:.2f}x")]
        ]
        say("\nlibrary (CPU: a record's CPU time, floor / library; its ratio, floor / library)")
        head = ("round", "SPEC floor", "library", "ratio", "CPU", "CPU ratio", "load after")
        print_table(head, lines)
    for form in (SERVE, UVICORN):
        lines = [(r.name, *row) for r in runs if r.form == form for row in rows(r)]
        if lines:
            say(f"\n{form}")
            print_table(("run", "phase", "figure", "load 1 min start -> end", "CPU"), lines)
    found = [library_goal(lib) for lib in libraries]
    found += [g for r in runs for g in run_goals(r)]
    if len(runs) > 1 and len({r.form for r in runs}) == 2:
        found += [g for s, u in zip(runs[0::2], runs[1::2], strict=True) for g in pair_goals(s, u)]
    say("")
    for what, figure, met in found:
        say(f"goal: {what}: {figure} {'MET' if met else 'MISSED'}")
    say("CPU: the server's processes during the phase, 100% = one core.")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(benchdoc.run("writes", main))
