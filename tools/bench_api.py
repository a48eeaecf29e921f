#!/usr/bin/env python3
"""HTTP API benchmarks (issue: the HTTP service) against a real server on 127.0.0.1. Goals, not
test assertions.

    .venv/bin/python tools/bench_api.py                      # the issue's figures: a 1,000,000-
                                                             # record day (~1-2 min to build)
    .venv/bin/python tools/bench_api.py --records 200000     # the same phases, faster build
    .venv/bin/python tools/bench_api.py --workers 2          # also the production form

What it does:
  1. builds a log with the library in a temp dir on disk (`--dir DIR` to choose one and keep
     it; a log already in DIR is reused): `Log.init`, `--records` records appended in
     1,000-record `Log.append` batches into today's UTC day (the server's clock), `checkpoint`;
  2. starts `capability-anchor serve --rate-limit 0` as a subprocess on a free loopback port
     (with `--workers N` then also the production form, `uvicorn
     capability_anchor.api.asgi:app --workers N` with CAPABILITY_ANCHOR_DATA);
  3. runs, against each server, these phases (each bounded in requests and in time):
     - `GET /proof?day=D&index=I`, I uniform over the day, open loop at `--proof-rate`
       (500/s) for `--duration` (10) s; 50 sampled answers are verified
                                                                   goal p99 <= 10 ms at 500/s
     - `GET /roots/D`, open loop at `--roots-rate` (2,000/s)               goal >= 2,000/s
     - `GET /roots/D`, closed loop over `--concurrency` (32) connections: the server's
       capacity (no goal: it says whether the open-loop figure was the server's limit)
     - `POST /records`, `--post-batches` (60) batches of 1,000 records from
       `--post-concurrency` (2) writers                            goal >= 10,000 records/s
     - `GET /proof` at 500/s again, the same URLs, while one writer posts 1,000-record
       batches back to back; printed beside the read-only figure  goal p99 <= 10 ms at 500/s
     - the same reads while another process appends batches through the library (no GIL
       shared with the server: what remains is machine and SQLite contention; no goal)
     - `GET /healthz` at 100/s while hostile `POST /prove` bodies arrive at 100/s (one in four
       a 4 MiB array of zeros, the others just under the 64 KiB cap) goal p99 <= 50 ms;
       the 4 MiB ones refused (413, with the body read)           goal within 100 ms
     (`--phases` picks among roots, post, writing, hostile; the read-only proofs always run)
  4. prints a table: each goal, the figure, ok/MISSED, the CPU used by the server (all its
     processes) and by the generator (100% = one core), and the load average.

Open loop: request i is due at t0 + i/rate whatever happened to earlier ones (no coordinated
omission); it is skipped, and counted as an error, when `--max-in-flight` requests are already
waiting. Latency runs from handing the request to the client (a pool of keep-alive
connections; waiting for a free one included) to the last byte of the answer; "late" is how
far behind its due time the generator started a request (a busy generator, not the server).
Throughput is 200 answers (records acknowledged, for POST) / (last answer - first due time).
A goal is met only without errors.

The generator is this process: asyncio with a minimal keep-alive HTTP/1.1 client (~40 us of
CPU a request). `--client httpx` uses httpx.AsyncClient instead: ~500 us a request, so on
this machine it cannot offer 2,000 requests/s and would measure itself, not the server.

Machines here have 2 cores, and the generator competes with the server for them (as does
anything else running: see the load average). Every figure is a lower bound of what the
server does on a machine of its own. `--pin` puts `serve` on CPU 0 and the generator on
CPU 1. `--py-spy DIR` records a py-spy profile of the server during each phase
(`--py-spy-format raw` for collapsed stacks instead of flame graphs); sampling slows the
server a little.
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
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # repo root: tests.kit

from tests.kit import serverkit

import benchdoc
from benchkit import ISS, default_base, loadavg, ms, print_table, processes, quantile, record, say
from capability_anchor import merkle
from capability_anchor.leaf import leaf_hash
from capability_anchor.log import MAX_BATCH, Log

PROOF_P99_GOAL_S = 0.010
PROOF_RATE_GOAL = 500
ROOTS_RATE_GOAL = 2000
POST_GOAL = 10_000


# --- CPU accounting -----------------------------------------------------------------------------


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU seconds of every live process in process group `pgid` (the server and
    its workers: serverkit starts it in a session of its own)."""
    return sum(p.cpu for p in processes() if p.group == pgid)


@dataclass
class Meter:
    """CPU used by the server's process group and by this process over a phase."""

    pgid: int
    wall0: float = 0.0
    server0: float = 0.0
    client0: float = 0.0

    def __enter__(self) -> Meter:
        self.wall0 = time.monotonic()
        self.server0 = group_cpu_seconds(self.pgid)
        self.client0 = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.monotonic() - self.wall0
        self.server = (group_cpu_seconds(self.pgid) - self.server0) / self.wall
        self.client = (time.process_time() - self.client0) / self.wall
        self.load = loadavg()


# --- the log ------------------------------------------------------------------------------------


def build(data: Path, n: int) -> str:
    """A log whose today holds `n` records and a head covering them; returns the day."""
    if (data / "log.sqlite3").exists():
        with Log.open(data) as log:
            day = log.today()
            size = log.store.day_size(day)
            say(f"reusing the log in {data}: {size:,} entries today ({day})")
            if size < n:
                raise SystemExit(f"the log in {data} has {size} entries today, not {n}")
            log.checkpoint()
            return day
    say(f"building a log of {n:,} records in {data} ...")
    began = time.monotonic()
    with Log.init(data, iss=ISS) as log:
        day = log.today()
        for start in range(0, n, MAX_BATCH):
            batch = [record(i) for i in range(start, min(n, start + MAX_BATCH))]
            results = log.append(batch)
            if results[0].day != day:
                raise SystemExit("the UTC day changed while building; run again")
            if (start // MAX_BATCH) % 100 == 99:
                rate = (start + len(batch)) / (time.monotonic() - began)
                say(f"  {start + len(batch):>10,} records  {rate:,.0f} rec/s")
        log.checkpoint()
    took = time.monotonic() - began
    say(f"built {n:,} records in {took:.1f} s ({n / took:,.0f} rec/s)  (load average {loadavg()})")
    return day


# --- load generation ----------------------------------------------------------------------------


@dataclass
class Phase:
    name: str
    offered: str
    sent: int = 0
    skipped: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    late: list[float] = field(default_factory=list)
    span: float = 0.0  # first due time (or send) to last answer
    items: int = 0  # records acknowledged (POST) or 200 answers (GET)
    cpu_server: float = 0.0
    cpu_client: float = 0.0
    load: str = ""
    note: str = ""

    @property
    def ok(self) -> int:
        return self.statuses.get("200", 0)

    @property
    def errors(self) -> int:
        return sum(v for k, v in self.statuses.items() if k != "200") + self.skipped

    @property
    def throughput(self) -> float:
        return self.items / self.span if self.span > 0 else 0.0

    def quantiles(self) -> tuple[float, float, float]:
        s = sorted(self.latencies)
        return quantile(s, 0.5), quantile(s, 0.99), (s[-1] if s else float("nan"))

    def describe(self) -> str:
        p50, p99, top = self.quantiles()
        late = sorted(self.late)
        bad = dict(self.statuses - Counter({"200": self.ok}))
        return (
            f"{self.name}: {self.offered}; sent {self.sent:,}, 200 {self.ok:,}, errors {bad or 0}, "
            f"skipped {self.skipped}; {self.throughput:,.0f}/s; latency p50 {p50 * 1e3:.2f} ms "
            f"p99 {p99 * 1e3:.2f} ms max {top * 1e3:.1f} ms; generator late p99 "
            f"{quantile(late, 0.99) * 1e3:.1f} ms; CPU server {self.cpu_server:.0%} "
            f"generator {self.cpu_client:.0%}; load {self.load}"
        )


class ClientError(Exception):
    """A request that got no HTTP answer (connection refused, reset, closed early)."""


Answer = tuple[int, bytes]  # (status, body)


IDLE_S = 4.0


@dataclass
class Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    used: float = field(default_factory=time.monotonic)


class RawClient:
    """A minimal HTTP/1.1 keep-alive client over asyncio streams, with a pool of
    `connections`: ~40 us of CPU per request where httpx.AsyncClient takes ~500 us, which on
    2 shared cores would otherwise make the generator, not the server, the bottleneck.

    Only what this benchmark needs: GET and POST with a Content-Length body, answers with a
    Content-Length (uvicorn sends one for every response here) or none (304)."""

    def __init__(self, port: int, connections: int) -> None:
        self.port = port
        self.host = f"{serverkit.HOST}:{port}".encode()
        self.size = connections
        self.pool: asyncio.LifoQueue[Conn | None] = asyncio.LifoQueue()
        for _ in range(connections):
            self.pool.put_nowait(None)  # opened on first use
        self.open: list[asyncio.StreamWriter] = []

    async def request(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> Answer:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {serverkit.HOST}:{self.port}"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        if body or method == "POST":
            lines.append(f"Content-Length: {len(body)}")
        raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
        conn = await self.pool.get()
        healthy = False
        try:
            if conn is not None and time.monotonic() - conn.used > IDLE_S:
                # The server drops keep-alive connections idle for 5 s (uvicorn's default); a
                # request racing that close would fail, as it would for any client.
                conn.writer.close()
                conn = None
            if conn is None:
                reader, writer = await asyncio.open_connection(
                    serverkit.HOST, self.port, limit=2**22
                )
                conn = Conn(reader, writer)
                self.open.append(writer)
            reader, writer = conn.reader, conn.writer
            writer.write(raw)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            lower = head.lower()
            if b"\r\ntransfer-encoding:" in lower:
                raise ValueError("chunked answers are not supported here")
            at = lower.find(b"\r\ncontent-length:")
            length = int(head[at + 17 : head.index(b"\r\n", at + 2)]) if at >= 0 else 0
            data = await reader.readexactly(length) if length else b""
            healthy = b"\r\nconnection: close" not in lower
            return status, data
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            raise ClientError(f"{type(exc).__name__}: {exc}") from None
        finally:
            # A connection in an unknown state (an error, a cancelled read, `close`) is dropped;
            # its slot is reopened on next use.
            if not healthy and conn is not None:
                conn.writer.close()
                conn = None
            if conn is not None:
                conn.used = time.monotonic()
            self.pool.put_nowait(conn)

    async def get(self, path: str) -> Answer:
        return await self.request("GET", path)

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> Answer:
        return await self.request("POST", path, body, headers)

    async def aclose(self) -> None:
        for writer in self.open:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


class HttpxClient:
    """The same interface over httpx.AsyncClient (`--client httpx`)."""

    def __init__(self, port: int, connections: int) -> None:
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        self.client = httpx.AsyncClient(
            base_url=f"http://{serverkit.HOST}:{port}", limits=limits, timeout=10.0
        )

    async def get(self, path: str) -> Answer:
        try:
            response = await self.client.get(path)
        except httpx.HTTPError as exc:
            raise ClientError(f"{type(exc).__name__}: {exc}") from None
        return response.status_code, response.content

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> Answer:
        try:
            response = await self.client.post(path, content=body, headers=headers)
        except httpx.HTTPError as exc:
            raise ClientError(f"{type(exc).__name__}: {exc}") from None
        return response.status_code, response.content

    async def aclose(self) -> None:
        await self.client.aclose()


Client = RawClient | HttpxClient
Request = Callable[[Client, int], Awaitable[Answer]]


async def open_loop(
    client: Client,
    request: Request,
    phase: Phase,
    rate: float,
    duration: float,
    max_in_flight: int,
    on_answer: Callable[[int, bytes], None] | None = None,
) -> None:
    """Request i at t0 + i/rate for `duration` s; then wait (at most 10 s) for the stragglers."""
    total = int(rate * duration)
    tasks: set[asyncio.Task[None]] = set()
    last_answer = 0.0
    t0 = time.perf_counter() + 0.02

    async def one(i: int, due: float) -> None:
        nonlocal last_answer
        sent = time.perf_counter()
        phase.late.append(sent - due)
        try:
            status, body = await request(client, i)
        except ClientError as exc:
            phase.statuses[str(exc).split(":")[0]] += 1
            return
        done = time.perf_counter()
        last_answer = max(last_answer, done)
        phase.statuses[str(status)] += 1
        if status == 200:
            phase.latencies.append(done - sent)
            phase.items += 1
            if on_answer is not None:
                on_answer(i, body)

    i = 0
    while i < total:
        now = time.perf_counter()
        due = t0 + i / rate
        if due > now:
            await asyncio.sleep(due - now)
            continue
        while i < total and t0 + i / rate <= now:
            if len(tasks) >= max_in_flight:
                phase.skipped += 1
            else:
                task = asyncio.create_task(one(i, t0 + i / rate))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                phase.sent += 1
            i += 1
    if tasks:
        _, pending = await asyncio.wait(set(tasks), timeout=10.0)
        for task in pending:
            task.cancel()
        if pending:
            phase.statuses["unfinished"] += len(pending)
        await asyncio.gather(*pending, return_exceptions=True)
    phase.span = max(last_answer - t0, 1e-9)


async def closed_loop(
    client: Client,
    request: Request,
    phase: Phase,
    count: int,
    concurrency: int,
    time_cap: float,
    items_of: Callable[[bytes], int] = lambda body: 1,
) -> None:
    """`concurrency` callers, each sending its next request when the last answered, until
    `count` requests were sent or `time_cap` s passed."""
    counter = iter(range(count))
    began = time.perf_counter()
    deadline = began + time_cap
    last_answer = began

    async def caller() -> None:
        nonlocal last_answer
        for i in counter:
            if time.perf_counter() > deadline:
                return
            phase.sent += 1
            sent = time.perf_counter()
            try:
                status, body = await request(client, i)
            except ClientError as exc:
                phase.statuses[str(exc).split(":")[0]] += 1
                continue
            done = time.perf_counter()
            last_answer = max(last_answer, done)
            phase.statuses[str(status)] += 1
            if status == 200:
                phase.latencies.append(done - sent)
                phase.items += items_of(body)

    await asyncio.gather(*(caller() for _ in range(concurrency)))
    phase.span = max(last_answer - began, 1e-9)


# --- the phases ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    form: str
    phases: dict[str, Phase] = field(default_factory=dict)
    wrong_proofs: int = 0
    checked_proofs: int = 0


class Spy:
    """Optionally, a py-spy flame graph of the server for one phase."""

    def __init__(
        self, out: Path | None, pid: int, name: str, seconds: float, fmt: str = "flamegraph"
    ) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        if out is None:
            return
        spy = Path(sys.executable).parent / "py-spy"
        out.mkdir(parents=True, exist_ok=True)
        raw = fmt == "raw"
        target = out / f"{name}.{'txt' if raw else 'svg'}"
        argv = [str(spy), "record", "--pid", str(pid), "--subprocesses", "--nonblocking"]
        argv += ["--duration", str(max(1, int(seconds + 0.999))), "-o", str(target)]
        argv += ["--format", "raw" if raw else "flamegraph"]
        if os.environ.get("BENCH_PY_SPY_GIL"):
            argv.append("--gil")  # only the thread holding the GIL
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.target = target
        time.sleep(0.3)  # let it attach before the load starts

    def finish(self) -> None:
        if self.proc is not None:
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            say(f"  py-spy flame graph: {self.target}")


def finish(phase: Phase, meter: Meter, outcome: Outcome, key: str) -> None:
    phase.cpu_server, phase.cpu_client, phase.load = meter.server, meter.client, meter.load
    outcome.phases[key] = phase
    say("  " + phase.describe())


def post_bodies(count: int, batch: int) -> list[bytes]:
    """`count` request bodies of `batch` new records each (a fresh tag: never duplicates)."""
    tag = os.urandom(4).hex() + ":"
    return [
        json.dumps({"records": [record(b * batch + j, tag) for j in range(batch)]}).encode()
        for b in range(count)
    ]


def acknowledged(body: bytes) -> int:
    return sum(1 for e in json.loads(body)["entries"] if not e["duplicate"])


async def run_phases(
    server: serverkit.Server, form: str, day: str, n: int, args: argparse.Namespace
) -> Outcome:
    outcome = Outcome(form=form)
    rng = random.Random(1)
    spy_dir = Path(args.py_spy) if args.py_spy else None
    slug = form.replace(" ", "_").replace("-", "")

    def spy(name: str, seconds: float) -> Spy:
        return Spy(spy_dir, server.pid, f"{slug}-{name}", seconds, args.py_spy_format)

    client: Client = (RawClient if args.client == "raw" else HttpxClient)(
        server.port, args.concurrency
    )
    headers = {"Authorization": f"Bearer {server.token()}", "Content-Type": "application/json"}
    try:
        # Warm-up (not measured): connections open, code paths and the tile cache's top
        # levels warm, as on a server that has been running for a while.
        warm_urls = [f"/proof?day={day}&index={rng.randrange(n)}" for _ in range(300)]
        warm_urls += [f"/roots/{day}"] * 300

        async def get_warm(c: Client, i: int) -> Answer:
            return await c.get(warm_urls[i])

        await closed_loop(client, get_warm, Phase("warm-up", ""), len(warm_urls), 8, 15.0)

        # 1. GET /proof at a fixed rate, random entries of the day.
        indices = [rng.randrange(n) for _ in range(int(args.proof_rate * args.duration) + 1)]
        proof_urls = [f"/proof?day={day}&index={i}" for i in indices]
        sample = set(rng.sample(range(len(indices)), min(50, len(indices))))
        answers: dict[int, bytes] = {}

        async def get_proof(c: Client, i: int) -> Answer:
            return await c.get(proof_urls[i])

        def keep(i: int, body: bytes) -> None:
            if i in sample:
                answers[i] = body

        phase = Phase("GET /proof", f"open loop {args.proof_rate:,}/s x {args.duration:g} s")
        profile = spy("proof", args.duration)
        with Meter(server.pid) as meter:
            await open_loop(
                client, get_proof, phase, args.proof_rate, args.duration, args.max_in_flight, keep
            )
        profile.finish()
        finish(phase, meter, outcome, "proof")
        # Correctness under load: the sampled answers verify against their anchors.
        for i, body in answers.items():
            outcome.checked_proofs += 1
            try:
                answer = json.loads(body)
                merkle.verify_inclusion(
                    leaf_hash(record(indices[i])),
                    answer["proof"]["leaf_index"],
                    answer["proof"]["tree_size"],
                    [bytes.fromhex(p) for p in answer["proof"]["path"]],
                    bytes.fromhex(answer["anchor"]["root"]),
                )
            except Exception:
                outcome.wrong_proofs += 1

        if "roots" in args.phases:
            await roots_phases(client, server, day, args, outcome, spy)
        if "post" in args.phases:
            await post_phase(client, server, headers, args, outcome, spy)
        if "writing" in args.phases:
            await writing_phase(client, server, get_proof, headers, args, outcome, spy)
        if "hostile" in args.phases:
            await hostile_phase(server, args, outcome)
    finally:
        await client.aclose()
    return outcome


async def roots_phases(
    client: Client,
    server: serverkit.Server,
    day: str,
    args: argparse.Namespace,
    outcome: Outcome,
    spy: Callable[[str, float], Spy],
) -> None:
    # 2. GET /roots/<day> at a fixed rate.
    roots_url = f"/roots/{day}"

    async def get_roots(c: Client, i: int) -> Answer:
        return await c.get(roots_url)

    phase = Phase("GET /roots/<day>", f"open loop {args.roots_rate:,}/s x {args.duration:g} s")
    profile = spy("roots", args.duration)
    with Meter(server.pid) as meter:
        await open_loop(
            client, get_roots, phase, args.roots_rate, args.duration, args.max_in_flight
        )
    profile.finish()
    finish(phase, meter, outcome, "roots")

    # 3. GET /roots/<day>, closed loop: what the server can do at most.
    phase = Phase(
        "GET /roots/<day> capacity",
        f"closed loop, {args.concurrency} connections, {args.duration:g} s",
    )
    with Meter(server.pid) as meter:
        await closed_loop(
            client, get_roots, phase, int(args.roots_rate * args.duration * 5),
            args.concurrency, args.duration,
        )  # fmt: skip
    finish(phase, meter, outcome, "roots_capacity")


async def post_phase(
    client: Client,
    server: serverkit.Server,
    headers: dict[str, str],
    args: argparse.Namespace,
    outcome: Outcome,
    spy: Callable[[str, float], Spy],
) -> None:
    # 4. POST /records, 1,000-record batches (encoded beforehand: the generator only sends).
    bodies = post_bodies(args.post_batches, MAX_BATCH)

    async def post(c: Client, i: int) -> Answer:
        return await c.post("/records", bodies[i], headers)

    phase = Phase(
        "POST /records",
        f"{len(bodies)} x {MAX_BATCH:,} records, {args.post_concurrency} writers",
    )
    profile = spy("post", args.duration)
    with Meter(server.pid) as meter:
        await closed_loop(
            client, post, phase, len(bodies), args.post_concurrency, 4 * args.duration,
            acknowledged,
        )  # fmt: skip
    profile.finish()
    finish(phase, meter, outcome, "post")


async def writing_phase(
    client: Client,
    server: serverkit.Server,
    get_proof: Request,
    headers: dict[str, str],
    args: argparse.Namespace,
    outcome: Outcome,
    spy: Callable[[str, float], Spy],
) -> None:
    # 5. GET /proof at a fixed rate while one writer appends batches back to back (the
    # same URLs as phase 1, so the two figures compare like with like).
    more = post_bodies(int(args.duration * 20) + 1, MAX_BATCH)

    async def post_more(c: Client, i: int) -> Answer:
        return await c.post("/records", more[i], headers)

    phase = Phase(
        "GET /proof while writing",
        f"open loop {args.proof_rate:,}/s x {args.duration:g} s, 1 writer",
    )
    writes = Phase("POST /records beside it", f"1 writer, {args.duration:g} s")
    profile = spy("proof_while_writing", args.duration)
    with Meter(server.pid) as meter:
        await asyncio.gather(
            open_loop(client, get_proof, phase, args.proof_rate, args.duration, args.max_in_flight),
            closed_loop(client, post_more, writes, len(more), 1, args.duration, acknowledged),
        )
    profile.finish()
    writes.cpu_server, writes.cpu_client, writes.load = meter.server, meter.client, meter.load
    finish(phase, meter, outcome, "proof_writing")
    outcome.phases["proof_writing_posts"] = writes
    say("  " + writes.describe())

    # 5b. The same reads while another *process* appends batches back to back through the
    # library (no GIL shared with the server): what is left is the machine's contention
    # and SQLite's, which tells how much of 5 is the in-process writer thread.
    phase = Phase(
        "GET /proof beside a writer process",
        f"open loop {args.proof_rate:,}/s x {args.duration:g} s, 1 writer process",
    )
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _WRITER_PROCESS,
            str(server.data),
            str(args.duration + 1),
            str(Path(__file__).resolve().parent),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        await asyncio.sleep(0.5)  # its imports and the log's open
        with Meter(server.pid) as meter:
            await open_loop(
                client, get_proof, phase, args.proof_rate, args.duration, args.max_in_flight
            )
    finally:
        out, _ = writer.communicate(timeout=60)
    finish(phase, meter, outcome, "proof_writer_process")
    phase.note = out.strip()
    say(f"  the writer process: {phase.note}")


_WRITER_PROCESS = """
import os, sys, time
sys.path.insert(0, sys.argv[3])
from bench_api import record
from capability_anchor.log import Log
log = Log.open(sys.argv[1], background_checkpoints=False)
tag, batches, began = os.urandom(4).hex() + ":", 0, time.monotonic()
while time.monotonic() - began < float(sys.argv[2]):
    log.append([record(batches * 1000 + j, tag) for j in range(1000)])
    batches += 1
print(f"{batches * 1000 / (time.monotonic() - began):,.0f} records/s")
"""


HOSTILE_RATE = 100  # the default public rate limit per address
HOSTILE_BIG = b'{"record":{"a":[' + b",".join([b"0"] * 2_000_000) + b"]}}"  # ~4 MiB: 413
HOSTILE_UNDER_CAP = b'{"record":{"a":[' + b",".join([b"0"] * 32_000) + b"]}}"  # parsed: 400
HEALTHZ_P99_GOAL_S = 0.050
REFUSAL_GOAL_S = 0.100


async def hostile_phase(
    server: serverkit.Server, args: argparse.Namespace, outcome: Outcome
) -> None:
    """6. `GET /healthz` at 100/s while hostile `POST /prove` bodies arrive at 100/s: 25/s
    the issue's 4 MiB array of zeros (refused by size), 75/s just under the 64 KiB cap
    (parsed in the body worker, then refused as too large a leaf). Three clients with
    connections of their own, so a request never waits behind another kind's upload or
    check: each latency is the server's."""
    probe = RawClient(server.port, 8)
    big = RawClient(server.port, 8)
    small = RawClient(server.port, 16)
    headers = {"Content-Type": "application/json"}

    async def send_big(c: Client, i: int) -> Answer:
        status, body = await c.post("/prove", HOSTILE_BIG, headers)
        return (200 if status == 413 else status), body  # the refusal is the success here

    async def send_small(c: Client, i: int) -> Answer:
        status, body = await c.post("/prove", HOSTILE_UNDER_CAP, headers)
        return (200 if status == 400 else status), body

    async def healthz(c: Client, i: int) -> Answer:
        return await c.get("/healthz")

    span = f"{args.duration:g} s"
    phase = Phase("GET /healthz beside hostile /prove", f"open loop {HOSTILE_RATE}/s x {span}")
    bigs = Phase("POST /prove 4 MiB (413)", f"open loop {HOSTILE_RATE // 4}/s x {span}")
    smalls = Phase("POST /prove ~64 KB (400)", f"open loop {HOSTILE_RATE * 3 // 4}/s x {span}")
    try:
        with Meter(server.pid) as meter:
            await asyncio.gather(
                open_loop(probe, healthz, phase, HOSTILE_RATE, args.duration, args.max_in_flight),
                open_loop(big, send_big, bigs, HOSTILE_RATE // 4, args.duration, 64),
                open_loop(small, send_small, smalls, HOSTILE_RATE * 3 // 4, args.duration, 64),
            )
    finally:
        for c in (probe, big, small):
            await c.aclose()
    for p in (bigs, smalls):
        p.cpu_server, p.cpu_client, p.load = meter.server, meter.client, meter.load
    finish(phase, meter, outcome, "hostile_healthz")
    outcome.phases["hostile_bodies"] = bigs
    outcome.phases["hostile_small"] = smalls
    say("  " + bigs.describe())
    say("  " + smalls.describe())


# --- the report ---------------------------------------------------------------------------------


def cpu(p: Phase) -> str:
    return f"{p.cpu_server:.0%} / {p.cpu_client:.0%}"


def proof_row(
    o: Outcome, key: str, what: str, extra: str = "", goal: str = "p99 <= 10 ms at 500/s"
) -> tuple[str, ...]:
    p = o.phases[key]
    p50, p99, top = p.quantiles()
    met = p99 <= PROOF_P99_GOAL_S and p.errors == 0 and p.throughput >= 0.98 * PROOF_RATE_GOAL
    met = met and o.wrong_proofs == 0
    measured = (
        f"p99 {ms(p99)} (p50 {ms(p50)}, max {ms(top)}) at {p.throughput:,.0f}/s, "
        f"{p.errors} errors{extra}"
    )
    verdict = "" if goal == "(info)" else "ok" if met else "MISSED"
    return (o.form, what, measured, goal, verdict, cpu(p), p.load)


def table(outcomes: Sequence[Outcome], n: int) -> None:
    head = ("server", "what", "measured", "goal", "", "CPU server/gen", "load avg")
    lines: list[tuple[str, ...]] = []
    for o in outcomes:
        ph = o.phases
        lines.append(
            proof_row(
                o,
                "proof",
                f"GET /proof, {n:,}-record day, read-only",
                f"; {o.checked_proofs - o.wrong_proofs}/{o.checked_proofs} sampled proofs verify",
            )
        )
        if "proof_writing" in ph:
            # Side by side with the read-only figure of the same run.
            beside = ph["proof_writing_posts"]
            lines.append(
                proof_row(
                    o,
                    "proof_writing",
                    "GET /proof while 1 writer appends 1,000-record batches",
                    f"; beside it {beside.throughput:,.0f} records/s",
                    "p99 <= 10 ms at 500/s, writing",
                )
            )
        if "proof_writer_process" in ph:
            lines.append(
                proof_row(
                    o,
                    "proof_writer_process",
                    "GET /proof while another process appends (no shared GIL)",
                    f"; beside it {ph['proof_writer_process'].note}",
                    "(info)",
                )
            )
        if "roots" in ph:
            roots, cap = ph["roots"], ph["roots_capacity"]
            r50, r99, _ = roots.quantiles()
            c50, c99, _ = cap.quantiles()
            lines += [
                (
                    o.form,
                    "GET /roots/<day>",
                    f"{roots.throughput:,.0f}/s of {args_rate(roots)} offered, "
                    f"{roots.errors} errors (p50 {ms(r50)}, p99 {ms(r99)})",
                    ">= 2,000/s",
                    "ok"
                    if roots.errors == 0 and roots.throughput >= 0.995 * ROOTS_RATE_GOAL
                    else "MISSED",
                    cpu(roots),
                    roots.load,
                ),
                (
                    o.form,
                    "GET /roots/<day> capacity",
                    f"{cap.throughput:,.0f}/s closed loop (p50 {ms(c50)}, p99 {ms(c99)}), "
                    f"{cap.errors} errors",
                    "(info)",
                    "",
                    cpu(cap),
                    cap.load,
                ),
            ]
        if "post" in ph:
            post = ph["post"]
            b50, b99, _ = post.quantiles()
            lines.append(
                (
                    o.form,
                    "POST /records, 1,000-record batches",
                    f"{post.throughput:,.0f} records/s ({post.items:,} records; batch p50 "
                    f"{b50 * 1e3:.0f} ms, p99 {b99 * 1e3:.0f} ms), {post.errors} errors",
                    ">= 10,000 rec/s",
                    "ok" if post.errors == 0 and post.throughput >= POST_GOAL else "MISSED",
                    cpu(post),
                    post.load,
                )
            )
        if "hostile_healthz" in ph:
            hz, bad, small = ph["hostile_healthz"], ph["hostile_bodies"], ph["hostile_small"]
            h50, h99, htop = hz.quantiles()
            f50, f99, ftop = bad.quantiles()
            s50, s99, _ = small.quantiles()
            lines += [
                (
                    o.form,
                    "GET /healthz while hostile /prove bodies arrive at 100/s",
                    f"p99 {ms(h99)} (p50 {ms(h50)}, max {ms(htop)}), {hz.errors} errors; "
                    f"~64 KB bodies refused {small.ok}/{small.sent} (p50 {ms(s50)}, "
                    f"p99 {ms(s99)}; others {dict(small.statuses - Counter({'200': small.ok}))})",
                    "p99 <= 50 ms",
                    "ok" if h99 <= HEALTHZ_P99_GOAL_S and hz.errors == 0 else "MISSED",
                    cpu(hz),
                    hz.load,
                ),
                (
                    o.form,
                    "POST /prove, 4 MiB array of zeros: refused",
                    f"p50 {ms(f50)}, p99 {ms(f99)}, max {ms(ftop)} ({bad.ok} of {bad.sent} "
                    "answered 413)",
                    "<= 100 ms",
                    "ok" if bad.ok == bad.sent > 0 and ftop <= REFUSAL_GOAL_S else "MISSED",
                    cpu(bad),
                    bad.load,
                ),
            ]
    print_table(head, lines)
    say("")
    say(
        f"{os.cpu_count()} CPUs, shared by the server, the load generator (this process) and "
        "anything else running (see the load average): each figure is a lower bound of the "
        "server on a machine of its own. CPU 100% = one core."
    )


def args_rate(phase: Phase) -> str:
    return phase.offered.split()[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records in the day")
    parser.add_argument("--dir", help="the log's data dir, kept (an existing log is reused)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per phase")
    parser.add_argument("--proof-rate", type=int, default=PROOF_RATE_GOAL)
    parser.add_argument("--roots-rate", type=int, default=ROOTS_RATE_GOAL)
    parser.add_argument("--concurrency", type=int, default=32, help="connections in the pool")
    parser.add_argument("--max-in-flight", type=int, default=256)
    parser.add_argument("--post-batches", type=int, default=60)
    parser.add_argument("--post-concurrency", type=int, default=2)
    parser.add_argument(
        "--workers", type=int, default=0, help="also `uvicorn ...asgi:app --workers N` (0: no)"
    )
    parser.add_argument("--only-workers", action="store_true", help="skip `serve`")
    parser.add_argument(
        "--client", choices=("raw", "httpx"), default="raw", help="the load generator's client"
    )
    parser.add_argument("--pin", action="store_true", help="serve on CPU 0, generator on CPU 1")
    parser.add_argument("--py-spy", metavar="DIR", help="py-spy profiles of each phase")
    parser.add_argument("--py-spy-format", choices=("flamegraph", "raw"), default="flamegraph")
    parser.add_argument("--serve-args", default="", help="more arguments for `serve`")
    parser.add_argument(
        "--phases",
        default="roots,post,writing,hostile",
        help="comma-separated, besides the read-only GET /proof that always runs: "
        "roots, post, writing, hostile",
    )
    args = parser.parse_args(argv)
    args.phases = set(args.phases.split(",")) - {""}
    if not args.phases <= {"roots", "post", "writing", "hostile"}:
        parser.error("--phases: roots, post, writing, hostile")
    if args.records < 1 or not 0 < args.duration <= 120 or args.post_batches < 1:
        parser.error("--records >= 1, 0 < --duration <= 120, --post-batches >= 1")
    if args.only_workers and args.workers < 1:
        parser.error("--only-workers needs --workers N")

    say(f"bench_api {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M:%S}Z, Python {sys.version.split()[0]}")
    say(f"{os.cpu_count()} CPUs, load average {loadavg()} before anything runs")
    if args.dir:
        base = data = Path(args.dir)
    else:
        base = Path(tempfile.mkdtemp(prefix="bench-api-", dir=default_base()))
        data = base / "data"
    outcomes: list[Outcome] = []
    try:
        day = build(data, args.records)
        port = serverkit.free_port()
        forms: list[tuple[str, list[str], dict[str, str]]] = []
        if not args.only_workers:
            serve_args = ["--rate-limit", "0", *args.serve_args.split()]
            forms.append(("serve", serverkit.serve_argv(data, port, serve_args), {}))
        if args.workers > 0:
            env = {"CAPABILITY_ANCHOR_DATA": str(data), "CAPABILITY_ANCHOR_RATE_LIMIT": "0"}
            argv_w = serverkit.uvicorn_argv(port, args.workers)
            forms.append((f"uvicorn --workers {args.workers}", argv_w, env))
        for name, server_argv, env in forms:
            say(f"\n{name}: {' '.join(server_argv)}")
            logs = base / "logs" if not args.dir else Path(tempfile.gettempdir())
            with serverkit.serving(data, argv=server_argv, env=env, port=port, logs=logs) as server:
                pinned = args.pin and name == "serve"
                if pinned:
                    os.sched_setaffinity(server.pid, {0})
                    os.sched_setaffinity(0, {1})
                try:
                    outcomes.append(asyncio.run(run_phases(server, name, day, args.records, args)))
                finally:
                    if pinned:
                        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
            err = [
                line for line in server.stderr().splitlines() if "capability-anchor:" not in line
            ]
            if err:
                say("  server stderr:\n    " + "\n    ".join(err[-10:]))
        table(outcomes, args.records)
    finally:
        if args.dir:
            say(f"kept {data}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(benchdoc.run("api", main))
