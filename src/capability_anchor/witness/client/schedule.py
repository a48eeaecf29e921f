"""When the log submits to its witnesses: one round now (`cosign`), and the service's
schedule (`Witnessing`): at most one submission per witness per interval, places handed out
oldest first (docs/explanation/procedures.md).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from capability_anchor.errors import CapabilityAnchorError
from capability_anchor.log.policies import check_policy, stored_policy, submitted_to
from capability_anchor.note import Policy, PolicyWitness

from .client import DEFAULT_DEADLINE_S
from .episodes import FAILED, POLICY, Episodes
from .rounds import STOPPED, STOPPED_RESULT, Outcome, submit, submit_async

if TYPE_CHECKING:
    from httpx import AsyncClient

    from capability_anchor.log import Log

_logger = logging.getLogger("capability_anchor.witnessing")

MAX_PARALLEL = 16  # witnesses asked at once by `cosign`
MAX_IN_FLIGHT = 64
"""Submissions the service has in flight at once (each an open connection, no thread)."""
STORE_THREADS = 4
"""Threads for the store's steps of the service's submissions (reads, proofs, the write)."""
MIN_GAP_S = 1.0
"""Between two submissions to one witness, whatever the interval: a witness answering at
once (a 403 retried at the next interval) is never asked in a loop."""


def run_round(
    log: Log,
    policy: Policy | None = None,
    *,
    deadline: float = DEFAULT_DEADLINE_S,
    resume: bool = False,
) -> list[Outcome]:
    """One submission to every witness of POLICY (default: the stored one) that has a URL,
    all at once, so a hanging witness costs the round one deadline, not one per witness.
    Outcomes in policy order."""
    policy = policy if policy is not None else stored_policy(log)
    witnesses = submitted_to(policy) if policy is not None else []
    if not witnesses:
        return []
    with ThreadPoolExecutor(min(MAX_PARALLEL, len(witnesses)), "cosign") as pool:
        futures = [pool.submit(submit, log, w, deadline=deadline, resume=resume) for w in witnesses]
        return [f.result() for f in futures]


class Witnessing:
    """The service's witnessing schedule (one per process doing background work)."""

    def __init__(
        self,
        log: Log,
        interval: float,
        *,
        deadline: float = DEFAULT_DEADLINE_S,
        monotonic: Callable[[], float] = time.monotonic,
        in_flight: int = MAX_IN_FLIGHT,
        on_outcome: Callable[[Outcome, float], None] | None = None,
    ) -> None:
        self.log = log
        self.interval = interval
        self.deadline = deadline
        self.max_in_flight = in_flight
        self.on_outcome = on_outcome
        """Called with each submission's outcome and its duration in seconds (metrics)."""
        self.problems = Episodes(_logger, log.clock)
        """Each witness's (and the policy's) problems: logged once per episode, counted."""
        self._monotonic = monotonic
        self._policy: tuple[bytes, tuple[str, ...], Policy] | None = None
        self._last: dict[str, float] = {}
        self._in_flight: set[str] = set()
        self._lock = threading.Lock()
        self._client: AsyncClient | None = None
        self._offload: Any = None

    def _current_policy(self) -> Policy | None:
        """The stored policy, parsed again when its text or the log's note keys changed
        (`policy FILE`, a rotation): a policy that cannot be used now is a problem episode
        (logged once), and nothing is submitted until it is fixed."""
        with self.log.store.read():
            text = self.log.store.policy()
        if text is None:
            self.problems.cleared("", POLICY)
            return None
        vkeys = self.log.read.history.vkeys()
        cached = self._policy
        if cached is None or cached[:2] != (text, vkeys):
            try:
                policy = check_policy(text, vkeys)
            except CapabilityAnchorError as exc:
                self.problems.seen("", POLICY, f"no submissions: the stored policy: {exc}")
                return None
            self._policy = cached = (text, vkeys, policy)
        self.problems.cleared("", POLICY)
        return cached[2]

    def due(self) -> list[PolicyWitness]:
        """The witnesses to submit to now, oldest first, at most the free places in flight
        (each marked in flight until its submission returns)."""
        policy = self._current_policy()
        if policy is None:
            return []
        store = self.log.store
        with store.read():
            size = store.checkpoint_size()
            states = {s.witness: s for s in store.witness_states()}
        now, wall = self._monotonic(), self.log.clock()
        ready: list[tuple[float, int, PolicyWitness]] = []
        with self._lock:
            for position, witness in enumerate(submitted_to(policy)):
                state = states.get(witness.name)
                if witness.name in self._in_flight or size == 0:
                    continue
                if state is not None and (
                    state.size >= size or state.status == STOPPED or state.retry_at > wall
                ):
                    continue
                last = self._last.get(witness.name)
                if last is not None and now - last < max(self.interval, MIN_GAP_S):
                    continue
                ready.append((-1.0 if last is None else last, position, witness))
            ready.sort(key=lambda item: item[:2])
            free = max(0, self.max_in_flight - len(self._in_flight))
            out = [witness for _, _, witness in ready[:free]]
            for witness in out:
                self._last[witness.name] = now
                self._in_flight.add(witness.name)
        return out

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._in_flight)

    async def run(self, witness: PolicyWitness) -> Outcome:
        """One submission to a witness `due` returned, on the running event loop: the
        exchange waits there, the store's steps in `STORE_THREADS` threads. A failure of the
        log's own side (a busy store) is an episode too, and re-raised."""
        import anyio

        started = time.monotonic()
        try:
            if self._offload is None:
                limiter = anyio.CapacityLimiter(STORE_THREADS)

                async def offload(fn: Callable[..., Any], *args: Any) -> Any:
                    return await anyio.to_thread.run_sync(fn, *args, limiter=limiter)

                self._offload = offload
            client = self._http()
            outcome = await submit_async(
                self.log, witness, client, self._offload, deadline=self.deadline
            )
        except Exception as exc:  # the episode names it; the caller's task holds it
            self.problems.seen(witness.name, FAILED, f"the submission failed: {exc!r}")
            raise
        finally:
            with self._lock:
                self._in_flight.discard(witness.name)
        self._account(outcome, time.monotonic() - started)
        return outcome

    def _http(self) -> AsyncClient:
        if self._client is None:
            import httpx

            limits = httpx.Limits(max_connections=self.max_in_flight, max_keepalive_connections=0)
            self._client = httpx.AsyncClient(follow_redirects=False, limits=limits)
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client (the service's shutdown, after the submissions ended)."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _account(self, outcome: Outcome, seconds: float) -> None:
        """One episode line for a problem that starts or ends, never one per submission."""
        if self.on_outcome is not None:
            self.on_outcome(outcome, seconds)
        if outcome.ok:
            self.problems.cleared(outcome.witness)
        elif outcome.problem is not None:
            level = logging.ERROR if outcome.result == STOPPED_RESULT else logging.WARNING
            self.problems.seen(outcome.witness, outcome.problem, outcome.detail, level)
