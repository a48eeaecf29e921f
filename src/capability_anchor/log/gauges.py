"""The log's state as gauges, read from the store when `/metrics` is scraped (a custom
collector of prometheus-client): each gauge one indexed query or a few, never a scan."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from capability_anchor.metrics.defs import PREFIX
from capability_anchor.metrics.service import STATES, state_of
from capability_anchor.read.history_proofs import quorum_met_size

from .days import next_day, utc_day

if TYPE_CHECKING:
    from . import Log

MAX_OPEN_DAYS = 3  # unsealed days reported at most, however long the service was down
QUORUM_SEARCH = 2000  # cosigned sizes read for the quorum's age (else a lower bound)


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
        for name, help_text in STATES.items():
            value = state_of(name, self.log)
            if value is not None:
                yield GaugeMetricFamily(f"{p}_{name}", help_text, value=float(value))

    def _open_days(self) -> list[tuple[str, int]]:
        log = self.log
        # The wall clock as it is: the log's own clock refuses while the clocks disagree.
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
        """`quorum_met_size` over the newest cosigned sizes, once per `witnessed_marker`."""
        if self._quorum is not None and self._quorum[0] == marker:
            return self._quorum[1]
        found = quorum_met_size(self.log.store, marker[0], QUORUM_SEARCH)
        self._quorum = (marker, found)
        return found
