"""What the service measures: every metric its processes count (`Metrics`, made by `make`
once the multiprocess folder is known: `metrics.py`), and the log's gauges read from the
store at scrape time (`StoreCollector`, a custom collector: each gauge one indexed query or
a few, never a scan)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client import Counter, Gauge, Histogram

    from capability_anchor.log import Log

PREFIX = "capability_anchor"

# Seconds: from a fast read (~1 ms) to a witness or TSA deadline and beyond.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# Records per POST /records (at most 1,000, SPEC §6).
BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
COMMIT_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


@dataclass(frozen=True)
class Metrics:
    """Every metric the processes of the service count (the store's gauges are read at
    scrape time instead, by `StoreCollector`)."""

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
    )


# --- the store's gauges, read at scrape time ----------------------------------------------------

# Unsealed days reported at most: today and the days before it not sealed yet (normally
# yesterday for a minute after 00:00 UTC); bounded however long the service was down.
MAX_OPEN_DAYS = 3
# Cosigned sizes read, newest first, to find the newest checkpoint meeting the quorum; when
# none of them does, the age reported is the oldest one's, a lower bound (a day of
# checkpoints a minute apart is 1,440: past any alert's threshold long before).
QUORUM_SEARCH = 2000


class StoreCollector:
    """The log's state as gauges, read from the store when scraped (a custom collector)."""

    def __init__(self, log: Log, clock: Callable[[], float] = time.time) -> None:
        self.log = log
        self.clock = clock
        self._quorum: tuple[tuple[int, int, int], tuple[int | None, int | None]] | None = None

    def describe(self) -> list[Any]:
        return []  # no checks at registration: the store is read only when scraped

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        p = PREFIX
        now = self.clock()
        sizes = GaugeMetricFamily(
            f"{p}_day_tree_size",
            "entries in the tree of each open (unsealed) day, by day",
            labels=("day",),
        )
        head = GaugeMetricFamily(
            f"{p}_newest_head_age_seconds", "seconds since the newest published head's iat"
        )
        checkpoint = GaugeMetricFamily(
            f"{p}_newest_checkpoint_age_seconds",
            "seconds since the iat of the newest head the newest checkpoint covers",
        )
        quorum = GaugeMetricFamily(
            f"{p}_quorum_checkpoint_age_seconds",
            "seconds since the iat of the newest head covered by the newest checkpoint whose "
            "cosignatures meet the stored policy's quorum (+Inf while none does; at least "
            f"the age of the {QUORUM_SEARCH}th newest cosigned size when none of those does)",
        )
        store = self.log.store
        with store.read():
            for day, size in self._open_days():
                sizes.add_metric([day], size)
            newest = store.newest_published()
            if newest is not None:
                head.add_metric([], max(0.0, now - newest.iat))
            marker = store.witnessed_marker()
            if marker[0] > 0:
                checkpoint.add_metric([], self._age(marker[0], now))
                met, older_than = self._quorum_size(marker)
                if met is not None:
                    quorum.add_metric([], self._age(met, now))
                elif older_than is not None:
                    quorum.add_metric([], self._age(older_than, now))  # at least this old
                else:
                    quorum.add_metric([], math.inf)
        yield from (sizes, head, checkpoint, quorum)
        holder = store.lease_holder()
        if holder is not None:
            lease = GaugeMetricFamily(
                f"{p}_sequencer_lease_holder",
                "1 labelled with the database session holding the sequencer lease (its "
                'application_name: host and pid), 0 with holder="" while no replica holds it',
                labels=("holder",),
            )
            lease.add_metric([holder], 1.0 if holder else 0.0)
            yield lease
        from .service import STATES, state_of

        for name, help_text in STATES.items():
            value = state_of(name, self.log)
            if value is not None:
                yield GaugeMetricFamily(f"{p}_{name}", help_text, value=float(value))

    def _open_days(self) -> list[tuple[str, int]]:
        from capability_anchor.log import utc_day
        from capability_anchor.log.days import next_day

        log = self.log
        # The wall clock as it is: the log's own clock refuses while the clocks disagree,
        # and a scrape is when an operator most needs an answer.
        today = utc_day(self.clock())
        last = log.store.last_sealed_day()
        day = log.first_day if last is None else next_day(last)
        days = []
        while day <= today:
            days.append(day)
            day = next_day(day)
        return [(d, log.store.day_size(d)) for d in days[-MAX_OPEN_DAYS:]]

    def _age(self, size: int, now: float) -> float:
        """Age of the checkpoint of history `size`: its newest head (leaf size - 1)'s iat."""
        rows = self.log.store.history_heads(size - 1, size)
        return max(0.0, now - rows[0].iat) if rows else math.inf

    def _quorum_size(self, marker: tuple[int, int, int]) -> tuple[int | None, int | None]:
        """`read.history.quorum_met_size` over the QUORUM_SEARCH newest cosigned sizes,
        found once per change of what is stored (`witnessed_marker`)."""
        if self._quorum is not None and self._quorum[0] == marker:
            return self._quorum[1]
        from capability_anchor.read.history_proofs import quorum_met_size

        found = quorum_met_size(self.log.store, marker[0], QUORUM_SEARCH)
        self._quorum = (marker, found)
        return found


__all__ = ["BATCH_BUCKETS", "LATENCY_BUCKETS", "PREFIX", "Metrics", "StoreCollector", "make"]
