"""When the log submits to its witnesses: one round now (`cosign`), and the service's schedule
(`Witnessing`): at most one submission per witness per interval, places handed out oldest first
(docs/explanation/procedures.md). Its problems are episodes (`Episodes`): one log line when one
starts, one when it ends, never one per tick (issue #21)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from capability_anchor.errors import CapabilityAnchorError
from capability_anchor.log.policies import check_policy, stored_policy, submitted_to
from capability_anchor.note import Policy, PolicyWitness

from .client import DEFAULT_DEADLINE_S
from .rounds import STOPPED, STOPPED_RESULT, Outcome, submit, submit_async

if TYPE_CHECKING:
    from httpx import AsyncClient

    from capability_anchor.log import Log

_logger = logging.getLogger("capability_anchor.witnessing")

MAX_PARALLEL = 16  # witnesses asked at once by `cosign`
MAX_IN_FLIGHT = 64  # submissions the service has in flight (each an open connection, no thread)
STORE_THREADS = 4  # threads for the store's steps of the service's submissions
# Between two submissions to one witness, whatever the interval: a witness answering at once
# (a 403 retried at the next interval) is never asked in a loop.
MIN_GAP_S = 1.0


POLICY = "policy"  # the stored policy cannot be used now (its log lines name no current key)
FAILED = "failed"  # the submission failed on the log's side (a busy store)


@dataclass(frozen=True)
class ProblemState:
    """One (witness, kind)'s counters, as `Episodes.snapshot` returns them."""

    witness: str
    problem: str
    active: bool  # an episode of it is going on now
    episodes: int  # how many started (each logged once)
    occurrences: int  # how many times it was seen (failed submissions, skipped rounds)
    since: float | None  # the wall time the current episode started
    detail: str  # its newest message


@dataclass
class _Counts:
    episodes: int = 0
    occurrences: int = 0
    since: float | None = None
    detail: str = ""


class Episodes:
    """The problems of one process's witnessing (thread-safe)."""

    def __init__(self, logger: logging.Logger, clock: Callable[[], float] = time.time) -> None:
        self._log = logger
        self._clock = clock
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], _Counts] = {}

    def seen(self, witness: str, problem: str, detail: str, level: int = logging.WARNING) -> None:
        """PROBLEM was seen now: logged if it starts an episode, else counted."""
        ended: list[tuple[str, _Counts]] = []
        with self._lock:
            counts = self._counts.setdefault((witness, problem), _Counts())
            counts.occurrences += 1
            counts.detail = detail
            starts = counts.since is None
            if starts:
                counts.episodes += 1
                counts.since = self._clock()
                ended = self._end_locked(witness, keep=problem)
        for kind, other in ended:
            self._ended(witness, kind, other, f"now {problem}")
        if starts:
            self._log.log(
                level,
                "%s: %s (logged once: the next line says when it ends)",
                _who(witness),
                detail,
            )

    def cleared(self, witness: str, problem: str | None = None) -> None:
        """WITNESS's episode of PROBLEM (default: any) has ended: one line each."""
        with self._lock:
            ended = self._end_locked(witness, keep=None, only=problem)
        for kind, counts in ended:
            self._ended(witness, kind, counts, "resolved")

    def _end_locked(
        self, witness: str, keep: str | None, only: str | None = None
    ) -> list[tuple[str, _Counts]]:
        ended: list[tuple[str, _Counts]] = []
        for (name, kind), counts in self._counts.items():
            if name != witness or kind == keep or counts.since is None:
                continue
            if only is not None and kind != only:
                continue
            ended.append((kind, _Counts(counts.episodes, counts.occurrences, counts.since)))
            counts.since = None
        return ended

    def _ended(self, witness: str, kind: str, counts: _Counts, how: str) -> None:
        lasted = self._clock() - (counts.since or 0.0)
        self._log.info(
            "%s: the %s problem has ended (%s after %.0f s)", _who(witness), kind, how, lasted
        )

    def snapshot(self) -> list[ProblemState]:
        """Every (witness, kind) seen so far, sorted (what a metrics endpoint exports)."""
        with self._lock:
            return [
                ProblemState(
                    w, k, c.since is not None, c.episodes, c.occurrences, c.since, c.detail
                )
                for (w, k), c in sorted(self._counts.items())
            ]


def _who(witness: str) -> str:
    return f"witness {witness}" if witness else "witnessing"


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
        self.on_outcome = on_outcome  # each submission's outcome and its seconds (metrics)
        self.problems = Episodes(_logger, log.clock)  # each witness's and the policy's
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
        import httpx

        started = time.monotonic()
        try:
            if self._client is None:
                limiter = anyio.CapacityLimiter(STORE_THREADS)

                async def offload(fn: Callable[..., Any], *args: Any) -> Any:
                    return await anyio.to_thread.run_sync(fn, *args, limiter=limiter)

                self._offload = offload
                limits = httpx.Limits(
                    max_connections=self.max_in_flight, max_keepalive_connections=0
                )
                self._client = httpx.AsyncClient(follow_redirects=False, limits=limits)
            outcome = await submit_async(
                self.log, witness, self._client, self._offload, deadline=self.deadline
            )
        except Exception as exc:  # the episode names it; the caller's task holds it
            self.problems.seen(witness.name, FAILED, f"the submission failed: {exc!r}")
            raise
        finally:
            with self._lock:
                self._in_flight.discard(witness.name)
        if self.on_outcome is not None:
            self.on_outcome(outcome, time.monotonic() - started)
        # One episode line for a problem that starts or ends, never one per submission.
        if outcome.ok:
            self.problems.cleared(outcome.witness)
        elif outcome.problem is not None:
            level = logging.ERROR if outcome.result == STOPPED_RESULT else logging.WARNING
            self.problems.seen(outcome.witness, outcome.problem, outcome.detail, level)
        return outcome

    async def aclose(self) -> None:
        """Close the HTTP client (the service's shutdown, after the submissions ended)."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None
