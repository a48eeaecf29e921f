"""Request bodies are checked off the event loop, in a small process pool.

Validation, JCS and hashing of a body is pure Python: a 1,000-record batch is ~15 ms, a
hostile 4 MiB body much more. On the loop it stalls every request; on a thread it still
holds the GIL readers need. So `check_body` runs in `workers` processes (default 1, env
CAPABILITY_ANCHOR_BODY_WORKERS; 0 checks on the loop, for embedding). At most `queue`
bodies wait or run at a time; more get 503 `unavailable` ("busy", Retry-After: 1), so
hostile bodies cannot build an unbounded backlog. A worker that dies is replaced.

Workers are started by forkserver, never forked from the service: a fork would copy its
threads' locks and SQLite connections mid-use.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from ..bodycheck import Outcome, check_body, start_worker, warm_up
from ..observation import OBSERVATION

_logger = logging.getLogger("capability_anchor.api")


class Busy(Exception):
    """Too many bodies are being checked right now."""


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
        context.set_forkserver_preload(["capability_anchor.bodycheck"])
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

    async def check(
        self, kind: str, body: bytes, iss: str, max_records: int, rule: str = OBSERVATION
    ) -> Outcome:
        if self._pool is None:
            return check_body(kind, body, iss, max_records, rule)
        if self.pending >= self.queue:
            raise Busy
        self.pending += 1
        pool = self._pool
        try:
            loop = asyncio.get_running_loop()
            try:
                return await loop.run_in_executor(
                    pool, check_body, kind, body, iss, max_records, rule
                )
            except BrokenProcessPool:
                # A worker died (killed, out of memory): replace the pool (once, however many
                # requests saw it break) and answer 503.
                if self._pool is pool:
                    _logger.error("a body-check worker died; starting a new pool")
                    self._pool = self._new_pool()
                    pool.shutdown(wait=False, cancel_futures=True)
                raise Busy from None
        finally:
            self.pending -= 1
