"""Request bodies are checked off the event loop, in a small process pool.

Validation, JCS and hashing of a body is pure Python: a 1,000-record batch is ~15 ms, a
hostile 4 MiB body much more. On the loop it stalls every request; on a thread it still
holds the GIL readers need. So `check_body` runs in `workers` processes (default 1, env
CAPABILITY_ANCHOR_BODY_WORKERS; 0 checks on the loop, for embedding). At most `queue`
bodies wait or run at a time; more get 503 `unavailable` ("busy", Retry-After: 1), so
hostile bodies cannot build an unbounded backlog. A worker that dies is replaced.
`POST /records` appends in these workers too, body check and append in one call
(`appendworker.py`), so the append's Python does not hold the service's GIL either.

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
from pathlib import Path
from typing import Any

from ..appendworker import check_and_append
from ..bodycheck import Outcome, check_body, start_worker, warm_up
from ..observation import OBSERVATION

_logger = logging.getLogger("capability_anchor.api")


class Busy(Exception):
    """Too many bodies are being checked right now."""


class WorkerLost(Exception):
    """The worker appending a batch died before answering: the batch may or may not have
    been committed. Re-sending it is safe: what was stored is answered `duplicate: true`."""


class BodyChecker:
    def __init__(self, workers: int, queue: int) -> None:
        if workers < 0 or queue < 1:
            raise ValueError("body workers must be >= 0 and the queue >= 1")
        self.workers = workers
        self.queue = queue
        self.pending = 0
        self._pool: ProcessPoolExecutor | None = None

    def _new_pool(self) -> ProcessPoolExecutor:
        context = multiprocessing.get_context("forkserver")
        # forkserver_tie first: the forkserver is tied to this process before it imports
        # anything else.
        context.set_forkserver_preload(
            [
                "capability_anchor.forkserver_tie",
                "capability_anchor.bodycheck",
                "capability_anchor.appendworker",
            ]
        )
        return ProcessPoolExecutor(self.workers, mp_context=context, initializer=start_worker)

    def start(self) -> None:
        """Start the workers without waiting for them (a first request waits if need be)."""
        if self.workers and self._pool is None:
            self._pool = self._new_pool()
            for _ in range(self.workers):
                self._pool.submit(warm_up)

    def stop(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    @property
    def appends(self) -> bool:
        """Whether `POST /records` appends in the workers (`append`), not in the service."""
        return self.workers > 0

    async def check(
        self,
        kind: str,
        body: bytes,
        iss: str,
        max_records: int,
        rule: str = OBSERVATION,
        now: float | None = None,
        namespace: str | None = None,
    ) -> Outcome:
        args = (kind, body, iss, max_records, rule, now, namespace)
        if self._pool is None:
            return check_body(*args)
        return await self._run(Busy, check_body, *args)

    async def append(
        self,
        body: bytes,
        iss: str,
        max_records: int,
        data_dir: Path,
        prove: bool,
        now: float,
        at_mono: float,
        public_url: str | None,
    ) -> Outcome:
        """`appendworker.check_and_append` in a worker (started now if need be). A worker
        that dies meanwhile raises WorkerLost: unlike a body check, its batch may be stored."""
        if self._pool is None:
            self.start()
        return await self._run(
            WorkerLost,
            check_and_append,
            body,
            iss,
            max_records,
            data_dir,
            prove,
            now,
            at_mono,
            public_url,
        )

    async def _run(
        self, lost: type[Exception], call: Callable[..., Outcome], *args: Any
    ) -> Outcome:
        pool = self._pool
        if pool is None:
            return call(*args)
        if self.pending >= self.queue:
            raise Busy
        self.pending += 1
        try:
            loop = asyncio.get_running_loop()
            try:
                return await loop.run_in_executor(pool, call, *args)
            except BrokenProcessPool:
                # A worker died (killed, out of memory): replace the pool (once, however many
                # requests saw it break) and answer 503.
                if self._pool is pool:
                    _logger.error("a body-check worker died; starting a new pool")
                    self._pool = self._new_pool()
                    pool.shutdown(wait=False, cancel_futures=True)
                raise lost from None
        finally:
            self.pending -= 1
