"""Request bodies are checked off the event loop, in a small process pool.

Validation, JCS and hashing of a body is pure Python: a 1,000-record batch is ~15 ms, a
hostile 4 MiB body much more. On the loop it stalls every request; on a thread it still
holds the GIL readers need. So `check_body` runs in `workers` processes (default 1, env
CAPABILITY_ANCHOR_BODY_WORKERS; 0 checks on the loop, for embedding). Public bodies
(`POST /prove`) and writers' (Bearer-authenticated) have a lane each, with `workers`
processes and at most `queue` bodies waiting or running: more get 503 `unavailable`
("busy", Retry-After: 1), so hostile bodies cannot build an unbounded backlog, and a flood
of unauthenticated `/prove` bodies never takes the capacity writers need. A worker that
dies is replaced.
`POST /records` bodies are checked here and appended by the log's sequencer
(`service/sequencing.py`), a process of its own, so neither holds the service's GIL.

Workers are started by forkserver, never forked from the service: a fork would copy its
threads' locks and SQLite connections mid-use.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from capability_anchor.record.rule import OBSERVATION
from capability_anchor.service.sequencing import Busy

from .bodycheck import Outcome, check_body, start_worker, warm_up

_logger = logging.getLogger("capability_anchor.api")


def forkserver_context() -> multiprocessing.context.ForkServerContext:
    """The context every helper process of the service is started in (body workers, the
    sequencer candidate): one forkserver, which imports what they run before it forks any."""
    context = multiprocessing.get_context("forkserver")
    # forkserver_tie first: the forkserver is tied to this process before it imports
    # anything else.
    context.set_forkserver_preload(
        [
            "capability_anchor.api.forkserver_tie",
            "capability_anchor.api.bodycheck",
            "capability_anchor.service.sequencer",
        ]
    )
    return context


INLINE_BODY = 8192
"""Bodies of at most this many bytes are checked on the event loop (`BodyChecker.check`)."""
PUBLIC_BUSY_NOTE = (
    "busy: too many public POST /prove bodies are being checked; try again in a second "
    "(writers have capacity of their own)"
)
WRITER_BUSY_NOTE = "busy: too many writer batches are being checked or appended; try again"


class _Lane:
    """Worker processes and a bound of their own, for one kind of caller."""

    def __init__(self, name: str, workers: int, queue: int, busy_note: str) -> None:
        self.name = name
        self.workers = workers
        self.queue = queue
        self.busy_note = busy_note
        self.pending = 0
        self.pool: ProcessPoolExecutor | None = None

    def new_pool(self) -> ProcessPoolExecutor:
        context = forkserver_context()
        return ProcessPoolExecutor(self.workers, mp_context=context, initializer=start_worker)

    def start(self) -> None:
        if self.workers and self.pool is None:
            self.pool = self.new_pool()
            for _ in range(self.workers):
                self.pool.submit(warm_up)

    def stop(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None

    async def run(self, lost: Exception, call: Callable[..., Outcome], *args: Any) -> Outcome:
        """`call(*args)` in a worker of this lane; `lost` is raised if the worker dies."""
        pool = self.pool
        if pool is None:
            return call(*args)
        if self.pending >= self.queue:
            raise Busy(self.busy_note)
        self.pending += 1
        try:
            loop = asyncio.get_running_loop()
            try:
                return await loop.run_in_executor(pool, call, *args)
            except BrokenProcessPool:
                # A worker died (killed, out of memory): replace the pool (once, however many
                # requests saw it break) and answer 503.
                if self.pool is pool:
                    _logger.error("a %s body-check worker died; starting a new pool", self.name)
                    self.pool = self.new_pool()
                    pool.shutdown(wait=False, cancel_futures=True)
                raise lost from None
        finally:
            self.pending -= 1


class BodyChecker:
    """Two lanes, each with `workers` processes and room for `queue` bodies: public bodies
    (`POST /prove`) in one, writers' (`POST /records`, checked and appended) in the other.
    A flood of public bodies fills its own lane and gets 503 busy; it never takes a slot or
    a process a writer needs, nor makes a writer's batch wait behind it in one queue."""

    def __init__(self, workers: int, queue: int) -> None:
        if workers < 0 or queue < 1:
            raise ValueError("body workers must be >= 0 and the queue >= 1")
        self.workers = workers
        self.queue = queue
        self.public = _Lane("public", workers, queue, PUBLIC_BUSY_NOTE)
        self.writers = _Lane("writer", workers, queue, WRITER_BUSY_NOTE)

    def start(self) -> None:
        """Start the workers without waiting for them (a first request waits if need be)."""
        self.public.start()
        self.writers.start()

    def stop(self) -> None:
        self.public.stop()
        self.writers.stop()

    async def check(
        self,
        kind: str,
        body: bytes,
        iss: str,
        max_records: int,
        rule: str = OBSERVATION,
        now: float | None = None,
        namespace: str | None = None,
        *,
        writer: bool = False,
    ) -> Outcome:
        """`check_body` in the lane of the caller: `writer` for an authenticated writer. A
        body of at most INLINE_BODY bytes is checked here, on the loop: it costs less than
        the trip to a worker and back (a one-record write is ~50 us of checks), and its size
        bounds what it can cost."""
        args = (kind, body, iss, max_records, rule, now, namespace)
        if len(body) <= INLINE_BODY:
            return check_body(*args)
        lane = self.writers if writer else self.public
        return await lane.run(Busy(lane.busy_note), check_body, *args)
