"""What the service counts: every metric its processes count (`Metrics`, made by `make` once
the multiprocess folder is known: `service.py`). Imports nothing of the project, so every
layer may count (the log's own gauges are read at scrape time: `log/gauges.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client import Counter, Gauge, Histogram

PREFIX = "capability_anchor"

# Seconds: from a fast read (~1 ms) to a witness or TSA deadline and beyond.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# Records per POST /records (at most 1,000, SPEC §6).
BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
COMMIT_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


@dataclass(frozen=True)
class Metrics:
    """Every metric the processes of the service count (the store's gauges are read at
    scrape time instead, by `log.gauges.StoreCollector`)."""

    requests: Counter
    request_seconds: Histogram
    appended: Counter
    duplicates: Counter
    rejected: Counter
    batch_size: Histogram
    commit_batches: Histogram
    witness_requests: Counter
    witness_seconds: Histogram
    seals: Counter
    stamps: Counter
    store_busy: Counter
    clock_disagrees: Gauge
    lock_wait: Histogram
    lock_hold: Histogram


def make() -> Metrics:
    from prometheus_client import Counter, Gauge, Histogram

    p = PREFIX
    return Metrics(
        requests=Counter(
            f"{p}_http_requests_total",
            "HTTP requests answered, by route template (never the raw path), method and status",
            ("route", "method", "status"),
        ),
        request_seconds=Histogram(
            f"{p}_http_request_duration_seconds",
            "time from a request's start to its answer's last byte, by route template and method",
            ("route", "method"),
            buckets=LATENCY_BUCKETS,
        ),
        appended=Counter(f"{p}_records_appended_total", "records appended (new entries stored)"),
        duplicates=Counter(
            f"{p}_records_duplicate_total",
            "records sent again that were already stored that day (answered duplicate: true)",
        ),
        rejected=Counter(
            f"{p}_writes_rejected_total",
            "POST /records requests refused, by error code: nothing of them was stored",
            ("error",),
        ),
        batch_size=Histogram(
            f"{p}_batch_size_records",
            "records per appended batch (POST /records)",
            buckets=BATCH_BUCKETS,
        ),
        commit_batches=Histogram(
            f"{p}_commit_batches",
            "batches per durable commit (group commit: concurrent writers share one)",
            buckets=COMMIT_BUCKETS,
        ),
        witness_requests=Counter(
            f"{p}_witness_requests_total",
            "add-checkpoint exchanges with a policy witness, by witness and outcome "
            "(cosigned, retry-from, stop, unknown, failed)",
            ("witness", "outcome"),
        ),
        witness_seconds=Histogram(
            f"{p}_witness_request_duration_seconds",
            "time of one add-checkpoint exchange, by witness",
            ("witness",),
            buckets=LATENCY_BUCKETS,
        ),
        seals=Counter(
            f"{p}_seals_total", "days sealed (sealed) and seal attempts that failed", ("outcome",)
        ),
        stamps=Counter(
            f"{p}_stamps_total",
            "RFC 3161 stamp requests for sealed heads: stored or failed",
            ("outcome",),
        ),
        store_busy=Counter(
            f"{p}_store_busy_total",
            "store operations that found SQLite's lock held past the busy timeout "
            "(StoreBusy: the request got 503, background work retries at its next tick)",
        ),
        clock_disagrees=Gauge(
            f"{p}_clock_disagrees",
            "1 while the wall clock disagrees with the monotonic clock (appends, checkpoints "
            "and sealing paused), else 0",
            multiprocess_mode="livemax",
        ),
        lock_wait=Histogram(
            f"{p}_store_lock_wait_seconds",
            "time a write waited for the log's write lock on PostgreSQL (a replica stalled "
            "inside its transaction shows as waits of seconds; 10 s is the bound, then 503)",
            buckets=LATENCY_BUCKETS,
        ),
        lock_hold=Histogram(
            f"{p}_store_lock_hold_seconds",
            "time a write transaction held the log's write lock on PostgreSQL, from taking "
            "it to its COMMIT's answer (the serialized part of every replica's writes)",
            buckets=LATENCY_BUCKETS,
        ),
    )
