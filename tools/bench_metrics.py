#!/usr/bin/env python3
"""`/metrics` scrape latency under write load (issue 21 item 5), against a real server on
127.0.0.1. A figure for the closing note, not a test assertion.

    .venv/bin/python tools/bench_metrics.py                  # serve, 10 s idle + 10 s loaded
    .venv/bin/python tools/bench_metrics.py --workers 2      # the ASGI form, 2 uvicorn workers
    .venv/bin/python tools/bench_metrics.py --duration 30 --writers 4

What it does:
  1. builds a log in a temp dir on disk, removed at the end (`Log.init`, `--records`
     records appended, a checkpoint);
  2. starts `capability-anchor serve --rate-limit 0 --metrics-token T` (or, with
     `--workers N`, `uvicorn capability_anchor.api.asgi:app --workers N`) on a free port;
  3. two phases of `--duration` seconds each: idle, then with `--writers` threads posting
     `--batch`-record batches back to back; in each, one client alternates `GET /healthz`
     (the floor: the same server, edge, access log and metrics, no work of its own) and
     `GET /metrics` (with the token), one request at a time, `--gap` seconds apart;
  4. prints, per phase, p50 and p99 of each, the ratio /metrics : /healthz, the scrape's
     size, the records appended per second and the load average (2 shared cores here: the
     generator and everything else on the machine compete with the server).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # repo root: tests.kit
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tests.kit import serverkit

import benchdoc
import benchkit
from capability_anchor.log import Log

TOKEN = "bench-metrics-token-0123456789abcdef"


def build(data: Path, n: int) -> None:
    with Log.init(data, iss=benchkit.ISS) as log:
        for start in range(0, n, 1000):
            log.append([benchkit.record(i, "b") for i in range(start, min(n, start + 1000))])
        log.checkpoint()


def writers(
    url: str, token: str, count: int, batch: int, stop: threading.Event
) -> tuple[list[int], list[threading.Thread]]:
    """`count` threads posting batches until `stop`: the records each acknowledged (growing
    as they go), and the threads."""
    done = [0] * count

    def run(k: int) -> None:
        n = 0
        with httpx.Client(base_url=url, timeout=60) as client:
            while not stop.is_set():
                records = [benchkit.record(n + j, f"w{k}-") for j in range(batch)]
                n += batch
                r = client.post(
                    "/records",
                    json={"records": records},
                    headers={"Authorization": f"Bearer {token}"},
                )
                if r.status_code == 200:
                    done[k] += batch

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(count)]
    for t in threads:
        t.start()
    return done, threads


def sample(url: str, duration: float, gap: float) -> tuple[list[float], list[float], int]:
    """(healthz latencies, metrics latencies, the last scrape's size), alternating."""
    healthz: list[float] = []
    scrapes: list[float] = []
    size = 0
    end = time.monotonic() + duration
    with httpx.Client(base_url=url, timeout=30) as client:
        client.get("/healthz")  # the connection is open before the first timing
        while time.monotonic() < end:
            t = time.perf_counter()
            assert client.get("/healthz").status_code == 200
            healthz.append(time.perf_counter() - t)
            t = time.perf_counter()
            r = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
            scrapes.append(time.perf_counter() - t)
            assert r.status_code == 200, r.text
            size = len(r.content)
            time.sleep(gap)
    return sorted(healthz), sorted(scrapes), size


def phase(name: str, url: str, token: str, args: argparse.Namespace, load: bool) -> list[str]:
    stop = threading.Event()
    done: list[int] = []
    threads: list[threading.Thread] = []
    if load:
        done, threads = writers(url, token, args.writers, args.batch, stop)
    if load:
        time.sleep(1.0)  # the writers are going before the first sample
    started = time.monotonic()
    appended_before = sum(done)
    healthz, scrapes, size = sample(url, args.duration, args.gap)
    elapsed = time.monotonic() - started
    rate = (sum(done) - appended_before) / elapsed if load else 0.0
    load_avg = benchkit.loadavg()
    stop.set()
    for t in threads:
        t.join(60)
    h50, h99 = benchkit.quantile(healthz, 0.5), benchkit.quantile(healthz, 0.99)
    m50, m99 = benchkit.quantile(scrapes, 0.5), benchkit.quantile(scrapes, 0.99)
    return [
        name,
        str(len(scrapes)),
        benchkit.ms(h50),
        benchkit.ms(h99),
        benchkit.ms(m50),
        benchkit.ms(m99),
        f"{m50 / h50:.1f}x",
        f"{m99 / h99:.1f}x",
        f"{size / 1024:.1f} KiB",
        f"{rate:,.0f}/s",
        load_avg,
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=20_000, help="records in the log first")
    p.add_argument("--duration", type=float, default=10.0, help="seconds per phase")
    p.add_argument("--writers", type=int, default=2, help="writer threads in the loaded phase")
    p.add_argument("--batch", type=int, default=100, help="records per POST /records")
    p.add_argument("--gap", type=float, default=0.05, help="seconds between samples")
    p.add_argument("--workers", type=int, default=0, help="N: the ASGI form, N uvicorn workers")
    p.add_argument("--body-workers", type=int, default=1, help="body workers per process")
    args = p.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="bench-metrics-", dir=benchkit.default_base()))
    data = base / "data"
    benchkit.say(f"building a log of {args.records:,} records in {data} ...")
    build(data, args.records)
    port = serverkit.free_port()
    if args.workers:
        argv_ = serverkit.uvicorn_argv(port, args.workers)
        form = f"uvicorn --workers {args.workers}"
    else:
        argv_ = serverkit.serve_argv(
            data, port, ["--rate-limit", "0", "--body-workers", str(args.body_workers)]
        )
        form = "serve"
    env = {
        "CAPABILITY_ANCHOR_DATA": str(data),
        "CAPABILITY_ANCHOR_METRICS_TOKEN": TOKEN,
        "CAPABILITY_ANCHOR_RATE_LIMIT": "0",
        "CAPABILITY_ANCHOR_BODY_WORKERS": str(args.body_workers),
    }
    server = serverkit.start(data, port=port, argv=argv_, env=env, logs=base)
    try:
        token = server.token()
        rows = [
            phase("idle", server.url, token, args, load=False),
            phase(f"{args.writers} writers", server.url, token, args, load=True),
        ]
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
    benchkit.say(
        f"\n/metrics vs /healthz on {form} (body workers {args.body_workers}), "
        f"{os.cpu_count()} cores; {args.duration:g} s per phase, "
        f"{args.batch}-record batches"
    )
    benchkit.print_table(
        [
            "phase",
            "scrapes",
            "healthz p50",
            "healthz p99",
            "metrics p50",
            "metrics p99",
            "p50 ratio",
            "p99 ratio",
            "scrape size",
            "appended",
            "load avg",
        ],
        rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(benchdoc.run("metrics", main))
