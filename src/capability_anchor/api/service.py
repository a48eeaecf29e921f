"""What every handler reaches the log through: the `Service` on the app's state.

Two `Log` handles per process: a *reader* and a *writer*. The writer is used only from
worker threads (`write`), serialised by the Log's own lock (a 1,000-record batch is ~50 ms
of hashing and fsync that must not stall the loop). The reader answers on the event loop
only the reads that are bounded by design (a row looked up by its key, a tile per tree
level); every other read (a listing, a scan, a signature to make or check) goes through
`read`, on a worker thread, so that a slow or stalled store stalls that request, not the
others (`/healthz` among them). Each thread reads through its own connection of the store
(`store/`), so reads in threads never see an uncommitted row either. Which read is which,
and why: docs/explanation/api-reads.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, TypeVarTuple

import anyio
from litestar import Request

from capability_anchor.encoding import parse_day
from capability_anchor.errors import StoreDamaged
from capability_anchor.log import Log
from capability_anchor.log.clockguard import ClockGuard
from capability_anchor.log.gauges import StoreCollector
from capability_anchor.store.damage import MARK_FILE, Damage, describe, found
from capability_anchor.web.guards import RateLimiter

from .background import Background
from .bodies import BodyChecker
from .sequencing import SequencerLink
from .settings import Settings

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

READ_THREADS = 8
"""Reads in worker threads at once per process: their own limit, apart from anyio's default
one that `write` uses, so reads stalled on the store cannot hold every thread a write needs."""


@dataclass
class Service:
    settings: Settings
    reader: Log
    writer: Log
    token: str
    bodies: BodyChecker
    clock: ClockGuard
    """The service's time, read by every Log of it and by the append workers' callers."""
    limiter: RateLimiter | None = None
    background: Background | None = None
    sequencer: SequencerLink | None = None
    """The link to the log's sequencer, which commits `POST /records` (None: this process
    commits them itself, `--body-workers 0`)."""
    collector: StoreCollector = field(init=False)
    """The log's state as gauges for `/metrics`, read from the reader's store at scrape time."""

    _damaged: bool = False
    _reads: anyio.CapacityLimiter | None = None

    def __post_init__(self) -> None:
        self.collector = StoreCollector(self.reader, self.settings.clock)

    def refuse_if_damaged(self) -> None:
        """StoreDamaged (503) once the data dir carries the damage mark (`store/damage.py`):
        for every request, until the service is restarted (a mark cleared meanwhile by a
        passing audit does not make what this process cached of the file trustworthy)."""
        if self._damaged or (self.settings.data_dir / MARK_FILE).exists():
            self._damaged = True
            damage = found(self.settings.data_dir) or Damage("unknown", "the mark is gone")
            raise StoreDamaged(describe(self.settings.data_dir, damage))

    async def write(self, call: Callable[[], T]) -> T:
        """Run a writer call on a worker thread (the Log serialises writers itself)."""
        return await anyio.to_thread.run_sync(call)

    async def read(self, call: Callable[[*Ts], T], *args: *Ts) -> T:
        """Run a reader call on a worker thread: for the reads not bounded by design."""
        if self._reads is None:  # made in the event loop it limits
            self._reads = anyio.CapacityLimiter(READ_THREADS)
        return await anyio.to_thread.run_sync(call, *args, limiter=self._reads)

    def close(self) -> None:
        self.reader.close()
        self.writer.close()


def service_of(request: Request[Any, Any, Any]) -> Service:
    service: Service = request.app.state.service
    return service


def day_param(value: str) -> str:
    """A `day` path or query parameter, checked and in its one spelling (SPEC §6)."""
    return parse_day(value).isoformat()


__all__ = ["Service", "day_param", "service_of"]
