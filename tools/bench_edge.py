#!/usr/bin/env python3
"""The HTTP edge against the Litestar floor (issue #37, "Targets"). Goals, not assertions.

    .venv/bin/python tools/bench_edge.py --dir /var/tmp/edge100k      # the issue's figures
    .venv/bin/python tools/bench_edge.py --records 5000 --duration 2 --rounds 1
    .venv/bin/python tools/bench_edge.py --phases healthz,record --forms workers2

Builds a log once (`--records` records, one per server, appended by the library in
1,000-record batches into today's UTC day, then a head; `--dir` keeps it and reuses it).
Each form runs its floor (tools/edgefloor.py: a minimal Litestar app on the service's own
server stack, in its own process) and the service side by side:
  serve     `edgefloor.py` through serve's `run_on`, and `capability-anchor serve --rate-limit 0`
  workers2  both as the ASGI form's uvicorn argv (serverkit.uvicorn_argv) with `--workers 2`
Each phase is wrk -t1 -c64 -d`--duration` (one Lua script, tools/wrkkit.py), floor then
service, `--rounds` times; the floor is always `GET /healthz` with the phase's connections:
  healthz  GET /healthz                                                   goal >= 0.7x floor
  roots    GET /roots/<day>                                                       >= 0.6x
  proof    GET /proof?day=&index=I, I uniform over the built records                >= 0.5x
  record   GET /record?id=S, S uniform over the built servers                      >= 0.35x
  writes   POST /records at -c256, one new record a request, no back-off: acknowledged/s
           >= 0.25x, 0 refusals (non-2xx answers, socket errors), and every acknowledgement
           stored: the tree (after a head, POST /checkpoint) grew by at least the acknowledged
           count, and sampled acknowledgements are in /entries at their index, same leaf hash
A rate counts 2xx answers (acknowledged records for writes); a phase is ok when the ratio
meets its goal with no refusals. CPU is the server's processes (100% = one core); the load
is the 1-minute average at the start and end of each wrk run. The 2 cores are shared by
wrk, the servers and anything else running: read the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # repo root: tests.kit

from tests.kit import serverkit

import benchdoc
import writeprobe
import wrkkit
from bench_api import Meter, RawClient, build
from benchkit import default_base, loadavg, print_table, record, say

TOOLS = Path(__file__).resolve().parent
PHASES = ("healthz", "roots", "proof", "record", "writes")
GOALS = {"healthz": 0.7, "roots": 0.6, "proof": 0.5, "record": 0.35, "writes": 0.25}
FORMS = ("serve", "workers2")
CONNECTIONS, WRITE_CONNECTIONS = 64, 256
SERVICE_APP, FLOOR_APP = "capability_anchor.api.asgi:app", "edgefloor:app"


@dataclass
class Shot:
    """One wrk run against one server."""

    wrk: wrkkit.WrkResult
    cpu: float  # the server's processes, 1.0 = one core
    load: tuple[str, str]  # 1-minute load average at start, end

    @property
    def rate(self) -> float:
        """2xx answers a second; acknowledged (not duplicate) records for writes."""
        w = self.wrk
        if w.acknowledged or w.duplicates:
            return w.accepted_rate
        return sum(n for s, n in w.statuses.items() if s.startswith("2")) / w.duration

    @property
    def refusals(self) -> int:
        w = self.wrk
        bad = sum(n for s, n in w.statuses.items() if not s.startswith("2"))
        return bad + sum(w.socket_errors.values())


@dataclass
class Row:
    phase: str
    form: str
    round: int
    floor: Shot
    service: Shot
    grew: int = 0  # writes: today's tree grew by this much
    found: int = 0  # writes: sampled acknowledgements found in /entries

    @property
    def ratio(self) -> float:
        return self.service.rate / self.floor.rate if self.floor.rate else 0.0

    @property
    def stored(self) -> bool:
        w = self.service.wrk
        return self.grew >= w.acknowledged and self.found == len(w.samples)

    @property
    def ok(self) -> bool:
        met = self.ratio >= GOALS[self.phase] and self.service.refusals == 0
        return met and (self.phase != "writes" or self.stored)


# --- the servers --------------------------------------------------------------------------------


def asgi_argv(port: int) -> list[str]:
    """The ASGI form as serverkit runs it (its protocol class), with 2 workers, on uvloop."""
    argv = serverkit.uvicorn_argv(port, 2)
    return argv if "--loop" in argv else [*argv, "--loop", "uvloop"]


def floor_argv(form: str, port: int) -> list[str]:
    if form == "serve":
        return [sys.executable, str(TOOLS / "edgefloor.py"), "--port", str(port)]
    argv = [FLOOR_APP if a == SERVICE_APP else a for a in asgi_argv(port)]
    return [*argv, "--app-dir", str(TOOLS)]


def service_argv(form: str, data: Path, port: int) -> tuple[list[str], dict[str, str]]:
    if form == "serve":
        return serverkit.serve_argv(data, port, ["--rate-limit", "0"]), {}
    env = {"CAPABILITY_ANCHOR_DATA": str(data), "CAPABILITY_ANCHOR_RATE_LIMIT": "0"}
    return asgi_argv(port), env


@contextlib.contextmanager
def servers(
    form: str, data: Path, logs: Path
) -> Iterator[tuple[serverkit.Server, serverkit.Server]]:
    """The form's floor and service, both running until the form's phases are done."""
    fport, sport = serverkit.free_port(), serverkit.free_port()
    argv, env = service_argv(form, data, sport)
    say(f"\n{form}\n  floor:   {' '.join(floor_argv(form, fport))}\n  service: {' '.join(argv)}")
    if env:
        say("           " + " ".join(f"{k}={v}" for k, v in env.items()))
    with (
        serverkit.serving(logs / "floor", argv=floor_argv(form, fport), port=fport, logs=logs) as f,
        serverkit.serving(data, argv=argv, env=env, port=sport, logs=logs) as s,
    ):
        yield f, s


# --- the phases ---------------------------------------------------------------------------------


async def shoot(
    server: serverkit.Server, script: Path, duration: int, connections: int, args: list[str]
) -> Shot:
    start = loadavg()
    with Meter(server.pid) as meter:
        result = await wrkkit.run(server.url + "/", script, duration, connections, args, threads=1)
    return Shot(result, meter.server, (start.split()[0], meter.load.split()[0]))


def load_args(phase: str, day: str, records: int, service: serverkit.Server) -> list[str]:
    if phase == "healthz":
        return wrkkit.get_args("/healthz")
    if phase == "roots":
        return wrkkit.get_args(f"/roots/{day}")
    if phase == "proof":
        return wrkkit.random_args(f"/proof?day={day}&index=%d", records)
    if phase == "record":
        # benchkit.record(i)'s server id: "urn:agent:" and i in 9 digits.
        server = str(record(0)["sub"]).replace("0" * 9, "%09d")
        return wrkkit.random_args(f"/record?id={server}", records)
    return wrkkit.post_args(service.token())


@dataclass
class Context:
    script: Path
    day: str
    records: int
    duration: int
    rounds: int


async def one_row(
    phase: str, form: str, n: int, pair: tuple[serverkit.Server, serverkit.Server], ctx: Context
) -> Row:
    """The floor's `GET /healthz`, then the service's phase, with the same connections."""
    floor, service = pair
    c = WRITE_CONNECTIONS if phase == "writes" else CONNECTIONS
    floor_shot = await shoot(floor, ctx.script, ctx.duration, c, wrkkit.get_args("/healthz"))
    load = load_args(phase, ctx.day, ctx.records, service)
    if phase != "writes":
        shot = await shoot(service, ctx.script, ctx.duration, c, load)
        return Row(phase, form, n, floor_shot, shot)
    headers = {**service.writer_headers(), "Content-Type": "application/json"}
    checks = RawClient(service.port, 2)
    try:
        before = await writeprobe.tree_size(checks, headers)
        shot = await shoot(service, ctx.script, ctx.duration, c, load)
        grew = await writeprobe.tree_size(checks, headers) - before
        found = await writeprobe.stored(checks, shot.wrk.samples)
    finally:
        await checks.aclose()
    return Row(phase, form, n, floor_shot, shot, grew, found)


async def run_form(
    form: str, pair: tuple[serverkit.Server, serverkit.Server], phases: list[str], ctx: Context
) -> list[Row]:
    rows = []
    for phase in phases:
        for n in range(1, ctx.rounds + 1):
            row = await one_row(phase, form, n, pair, ctx)
            say(f"  {phase} r{n}: floor {row.floor.rate:,.0f}/s, {form} {row.service.rate:,.0f}/s")
            rows.append(row)
    return rows


# --- the report ---------------------------------------------------------------------------------


def report(rows: list[Row]) -> None:
    head = ["phase", "form", "round", "req/s", "floor req/s", "ratio", "goal", "", "CPU"]
    head += ["floor CPU", "load floor", "load service"]
    lines = [
        (
            r.phase,
            r.form,
            f"r{r.round}",
            f"{r.service.rate:,.0f}",
            f"{r.floor.rate:,.0f}",
            f"{r.ratio:.2f}x",
            f">= {GOALS[r.phase]}x",
            "ok" if r.ok else "MISSED",
            f"{r.service.cpu:.0%}",
            f"{r.floor.cpu:.0%}",
            " -> ".join(r.floor.load),
            " -> ".join(r.service.load),
        )
        for r in rows
    ]
    print_table(head, lines)
    say("")
    for r in rows:
        w = r.service.wrk
        line = f"{r.phase} {r.form} r{r.round}: refusals {r.service.refusals:,} (statuses "
        line += f"{dict(w.statuses)}, socket errors {dict(w.socket_errors) or 0})"
        if r.phase == "writes":
            line += f"; tree grew {r.grew:,} for {w.acknowledged:,} acknowledged, {r.found}/"
            line += f"{len(w.samples)} sampled acknowledgements in /entries"
        say(line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000, help="servers in the log")
    parser.add_argument("--dir", type=Path, help="the log's data dir, kept (a log there is reused)")
    parser.add_argument("--duration", type=int, default=8, help="seconds per wrk run (whole)")
    parser.add_argument("--rounds", type=int, default=2, help="floor, service pairs per phase")
    parser.add_argument("--phases", default=",".join(PHASES), help="comma-separated subset")
    parser.add_argument("--forms", default=",".join(FORMS), help="serve, workers2 or both")
    args = parser.parse_args(argv)
    phases = [p for p in PHASES if p in args.phases.split(",")]
    forms = [f for f in FORMS if f in args.forms.split(",")]
    if not phases or set(args.phases.split(",")) - set(PHASES):
        parser.error(f"--phases: a subset of {','.join(PHASES)}")
    if not forms or set(args.forms.split(",")) - set(FORMS):
        parser.error(f"--forms: a subset of {','.join(FORMS)}")
    if args.records < 1 or args.duration < 1 or args.rounds < 1:
        parser.error("--records, --duration and --rounds >= 1")
    if not wrkkit.available():
        raise SystemExit(f"{wrkkit.WRK} is missing (tools/dev.py wrk installs Debian's wrk)")

    say(f"bench_edge {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M:%S}Z, Python {sys.version.split()[0]}")
    say(f"{os.cpu_count()} CPUs, load average {loadavg()} before anything runs")
    say(f"wrk -t1 -c{CONNECTIONS} (writes -c{WRITE_CONNECTIONS}) -d{args.duration}s")
    base = Path(tempfile.mkdtemp(prefix="bench-edge-", dir=default_base()))
    data = args.dir if args.dir else base / "data"
    rows: list[Row] = []
    try:
        day = build(data, args.records)
        ctx = Context(wrkkit.script_file(base), day, args.records, args.duration, args.rounds)
        for form in forms:
            with servers(form, data, base / "logs") as pair:
                rows += asyncio.run(run_form(form, pair, phases, ctx))
    finally:
        shutil.rmtree(base, ignore_errors=True)
        if args.dir:
            say(f"kept {data}")
    report(rows)
    say(f"\nload average {loadavg()} at the end")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(benchdoc.run("edge", main))
