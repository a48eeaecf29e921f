"""What every handler reaches the log through: the `Service` on the app's state. The reader
answers on the loop only reads bounded by design, others in threads (`read`,
docs/explanation/api-reads.md); writes go through `append` and `write`."""

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
from capability_anchor.log.handoff import prepared_decoder
from capability_anchor.log.marks import MarkWatch
from capability_anchor.service.background import Background
from capability_anchor.service.sequencing import SequencerLink
from capability_anchor.store.damage import describe
from capability_anchor.web.guards import RateLimiter

from .bodies import BodyChecker
from .settings import Settings

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

READ_THREADS = 8
"""Reads in worker threads at once per process: their own limit, apart from anyio's default
one that `write` uses, so reads stalled on the store cannot hold every thread a write needs."""


@dataclass(frozen=True, slots=True)
class Batch:
    """A checked `POST /records` batch, encoded for the sequencer (`handoff.encode_prepared`),
    its leaf hashes joined, and the log's time it was checked at (read through the
    ClockGuard, and its monotonic reading: the sequencer continues it)."""

    prepared: bytes
    hashes: bytes
    now: float
    at_mono: float


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
    marks: MarkWatch = field(init=False)
    """The damage mark and the behind state, as the request path reads them."""
    pages: dict[object, tuple[object, Any]] = field(default_factory=dict)
    """Parts of `/` kept with the store's change mark they were read under (`api/home.py`)."""

    _reads: anyio.CapacityLimiter | None = None

    def __post_init__(self) -> None:
        self.collector = StoreCollector(self.reader, self.settings.clock)
        self.marks = MarkWatch(self.settings.data_dir)

    def refuse_if_damaged(self) -> None:
        """StoreDamaged (503) once the data dir carries the damage mark (`store/damage.py`), as
        `marks` last saw it: for every request, until the service is restarted (a mark cleared
        meanwhile by a passing audit does not make what this process cached trustworthy)."""
        damage = self.marks.damage
        if damage is not None:
            raise StoreDamaged(describe(self.settings.data_dir, damage))

    async def append(self, batch: Batch, prove: bool) -> Any:
        """Append a checked batch and answer as the sequencer does: with `prove` the entries
        with anchor and proof, else `(day, [(index, duplicate)])`. By the log's sequencer, or
        (`--body-workers 0`) by this process's writer: the same committer, in-process."""
        if self.sequencer is not None:
            return await self.sequencer.append(batch.prepared, prove, batch.now, batch.at_mono)
        writer = self.writer
        prepared = prepared_decoder.decode(batch.prepared)

        def run() -> Any:
            if prove:
                return writer.append_and_prove(prepared)
            results = writer.append_prepared(prepared)
            return (results[0].day, [(r.leaf_index, r.duplicate) for r in results])

        # One clock verdict for the whole request: a jump after the append must not make its
        # checkpoint refuse (a 503 for a stored batch); see ClockGuard.pinned.
        return await self.write(self.clock.pinned(run))

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
    # Indexed: `state.service` is a failed attribute lookup before State's `__getattr__`
    # (about 3 µs, twice a request).
    service: Service = request.app.state["service"]
    return service


def day_param(value: str) -> str:
    """A `day` path or query parameter, checked and in its one spelling (SPEC §6)."""
    return parse_day(value).isoformat()
